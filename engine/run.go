package engine

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wardenhq/warden/engine/broker"
	"github.com/wardenhq/warden/engine/caps"
	"github.com/wardenhq/warden/engine/hooks"
	"github.com/wardenhq/warden/engine/jail"
	"github.com/wardenhq/warden/engine/sdk/protocol"
	"github.com/wardenhq/warden/storage"
)

// Jail modes.
const (
	// JailAuto: bwrap where it can make its namespaces, else landlock.
	JailAuto  = jail.BackendAuto
	JailBwrap = jail.BackendBwrap
	// JailLandlock: Landlock and seccomp, no namespace (docs/jail.md).
	JailLandlock = jail.BackendLandlock
	JailOff      = "off"
)

// RunRecord is one hook run.
type RunRecord = storage.RunRecord

// Line is one stream line.
type Line = storage.Line

// LineFilter and LineScan are a stream scan's filter and outcome
// (Facade.StreamScan).
type (
	LineFilter = storage.LineFilter
	LineScan   = storage.LineScan
)

// RunRequest asks for a hook run.
type RunRequest struct {
	Module string
	Hook   string
	// Inputs are typed values (from a form or JSON); RawInputs are CLI
	// k=v strings parsed by the hook's declared types. Use one or the other.
	Inputs    map[string]any
	RawInputs map[string]string
	// Jail is JailAuto, JailBwrap, JailLandlock or JailOff, which must
	// be asked for; "" is the engine's Options.Jail (default auto).
	Jail string
	// Confirm answers operator.confirm inline (a terminal prompt). Without
	// it, requests wait for an attached operator, or are answered "no" at
	// once when none is attached.
	Confirm func(ctx context.Context, message string) (bool, error) `json:"-"`
	// Client and Session, for a run an MCP client asked for through
	// `warden mcp serve` (after GateMCP let it through): the run's
	// receipts name the client ("mcp:<client>") as actor, with the
	// session, and who relayed it.
	Client  string `json:",omitempty"`
	Session string `json:",omitempty"`
	// Ticket is the one GateMCP gave for the call (MCPGate.Ticket); it
	// must match Client, Session and the hook's tool. What let the call
	// through is taken from it for the receipts.
	Ticket string `json:",omitempty"`
	// Command, instead of Module and Hook, runs the operator's own
	// program (`warden run`, command_run.go).
	Command *CommandRun `json:",omitempty"`
	// TTY, for a command run, gives its process a terminal of this size,
	// which RunHandle.TTY reaches (tty_relay.go).
	TTY *TTYSize `json:",omitempty"`
}

// Outcome is how a run ended.
type Outcome struct {
	Run      RunRecord     `json:"run"`
	Duration time.Duration `json:"duration"`
	// Refused are the destinations the run's egress proxy refused, each
	// once, in order (what `warden run --learn` reports).
	Refused []string `json:"refused,omitempty"`
}

// OK is true for a successful run.
func (o Outcome) OK() bool { return o.Run.Status == storage.RunSucceeded }

// RunHandle follows a started run.
type RunHandle struct {
	ID string
	// Jail is the backend the run got (bwrap, landlock, off), and Limits
	// how its resource limits stand ("", "on", "rlimit": RunNote).
	Jail   string
	Limits string
	// TTY is the socket of the run's terminal, for a run asked for with
	// one (tty_relay.go).
	TTY    string
	done   chan struct{}
	out    Outcome
	r      *activeRun // nil for a run followed from another process
	cancel func(reason string)
}

// NewRunHandle makes a handle for a run that lives elsewhere (another
// process's engine, reached over its control socket): cancel asks that
// engine to stop it, for a reason ("" for the operator's), and end,
// called exactly once, records its outcome and releases Wait and Done.
func NewRunHandle(id string, cancel func(reason string)) (h *RunHandle, end func(Outcome)) {
	h = &RunHandle{ID: id, done: make(chan struct{}), cancel: cancel}
	return h, func(o Outcome) {
		h.out = o
		close(h.done)
	}
}

// Wait blocks until the run has ended and its receipt is written.
func (h *RunHandle) Wait() Outcome {
	<-h.done
	return h.out
}

// Done is closed when the run has ended.
func (h *RunHandle) Done() <-chan struct{} { return h.done }

// Cancel stops the run (SIGTERM, then SIGKILL), as the operator's doing.
func (h *RunHandle) Cancel() { h.CancelFor("") }

// maxCancelReason bounds a cancel's reason (it reaches the run's record
// and its receipt, and may come over the control socket).
const maxCancelReason = 200

// CancelFor stops the run for a reason the run's record and receipt
// keep ("cancelled by SIGTERM to warden hook run (pid 42)"); "" is the
// operator's cancel. The reason is folded onto one line and bounded.
func (h *RunHandle) CancelFor(reason string) {
	reason = strings.Join(strings.Fields(reason), " ")
	if len(reason) > maxCancelReason {
		reason = strings.ToValidUTF8(reason[:maxCancelReason], "") + "…"
	}
	if h.r == nil {
		h.cancel(reason)
		return
	}
	if reason == "" {
		reason = "cancelled by the operator"
	}
	h.r.cancel(reason)
}

// RunningHere lists the runs this engine started that have not ended,
// oldest first: what its Close cancels.
func (e *Engine) RunningHere() []RunRecord {
	e.runsMu.Lock()
	defer e.runsMu.Unlock()
	out := make([]RunRecord, 0, len(e.active))
	for _, h := range e.active {
		if h.r != nil {
			out = append(out, h.r.rec)
		}
	}
	slices.SortFunc(out, func(a, b RunRecord) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// subject is the policy subject of the run's decisions: its module's,
// or for a command run its profile's.
func (r *activeRun) subject() string {
	if r.command != nil {
		return r.command.Subject()
	}
	return "module:" + r.rec.Module
}

// Run limits that are not per hook.
const (
	DefaultStreamLimit  = 64 << 20 // stored bytes per run
	DefaultStreamBudget = 1 << 30  // stored bytes across runs
	brokerLinger        = 10 * time.Second
)

// activeRun is a run in flight: the broker's Handler and the executor's
// sink both land here.
type activeRun struct {
	e        *Engine
	rec      RunRecord
	jail     jail.Backend // nil: unjailed
	manifest *hooks.Manifest
	hook     *hooks.Hook
	inputs   map[string]any
	token    string
	tok      *caps.Minted // recorded with the start receipt
	confirm  func(context.Context, string) (bool, error)
	actor    string // "run:<id>": who the hook's own writes are recorded as
	session  string // the MCP session that asked for the run, if one did
	// command, for a run of the operator's own program (`warden run`),
	// and its jail's part (whose Home prepare makes).
	command *CommandRun
	jc      *jail.Command
	tty     *ttyRelay // a run with a terminal
	ttySize *TTYSize
	// mcpDetails go into the start receipt of a run an MCP client asked for.
	mcpDetails map[string]any
	// limits is how the run's resource limits stand, for its receipts:
	// "" unjailed, "on", or "off" when no cgroup could hold them.
	limits string

	proc    atomic.Pointer[hooks.Process]
	egress  *egressRun // egress mode only (egress_run.go)
	ingest  *ingester
	brk     *broker.Broker
	started time.Time

	mu         sync.Mutex
	outputs    map[string]json.RawMessage
	resultErr  string // why a result was refused
	hookErr    *protocol.ErrorBody
	cancelWhy  string
	cancelOnce sync.Once
	// lines counts the run's output lines, and firstErr is the first of
	// stderr: what the jail's ExplainExit reads of a failed run.
	lines    int
	firstErr string
	// tokenRefused counts the refused connections of each token class
	// past the first, which alone is receipted (see Authorize).
	tokenRefused map[caps.Class]int

	streamLater []storage.Line // lines said before the stream exists (StartRun's goroutine only)

	network        bool           // granted network (newRun)
	networkDetails map[string]any // how it was decided, for the start receipt

	// contextFrame is the run's context, encoded, as of config generation
	// contextGen (EncodedContext).
	contextMu    sync.Mutex
	contextFrame []byte
	contextGen   uint64
}

// CancelRun cancels a running hook.
func (e *Engine) CancelRun(actor Actor, id string) error {
	if err := e.authorize(actor, "cancel run "+id); err != nil {
		return err
	}
	e.runsMu.Lock()
	h := e.active[id]
	e.runsMu.Unlock()
	if h == nil {
		return storage.Mark(ErrNotFound, "run %s is not running here", id)
	}
	h.r.cancel("cancelled by " + string(actor))
	return nil
}

func (r *activeRun) cancel(why string) {
	r.cancelOnce.Do(func() {
		r.mu.Lock()
		r.cancelWhy = why
		r.mu.Unlock()
		if p := r.proc.Load(); p != nil {
			p.Cancel(why)
		}
	})
}

// streamFailed stops the hook once its stream can no longer be stored (a
// full disk): an untrusted hook must not go on with nothing recorded of
// what it says. Called once, by the ingester.
func (r *activeRun) streamFailed(err error) {
	if p := r.proc.Load(); p != nil {
		p.Cancel("its stream could not be stored")
	}
}

// output is the executor's sink: stdout is info, stderr is warn.
func (r *activeRun) output(lines []hooks.OutputLine) {
	if r.jail != nil {
		r.mu.Lock()
		for _, l := range lines {
			if l.Stderr && r.firstErr == "" {
				r.firstErr = l.Text
			}
		}
		r.lines += len(lines)
		r.mu.Unlock()
	}
	batch := make([]storage.Line, len(lines))
	for i, l := range lines {
		lvl := storage.LevelInfo
		if l.Stderr {
			lvl = storage.LevelWarn
		}
		batch[i] = storage.Line{At: l.At, Level: lvl, Text: l.Text}
	}
	r.ingest.add(batch)
}

// streamLine records one engine-made line in the run's stream.
func (r *activeRun) streamLine(lvl storage.Level, text string) {
	r.ingest.add([]storage.Line{{At: time.Now(), Level: lvl, Text: text}})
}

// say is streamLine, or, before the stream exists (StartRun asking for
// network before spawn), a line kept for when it does.
func (r *activeRun) say(lvl storage.Level, text string) {
	if r.ingest == nil {
		r.streamLater = append(r.streamLater, storage.Line{At: time.Now(), Level: lvl, Text: text})
		return
	}
	r.streamLine(lvl, text)
}

// hookNames lists m's hooks, for an error that names what there is.
func hookNames(m *hooks.Manifest) string {
	return namesOrNone(slices.Sorted(maps.Keys(m.Hooks)))
}

// namesOrNone joins names with commas; "none" when there are none.
func namesOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
