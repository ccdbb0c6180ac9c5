// Package engine is warden's facade (Facade, implemented by *Engine): the
// one surface the CLI, the console, the SSH console and the control socket
// (cmd/serve/control, which serves it to other warden processes) call.
// Storage is the truth; every event a subscriber sees is durable before it
// is published. docs/architecture.md maps the packages and a run's flow.
package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/wardenhq/warden/engine/broker"
	"github.com/wardenhq/warden/engine/caps"
	"github.com/wardenhq/warden/engine/hooks"
	"github.com/wardenhq/warden/engine/jail"
	"github.com/wardenhq/warden/engine/jail/cgroup"
	"github.com/wardenhq/warden/engine/perms"
	"github.com/wardenhq/warden/storage"
)

// Re-exported so callers above the engine never import storage.
type (
	Receipt       = storage.Receipt
	ReceiptFilter = storage.ReceiptFilter
	Verification  = storage.Verification
	TrustStatus   = caps.Status
)

// Receipt kind families, for filters and views above the engine (every
// kind is a storage.Kind* constant).
const (
	KindFamilyHook    = storage.KindFamilyHook
	KindFamilyModule  = storage.KindFamilyModule
	KindFamilyHands   = storage.KindFamilyHands
	KindFamilyPolicy  = storage.KindFamilyPolicy
	KindFamilyRequest = storage.KindFamilyRequest
	KindFamilyMCP     = storage.KindFamilyMCP

	KindMCPConnect    = storage.KindMCPConnect
	KindMCPDisconnect = storage.KindMCPDisconnect

	KindHookEnd        = storage.KindHookEnd
	KindNetworkConnect = storage.KindNetworkConnect
)

// KindFamilies are the families of every receipt kind, each ending in ".".
func KindFamilies() []string { return storage.KindFamilies() }

// ValidRunID reports whether id has the shape of a run id.
func ValidRunID(id string) bool { return storage.ValidRunID(id) }

// Errors callers may test for.
var (
	ErrNotFound = storage.ErrNotFound
)

// Actor names who asks for a change; receipts carry it.
// Local operators are "local:<user>".
type Actor string

// LocalActor is the operator at this terminal.
func LocalActor() Actor {
	name := fmt.Sprint(os.Geteuid())
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	return Actor("local:" + name)
}

// Options configure Open.
type Options struct {
	DataDir     string
	LockTimeout time.Duration // default 1s
	// SubscriberBuffer bounds each subscriber's queue (default 4096).
	SubscriberBuffer int
	// StreamLimit bounds one run's stored stream bytes (default 64 MiB);
	// StreamBudget bounds them across runs (default 1 GiB).
	StreamLimit  uint64
	StreamBudget uint64
	// BwrapPath is the bubblewrap binary (default /usr/bin/bwrap; never
	// searched on PATH).
	BwrapPath string
	// Jail is the jail mode of a run that asks for none (config.yaml
	// `jail`): JailAuto (the default), JailBwrap or JailLandlock.
	Jail string
	// LimitCeiling is the operator's ceiling of hooks' resource limits
	// (config.yaml `limits`); zero fields are hooks.DefaultCeiling's.
	LimitCeiling hooks.Resources

	// egress: test-only proxy settings (egress_run.go); unexported, so
	// no CLI flag or config file reaches them.
	egress egressOptions
	// streamCommitEvery: test-only; the ingester's commit spacing
	// (default streamCommitEvery).
	streamCommitEvery time.Duration
	// helper: test-only; the binary bound as the jail's warden instead of
	// jail.FindHelper's pick (benchmarks set warden-hook or the full
	// binary, built for the purpose, where the test binary runs).
	helper string
}

// Engine is an open data dir with everything that runs on it.
type Engine struct {
	store *storage.Store
	auth  *caps.Authority
	bus   *bus
	opts  Options

	// runsMu guards active, lingering, lingerDirs and closing, and
	// nothing else: a run's own state is its activeRun's. Close sets
	// closing under it, so that a run ending during shutdown removes its
	// broker at once instead of starting a linger timer nobody waits for.
	runsMu     sync.Mutex
	active     map[string]*RunHandle          // the runs started and not yet ended, by run id
	lingering  map[*broker.Broker]*time.Timer // ended runs' brokers still answering run_ended
	lingerDirs map[*broker.Broker]string      // each lingering broker's run dir, removed with it
	closing    bool

	// capabilities is what hooks may call (defaultCapabilities); it is
	// not changed once the engine is open.
	capabilities capabilityRegistry
	// requestTTL is how long a new permission request waits for a
	// decision (DefaultRequestTTL).
	requestTTL time.Duration

	// jails picks each run's jail backend (jail.Chooser).
	jails *jail.Chooser
	// noLimits: jailed runs get no resource limits (no cgroup, unsized
	// tmpfs, no RLIMIT_NPROC). Only the benchmark sets it: the baseline
	// of what the limits cost.
	noLimits bool

	// gate is where every call that needs an operator's word asks
	// (gate.go): it holds the waiting calls, the attached operators and
	// the MCP tickets.
	gate *askGate
	// mcpRefusals bounds the receipts of MCP sessions' refused calls.
	mcpRefusals mcpRefusals

	// roles are the registered roles of non-local actors (see SetRole).
	rolesMu sync.RWMutex
	roles   map[Actor]Role

	// life is cancelled by Close, so waits that belong to no run yet
	// (a network request before spawn) end with the engine.
	life     context.Context
	shutdown context.CancelFunc

	// mcp are the MCP clients connected now (see HoldMCPSession).
	mcp mcpSessions

	// pruneKick wakes the stream pruner (see prune.go); pruned is closed
	// when it has stopped.
	pruneKick chan struct{}
	pruned    chan struct{}
	// pruneMu serializes pruning passes; pruneFailed (under it) is set
	// once a failed pass has been receipted.
	pruneMu     sync.Mutex
	pruneFailed bool

	// newRunID is the store's id generator (a test may force a collision).
	newRunID func(time.Time) string
}

// Open opens the data dir and the store, and loads the trust root.
func Open(opts Options) (*Engine, error) {
	if opts.DataDir == "" {
		d, err := storage.DefaultDir()
		if err != nil {
			return nil, err
		}
		opts.DataDir = d
	}
	if opts.SubscriberBuffer <= 0 {
		opts.SubscriberBuffer = DefaultSubscriberBuffer
	}
	if opts.StreamLimit == 0 {
		opts.StreamLimit = DefaultStreamLimit
	}
	if opts.StreamBudget == 0 {
		opts.StreamBudget = DefaultStreamBudget
	}
	e := &Engine{bus: newBus(), opts: opts, jails: jail.NewChooser(opts.BwrapPath), active: map[string]*RunHandle{}, lingering: map[*broker.Broker]*time.Timer{},
		lingerDirs:   map[*broker.Broker]string{},
		capabilities: defaultCapabilities(), requestTTL: DefaultRequestTTL}
	st, err := storage.Open(storage.Options{Dir: opts.DataDir, LockTimeout: opts.LockTimeout, OnCommit: e.receiptsCommitted})
	if err != nil {
		return nil, err
	}
	e.store = st
	e.jails.Cache = &jail.ProbeCache{Path: filepath.Join(st.Dir(), jail.ProbeCacheName)}
	e.gate = newAskGate(st, e.bus)
	e.newRunID = st.NewRunID
	if e.auth, err = caps.Open(st, string(LocalActor())); err != nil {
		st.Close()
		return nil, err
	}
	// Tokens of finished runs are worthless after a week; keep the bucket
	// small. On a full disk both this and the reconciling wait for the
	// next open: reading (logs, receipts, doctor) must still work.
	if _, err := e.auth.Prune(7 * 24 * time.Hour); err != nil && !storage.IsNoSpace(err) {
		st.Close()
		return nil, err
	}
	if err := e.reconcileRuns(); err != nil && !storage.IsNoSpace(err) {
		st.Close()
		return nil, err
	}
	e.life, e.shutdown = context.WithCancel(context.Background())
	e.startPruner()
	return e, nil
}

// reconcileRuns closes the books on runs a previous engine left running
// (it crashed or was killed): only one engine holds the store, so any
// "running" run now is one nobody is running. Its process died with that
// engine (Pdeathsig, --die-with-parent). Each gets its hook.end and its
// token revoked, in one commit.
//
// It reads only the index of live runs, kept by the transactions that
// start and end runs, so it costs the same after 100,000 runs as after 10.
func (e *Engine) reconcileRuns() error {
	var runs []RunRecord
	if err := e.store.View(func(tx *storage.Tx) (err error) {
		runs, err = tx.LiveRuns()
		return err
	}); err != nil {
		return err
	}
	for _, r := range runs {
		// Its processes died with its engine; its cgroup did not. A
		// landlock stage that did not die is ended by its stamp first.
		stage := ""
		if !engineAlive(r) {
			stage = e.endStage(r.ID)
		}
		swept := sweepDeadRun(r)
		now := time.Now().UTC()
		r.Status, r.Ended = storage.RunFailed, &now
		r.Error = fmt.Sprintf("the engine (pid %d) stopped while the run was in progress", r.PID)
		details := map[string]any{"run": r.ID, "verdict": r.Status, "jail": r.JailMode, "error": r.Error}
		if swept != "" {
			details["cgroup"] = swept
		}
		if stage != "" {
			details["stage"] = stage
		}
		if _, err := e.store.UpdateReserved(func(tx *storage.Tx) error {
			if err := tx.PutRun(r); err != nil {
				return err
			}
			if _, err := tx.AppendReceipt(storage.Draft{Kind: storage.KindHookEnd, Actor: "engine", Subject: r.Module + "/" + r.Hook,
				Summary: fmt.Sprintf("run %s of %s/%s failed: %s", r.ID, r.Module, r.Hook, r.Error),
				Details: details}); err != nil {
				return err
			}
			// Its questions close with it, as at a cancel: no operator
			// may approve, later, what a dead run asked.
			if err := closeDeadRunRequests(tx, r.ID, now); err != nil {
				return err
			}
			// Its token dies with it, as at a normal end: a process that
			// outlived its engine must not reach the next one with it.
			return e.auth.RevokeSessionTx(tx, "engine", r.ID, "revoked session "+r.ID+" (the run was found dead)")
		}); err != nil {
			return err
		}
		os.RemoveAll(filepath.Join(e.DataDir(), "runs", r.ID))
		os.Remove(filepath.Join(e.DataDir(), "runs", r.ID+".tty")) // a warden run's terminal socket
	}
	return nil
}

// engineAlive: the engine process that started r still runs (so the
// run is not dead: the store is a copy of a data dir in use).
func engineAlive(r RunRecord) bool {
	if r.PID <= 0 || r.PID == os.Getpid() {
		return false
	}
	err := syscall.Kill(r.PID, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// sweepDeadRun removes the cgroup a dead run's engine left behind, and
// says what it did for the run's hook.end ("" when there was none).
//
// Not while the engine that started it is alive: the store's lock says
// no engine holds this file, not that none holds a copy of it (a data
// dir copied or restored while its engine ran lists that engine's live
// runs, whose groups are where this one would look). On the systemd
// route each engine's groups are in a scope of its own, which systemd
// removes, groups and all, when that engine is gone.
func sweepDeadRun(r RunRecord) string {
	if r.JailMode == JailOff {
		return ""
	}
	if engineAlive(r) {
		return fmt.Sprintf("not swept: pid %d, which started the run, is alive (a copy of a data dir in use?)", r.PID)
	}
	removed, err := cgroup.Sweep(r.ID)
	switch {
	case err != nil:
		return fmt.Sprintf("left behind, and not removed: %v (remove it by hand: rmdir the run's group, after killing what is in it)", err)
	case len(removed) > 0:
		return fmt.Sprintf("left behind; removed (%s)", strings.Join(removed, ", "))
	}
	return ""
}

// closeDeadRunRequests decides deny, by the engine, every request still
// undecided that run asked.
func closeDeadRunRequests(tx *storage.Tx, run string, now time.Time) error {
	reqs, err := tx.UndecidedRequests("")
	if err != nil {
		return err
	}
	for _, q := range reqs {
		if q.Requester.Run != run {
			continue
		}
		_, err := perms.Decide(tx, q.ID, storage.Deny, perms.EngineActor, "the run ended before a decision (its engine stopped)", now, "")
		var refused *perms.Refusal
		if err != nil && !errors.As(err, &refused) { // refused: expired, decided so
			return err
		}
	}
	return nil
}

// receiptsCommitted runs on the commit path: it must not block.
func (e *Engine) receiptsCommitted(rs []storage.Receipt) {
	evs := make([]Event, len(rs))
	for i := range rs {
		r := rs[i]
		evs[i] = Event{Kind: EventReceipt, Receipt: &r}
	}
	e.bus.publish(evs...)
}

// Close cancels running hooks (each is receipted), closes lingering
// brokers, subscriptions and the store.
func (e *Engine) Close() error {
	e.shutdown()
	e.runsMu.Lock()
	e.closing = true
	running := make([]*RunHandle, 0, len(e.active))
	for _, h := range e.active {
		running = append(running, h)
	}
	e.runsMu.Unlock()
	for _, h := range running {
		h.r.cancel("the engine is shutting down")
	}
	for _, h := range running {
		<-h.done
	}
	e.runsMu.Lock()
	for b, t := range e.lingering {
		t.Stop()
		b.Close()
		os.RemoveAll(e.lingerDirs[b])
	}
	e.lingering = map[*broker.Broker]*time.Timer{}
	e.runsMu.Unlock()
	e.bus.close()
	if e.pruned != nil {
		<-e.pruned // a batch in flight commits before the store closes
	}
	return e.store.Close()
}

// DataDir is the open data dir.
func (e *Engine) DataDir() string { return e.store.Dir() }

// Subscribe returns a bounded subscription to engine events.
func (e *Engine) Subscribe() *Subscription { return e.bus.subscribe(e.opts.SubscriberBuffer) }

// Receipts lists receipts matching f, ascending by seq.
func (e *Engine) Receipts(f ReceiptFilter) (rs []Receipt, err error) {
	err = e.store.View(func(tx *storage.Tx) error {
		rs, err = tx.Receipts(f)
		return err
	})
	return rs, err
}

// Receipt reads one receipt.
func (e *Engine) Receipt(seq uint64) (r Receipt, err error) {
	err = e.store.View(func(tx *storage.Tx) error {
		r, err = tx.Receipt(seq)
		return err
	})
	if errors.Is(err, storage.ErrNotFound) {
		return r, storage.Mark(ErrNotFound, "no receipt %d (see `warden receipts list`)", seq)
	}
	return r, err
}

// VerifyReceipts walks the whole chain, recording a checkpoint every
// storage.CheckpointEvery receipts.
func (e *Engine) VerifyReceipts() (Verification, error) { return e.store.VerifyReceipts() }

// VerifyReceiptsSince checks the chain from the newest checkpoint at or
// before seq (0: the newest of all) to its end; Verification.From says
// which. Without checkpoints it walks the whole chain.
func (e *Engine) VerifyReceiptsSince(seq uint64) (Verification, error) {
	return e.store.VerifyReceiptsSince(seq)
}

// TrustStatus reports the trust root.
func (e *Engine) TrustStatus() (TrustStatus, error) { return e.auth.Status() }

// RotateTrust makes a new trust root and revokes every token.
func (e *Engine) RotateTrust(actor Actor) (TrustStatus, error) {
	if err := e.authorize(actor, "rotate the trust root"); err != nil {
		return TrustStatus{}, err
	}
	return e.auth.Rotate(string(actor))
}
