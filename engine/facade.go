package engine

import (
	"context"
	"encoding/json"

	"github.com/wardenhq/warden/engine/hands"
	"github.com/wardenhq/warden/storage"
)

// Facade is the engine as the CLI, the console and the SSH server see it:
// plain request/response methods plus Subscribe for events. *Engine is
// the engine itself, in this process; cmd/serve/control's Client is one that
// another warden process holds, reached over that data dir's control
// socket. Callers hold a Facade and cannot tell the two apart, except that
// a Client's subscription can end with the serving process.
//
// Every method that changes something takes the Actor it is done for; an
// engine serving a control socket replaces it with the connecting
// process's own identity (local:<user>), which it learns from the kernel.
//
// Facade is the sum of role interfaces, one per part of the engine a
// caller needs: a console pane takes the one role it works with.
type Facade interface {
	// Close lets go of the engine: an *Engine cancels its running hooks
	// and closes the store; a Client only hangs up.
	Close() error
	DataDir() string
	// AttachOperator says an operator is watching for requests (until
	// detach is called): operator.confirm then waits for a decision
	// instead of being answered "no" at once.
	AttachOperator() (detach func())
	// JailBackend is the backend a run asked for with mode would get
	// here ("" for the engine's own mode: config.yaml, else auto), or
	// why none can run: the console's header shows it.
	JailBackend(mode string) (string, error)
	// LimitsReady says why jailed runs' memory, pids and cpu limits
	// cannot be enforced here (nil when they can).
	LimitsReady() error

	Runs
	Streams
	Receipts
	Requests
	Modules
	Settings
	Hands
	MCP
}

// Runs starts, stops and lists hook runs.
type Runs interface {
	StartRun(actor Actor, req RunRequest) (*RunHandle, error)
	CancelRun(actor Actor, id string) error
	RunsBefore(before string, limit int) ([]RunRecord, error)
	LiveRuns() ([]RunRecord, error)
	Runs(limit int) ([]RunRecord, error)
	Run(id string) (RunRecord, error)
}

// Streams reads runs' output, and follows what happens.
type Streams interface {
	Subscribe() *Subscription
	StreamLines(run string, from uint64, max int) ([]Line, error)
	StreamLinesBefore(run string, before uint64, max int) ([]Line, error)
	StreamInfo(run string) (storage.StreamMeta, error)
	// StreamScan looks at a run's lines from line from on (or before it,
	// backward) and returns those passing f: at most max, after looking
	// at about scan lines. The console's level filter and search.
	StreamScan(run string, from uint64, backward bool, f LineFilter, max, scan int) (LineScan, error)
}

// Receipts reads and verifies the receipt chain and its trust root.
type Receipts interface {
	Receipts(f ReceiptFilter) ([]Receipt, error)
	Receipt(seq uint64) (Receipt, error)
	VerifyReceipts() (Verification, error)
	VerifyReceiptsSince(seq uint64) (Verification, error)
	TrustStatus() (TrustStatus, error)
	RotateTrust(actor Actor) (TrustStatus, error)
}

// Requests are the policies and the permission requests an operator
// decides.
type Requests interface {
	Policy(subject string) (p Policy, exists bool, err error)
	SetPolicy(actor Actor, p Policy, expected uint64) (Policy, error)
	Requests(f RequestFilter) ([]Request, error)
	Request(id uint64) (Request, error)
	Approve(actor Actor, id uint64, reason string) (Request, error)
	ApproveAlways(actor Actor, id uint64, reason string) (Request, Rule, Policy, error)
	// ApproveAlwaysTool is ApproveAlways for an MCP tool call, with a
	// rule for the whole tool (see mcp.go).
	ApproveAlwaysTool(actor Actor, id uint64, reason string) (Request, Rule, Policy, error)
	Deny(actor Actor, id uint64, reason string) (Request, error)
}

// Modules adds, removes and plans modules.
type Modules interface {
	AddModule(actor Actor, path string) (*Module, error)
	RemoveModule(actor Actor, id string) error
	Modules() ([]Module, error)
	Module(id string) (*Module, error)
	PlanHook(module, hook string, raw map[string]string) (*HookPlan, error)
}

// Settings are modules' secrets and config.
type Settings interface {
	SetSecret(actor Actor, module, name, value string) error
	DeleteSecret(actor Actor, module, name string) (existed bool, err error)
	SecretNames(module string) ([]string, error)
	SetConfig(actor Actor, module, name, value string) error
	DeleteConfig(actor Actor, module, name string) (existed bool, err error)
	Config(module, name string) (value string, ok bool, err error)
	ConfigAll(module string) (map[string]string, error)
}

// MCP is the MCP gateway (`warden mcp serve`): see mcp.go.
type MCP interface {
	GateMCP(ctx context.Context, actor Actor, c MCPCall) (MCPGate, error)
	RefuseMCP(actor Actor, c MCPCall, why string) error
	HoldMCPSession(ctx context.Context, actor Actor, s MCPSession) error
	MCPSessions() ([]MCPSession, error)
	MCPHands(ctx context.Context, actor Actor, c MCPCall) (json.RawMessage, error)
}

// Hands sets up, checks and finishes hands roots.
type Hands interface {
	HandsInit(ctx context.Context, actor Actor, opts hands.InitOptions) (hands.InitResult, error)
	HandsFinish(ctx context.Context, actor Actor, root string, progress func(step, detail string)) (hands.FinishResult, error)
	HandsStatus(ctx context.Context, root string) (hands.StatusReport, error)
	HandsList() ([]HandsRecord, error)
	HandsImages(ctx context.Context, socket string) ([]HandsImage, error)
	HandsEngine(ctx context.Context, socket string) (HandsEngineInfo, error)
	ValidateHandsRoot(path string) error
	MakeHandsRootParent(actor Actor, path string) ([]string, error)
	ValidateHandsSocket(path string) error
}

var _ Facade = (*Engine)(nil)
