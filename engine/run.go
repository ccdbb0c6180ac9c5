package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
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
}

// Outcome is how a run ended.
type Outcome struct {
	Run      RunRecord     `json:"run"`
	Duration time.Duration `json:"duration"`
}

// OK is true for a successful run.
func (o Outcome) OK() bool { return o.Run.Status == storage.RunSucceeded }

// RunHandle follows a started run.
type RunHandle struct {
	ID string
	// Jail is the backend the run got (bwrap, landlock, off); "" for a
	// run followed from another process.
	Jail   string
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
	manifest *hooks.Manifest
	hook     *hooks.Hook
	inputs   map[string]any
	token    string
	tok      *caps.Minted // recorded with the start receipt
	confirm  func(context.Context, string) (bool, error)
	actor    string // "run:<id>": who the hook's own writes are recorded as
	session  string // the MCP session that asked for the run, if one did
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
	// bwrap is the jail's bwrap (jailed runs only). lines counts the
	// run's output lines, and firstErr is the first of stderr: when bwrap
	// cannot set up the user namespace, its message is the run's one line
	// (see usernsError).
	bwrap    string
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

// StartRun preflights and starts a hook run, in phases:
//
//	preflight     refuse what cannot run, before anything exists
//	newRun        the run's record; network asked for (policy or operator)
//	prepare       run dir, token, stream, broker: one undo if a later phase fails
//	spawnSpec     the jail's plan, argv and environment
//	recordStart   token, run record and hook.start receipt in one commit
//	launch        the process, and the goroutine that finishes the run
//
// Preflight failures (unknown module or hook, bad inputs, a missing
// capability, jail not chosen) are returned before anything is spawned or
// recorded as a run. A plan that cannot be laid out on this host is not a
// preflight failure: the run is recorded, and fails saying why.
func (e *Engine) StartRun(actor Actor, req RunRequest) (_ *RunHandle, err error) {
	pf, err := e.preflight(actor, req)
	if err != nil {
		return nil, err
	}
	r, err := e.newRun(actor, req, pf)
	if err != nil {
		return nil, err
	}
	undo, err := e.prepare(r)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			undo()
		}
	}()
	sp := e.spawnSpec(r, pf)
	if err = e.recordStart(actor, r, sp.startDetails); err != nil {
		if rel, ok := sp.spawner.(interface{ Release() }); ok {
			rel.Release() // and the run's cgroup, if it has one
		}
		return nil, err
	}
	return e.launch(r, sp), nil
}

// RunInputs are the inputs req gives a run of hook: its typed Inputs
// checked against the hook's declared inputs, or its RawInputs (k=v
// strings, as `--input` gives them) typed by them; never both. It is
// the one parser of run inputs: preflight uses it, and so does `warden
// hook run` to call a bad input a usage error before anything starts.
func RunInputs(hook *hooks.Hook, req RunRequest) (map[string]any, error) {
	switch {
	case req.RawInputs != nil && req.Inputs != nil:
		return nil, errors.New("give inputs either typed or as k=v strings, not both")
	case req.RawInputs != nil:
		return hooks.ParseInputs(hook.Inputs, req.RawInputs)
	}
	inputs := req.Inputs
	if inputs == nil {
		inputs = map[string]any{}
	}
	if err := hooks.CheckInputs(hook.Inputs, inputs); err != nil {
		return nil, err
	}
	return inputs, nil
}

// preflighted is what preflight found: the hook and how it will run.
type preflighted struct {
	m        *hooks.Manifest
	hook     *hooks.Hook
	inputs   map[string]any
	jailMode string
	jl       *jail.Jail // nil with the jail off
	// landlock: the landlock backend's plan input (nil under bwrap).
	landlock *jail.LandlockInput
	gate     string // for an MCP client's run: what let it through
}

// preflight refuses a run that cannot start: the actor's role, the module
// and hook, the inputs by their declared types, the capabilities the hook
// requires, the jail, the trust root.
func (e *Engine) preflight(actor Actor, req RunRequest) (pf preflighted, err error) {
	if err := e.authorize(actor, "run "+req.Module+"/"+req.Hook); err != nil {
		return pf, err
	}
	mod, err := e.Module(req.Module)
	if err != nil {
		return pf, err
	}
	if mod.Manifest == nil {
		return pf, fmt.Errorf("module %s cannot run: %s", req.Module, mod.Problem)
	}
	m := mod.Manifest
	hook, ok := m.Hooks[req.Hook]
	if !ok {
		return pf, fmt.Errorf("module %s has no hook %q (it has: %s)", m.ID, req.Hook, hookNames(m))
	}
	inputs, err := RunInputs(hook, req)
	if err != nil {
		return pf, err
	}
	if err := e.checkPathInputs(m.ID, hook, inputs); err != nil {
		return pf, err
	}
	for _, c := range hook.Requires {
		if _, ok := e.capabilities[c]; !ok {
			return pf, fmt.Errorf("hook %s/%s requires capability %q, which this engine does not provide (available: %s)", m.ID, hook.Name, c, e.capabilities.names())
		}
	}
	pf = preflighted{m: m, hook: hook, inputs: inputs, jailMode: req.Jail}
	if pf.jailMode == "" {
		pf.jailMode = e.opts.Jail
	}
	if pf.jailMode == "" {
		pf.jailMode = JailAuto
	}
	switch pf.jailMode {
	case JailOff:
	case JailAuto, JailBwrap, JailLandlock:
		if pf.jailMode, err = e.chooseJail(pf.jailMode); err != nil {
			return pf, err
		}
		if pf.jailMode == JailLandlock {
			pf.jl = jail.NewLandlock()
			pf.landlock = &jail.LandlockInput{ABI: e.landlockABI()}
		} else if pf.jl, err = e.jail(); err != nil {
			return pf, err
		}
		// The ceiling may have been lowered since the module was added.
		if err := hooks.CheckCeiling(m, e.ceiling()); err != nil {
			return pf, fmt.Errorf("%w\n(the module was added under a higher ceiling; lower its limits or raise config.yaml's, then `warden module add` it again)", err)
		}
	default:
		return pf, fmt.Errorf("unknown jail mode %q (want auto, bwrap, landlock or off)", pf.jailMode)
	}
	if err := e.auth.Err(); err != nil {
		return pf, err
	}
	if req.Client != "" || req.Session != "" || req.Ticket != "" {
		// Last, so that a run refused for anything else leaves the
		// ticket for a retry of the same call.
		if pf.gate, err = e.gate.tickets.redeem(req.Ticket, MCPSubject(req.Client), req.Session, MCPToolName(m.ID, hook.Name), argsDigest(req.Inputs)); err != nil {
			return pf, err
		}
	}
	return pf, nil
}

// newRun makes the run's record and, for a jailed hook that declares
// network, asks for it: a grant comes only from its module's policy or
// the operator's answer to a permission request, asked before anything
// of the run exists (without a grant the run goes on without network;
// the stream says so, with the fix).
func (e *Engine) newRun(actor Actor, req RunRequest, pf preflighted) (*activeRun, error) {
	// A run an MCP client asked for is the client's: its receipts name
	// "mcp:<client>", with the session and who relayed it.
	runActor := string(actor)
	if req.Client != "" {
		runActor = MCPSubject(req.Client)
	}
	now := time.Now().UTC()
	rec := RunRecord{ID: e.newRunID(now), Module: pf.m.ID, Hook: pf.hook.Name, Actor: runActor, Status: storage.RunRunning,
		JailMode: pf.jailMode, Started: now, Deadline: now.Add(pf.hook.Timeout), PID: os.Getpid()}
	if raw, err := json.Marshal(pf.inputs); err == nil {
		rec.Inputs = raw
	}
	r := &activeRun{e: e, rec: rec, manifest: pf.m, hook: pf.hook, inputs: pf.inputs, confirm: req.Confirm, actor: "run:" + rec.ID, started: time.Now(), session: req.Session}
	if req.Client != "" {
		r.mcpDetails = map[string]any{"session": req.Session, "via": string(actor), "gate": pf.gate}
	}
	if pf.jl != nil && pf.hook.Network {
		r.network, r.networkDetails = e.networkFor(r)
		if e.life.Err() != nil {
			return nil, errors.New("the engine is shutting down: the run was not started")
		}
		// The operator may have taken a while: the run's clock starts now.
		now = time.Now().UTC()
		r.rec.Started, r.rec.Deadline = now, now.Add(pf.hook.Timeout)
		r.started = time.Now()
	}
	return r, nil
}

// prepare makes what the run needs before it is recorded: its private
// dir (with bin/warden), its token, its stream and its broker. It returns
// the one undo of all of it, for a later phase that fails.
func (e *Engine) prepare(r *activeRun) (undo func(), err error) {
	// The dir's name is the run's id, unless a leftover dir of that name
	// made the run take the next id (see makeRunDir).
	runDir, err := e.makeRunDir(r)
	if err != nil {
		return nil, err
	}
	undo = func() {
		r.egress.close() // egress mode: its proxy, started by spawnSpec (nil-safe)
		if r.brk != nil {
			r.brk.Close() // the token was not recorded: nothing to revoke
		}
		if r.ingest != nil {
			r.ingest.close()
		}
		os.RemoveAll(runDir)
	}
	// The deferred undo is this one: a failing `return nil, err` sets the
	// named result to nil before deferred calls run.
	cleanup := undo
	defer func() {
		if err != nil {
			cleanup()
		}
	}()
	// Unjailed hooks find the warden helper through the run's bin dir;
	// the jail binds the binary itself (jail.WardenTarget).
	switch r.rec.JailMode {
	case JailOff:
		if err := linkWarden(runDir, ""); err != nil {
			return nil, err
		}
	case JailLandlock:
		// No mount namespace: the helper is found, at its host path,
		// through the run dir's bin/; the hook's tmp is the run dir's.
		if err := linkWarden(runDir, e.jailHelper().Path); err != nil {
			return nil, err
		}
		if err := os.Mkdir(filepath.Join(runDir, "tmp"), 0o700); err != nil {
			return nil, err
		}
	}
	// The token lives as long as the run may, plus the kill grace. It is
	// recorded with the start receipt, in the same commit: until then it
	// authorizes nothing, and nothing is spawned before.
	if r.tok, err = e.auth.Mint(r.rec.Actor, r.rec.ID, "hook", r.rec.ID, r.hook.Timeout+r.hook.KillGrace+time.Second); err != nil {
		return nil, err
	}
	r.token = r.tok.Token
	// The stream exists before the broker: a refused hello writes a line.
	r.ingest = e.newIngester(r.rec.ID)
	r.ingest.onFail = r.streamFailed
	if r.brk, err = broker.Start(runDir, r); err != nil {
		return nil, err
	}
	return undo, nil
}

// spawned is how the run's process will be started.
type spawned struct {
	spawner      hooks.Spawner
	spawn        hooks.Spawn
	planErr      error // the jail cannot be laid out here: the run fails, recorded
	startDetails map[string]any
}

// spawnSpec lays out the jail's plan (before the start receipt, which
// lists what is absent on this host) and the process's argv, dir and
// environment, in jail terms when jailed. A jailed hook whose network is
// a list gets its egress proxy here (r.egress; prepare's undo closes it
// if the start fails later).
func (e *Engine) spawnSpec(r *activeRun, pf preflighted) spawned {
	m, hook, runDir := pf.m, pf.hook, filepath.Dir(r.brk.SocketPath())
	sp := spawned{
		spawner: hooks.DirectSpawner{},
		spawn: hooks.Spawn{
			Argv: append([]string{filepath.Join(m.Dir, hook.Run[0])}, hook.Run[1:]...),
			Dir:  m.Dir,
		},
		startDetails: map[string]any{"run": r.rec.ID, "module": m.ID, "hook": hook.Name, "jail": pf.jailMode, "inputs": inputNames(pf.inputs)},
	}
	maps.Copy(sp.startDetails, r.mcpDetails)
	socket, pathFirst := r.brk.SocketPath(), filepath.Join(runDir, "bin")
	if jl := pf.jl; jl != nil && pf.landlock != nil {
		sp.startDetails["network"] = r.network
		maps.Copy(sp.startDetails, r.networkDetails)
		sp.planErr = e.landlockSpec(r, pf, runDir, &sp)
		pathFirst = filepath.Join(runDir, "bin")
	} else if jl != nil {
		sp.startDetails["network"] = r.network
		maps.Copy(sp.startDetails, r.networkDetails)
		helper := r.e.jailHelper()
		plan, err := jail.BuildPlan(jail.PlanInput{ModuleDir: m.Dir, RunDir: runDir, Warden: helper.Path, WardenReason: helper.Reason(), Inputs: pathInputs(hook, pf.inputs), Network: r.network})
		if plan != nil && len(plan.Missing) > 0 {
			sp.startDetails["absent"] = plan.Missing
		}
		if err != nil {
			sp.planErr = err
		} else if err := jl.HandOver(runDir, socket); err != nil {
			sp.planErr = err
		}
		js := jl.Spawner(plan, r.network)
		r.bwrap = jl.Bwrap.Path
		if sp.planErr == nil {
			sp.planErr = r.limit(js, sp.startDetails)
		}
		if sp.planErr == nil && hook.Egress {
			sp.planErr = r.egressSetup(js, runDir, sp.startDetails)
		}
		sp.spawner = js
		sp.spawn.Argv = append([]string{path.Join(jail.ModuleTarget, hook.Run[0])}, hook.Run[1:]...)
		sp.spawn.Dir = jail.ModuleTarget
		socket, pathFirst = jail.SocketTarget, jail.BinDir
	} else if hook.Egress {
		r.streamLater = append(r.streamLater, storage.Line{At: time.Now(), Level: storage.LevelWarn,
			Text: "jail OFF: this hook's network list is not enforced (it has the host's network)"})
	}
	sp.spawn.Env = hooks.BuildEnv(os.Environ(), map[string]string{
		"WARDEN_SOCKET": socket,
		"WARDEN_TOKEN":  r.token,
		"WARDEN_RUN":    r.rec.ID,
		"WARDEN_MODULE": m.ID,
		"WARDEN_HOOK":   hook.Name,
	}, pathFirst)
	if r.egress != nil {
		sp.spawn.Env = egressEnv(sp.spawn.Env)
	}
	if pf.landlock != nil { // the dialer, not the socket (landlockSpec)
		sp.spawn.Env = slices.DeleteFunc(sp.spawn.Env, func(kv string) bool { return strings.HasPrefix(kv, "WARDEN_SOCKET=") })
		sp.spawn.Env = append(sp.spawn.Env, broker.DialerEnv+"="+strconv.Itoa(jail.FdDialer))
	}
	if pf.jl != nil {
		// The operator's HOME does not exist in the jail; /tmp is the
		// hook's own (the synthesized passwd agrees). Under landlock the
		// hook's tmp is the run dir's tmp/, at its host path.
		home := "/tmp"
		if pf.landlock != nil {
			home = filepath.Join(runDir, "tmp")
			sp.spawn.Env = append(sp.spawn.Env, "TMPDIR="+home, jail.LandlockTarOptions)
		}
		for i, kv := range sp.spawn.Env {
			if strings.HasPrefix(kv, "HOME=") {
				sp.spawn.Env[i] = "HOME=" + home
			}
		}
	}
	return sp
}

// recordStart commits the token, the run record (never over a stored
// run) and the hook.start receipt as one, then publishes the run. Old
// streams are pruned in the background (prune.go), never here.
func (e *Engine) recordStart(actor Actor, r *activeRun, details map[string]any) error {
	r.rec.Network = runNetwork(r.network, r.egress != nil)
	if _, err := e.store.Update(func(tx *storage.Tx) (err error) {
		if err := r.tok.Record(tx); err != nil {
			return err
		}
		if err := tx.CreateRun(r.rec); err != nil {
			return err // never over a stored run (see storage.runIDs)
		}
		_, err = tx.AppendReceipt(storage.Draft{Kind: storage.KindHookStart, Actor: r.rec.Actor, Subject: r.rec.Module + "/" + r.rec.Hook,
			Summary: fmt.Sprintf("run %s of %s/%s started (jail %s%s%s)", r.rec.ID, r.rec.Module, r.rec.Hook, jailName(r.rec.JailMode), limitsNote(r.limits), networkNote(r.network, r.egress != nil)),
			Details: details})
		return err
	}); err != nil {
		return err
	}
	rec := r.rec
	e.bus.publish(Event{Kind: EventRun, Run: &rec})
	return nil
}

// launch starts the recorded run's process (or fails the run, recorded,
// when its plan could not be laid out or the process could not start)
// and the goroutine that finishes it.
func (e *Engine) launch(r *activeRun, sp spawned) *RunHandle {
	h := &RunHandle{ID: r.rec.ID, Jail: r.rec.JailMode, done: make(chan struct{}), r: r}
	e.runsMu.Lock()
	e.active[r.rec.ID] = h
	e.runsMu.Unlock()

	for _, l := range r.streamLater {
		r.streamLine(l.Level, l.Text)
	}
	r.streamLater = nil
	// The spawner may hold the run's cgroup (and on v1 a launcher
	// thread): released once the process started, or at once when it
	// never will.
	release := func() {
		if rel, ok := sp.spawner.(interface{ Release() }); ok {
			rel.Release()
		}
	}
	if sp.planErr != nil {
		release()
		go r.finish(h, hooks.Exit{Code: -1, Err: sp.planErr, Reason: sp.planErr.Error()})
		return h
	}
	proc, err := hooks.Start(sp.spawner, sp.spawn, hooks.Limits{Timeout: r.hook.Timeout, IdleTimeout: r.hook.IdleTimeout, KillGrace: r.hook.KillGrace}, r.output)
	release()
	if err != nil {
		go r.finish(h, hooks.Exit{Code: -1, Err: err, Reason: "could not start: " + err.Error()})
		return h
	}
	r.proc.Store(proc)
	if r.rec.JailMode == JailLandlock {
		e.stampStage(r, proc.Pid())
	}
	if _, err := r.ingest.failure(); err != nil {
		r.streamFailed(err) // the stream failed before the process was stored
	}
	go func() { r.finish(h, proc.Wait()) }()
	return h
}

// makeRunDir makes the run's private dir. A dir of that name left by a
// crashed engine (made, but its run never recorded) takes the next id
// rather than reuse what is there.
func (e *Engine) makeRunDir(r *activeRun) (string, error) {
	runs := filepath.Join(e.DataDir(), "runs")
	if err := os.MkdirAll(runs, 0o700); err != nil {
		return "", err
	}
	for try := 0; ; try++ {
		dir := filepath.Join(runs, r.rec.ID)
		err := os.Mkdir(dir, 0o700)
		if err == nil || !errors.Is(err, os.ErrExist) || try == 3 {
			return dir, err
		}
		r.rec.ID = e.newRunID(time.Now())
		r.actor = "run:" + r.rec.ID
	}
}

// RunHook starts a run and waits for its outcome.
func (e *Engine) RunHook(actor Actor, req RunRequest) (Outcome, error) {
	h, err := e.StartRun(actor, req)
	if err != nil {
		return Outcome{}, err
	}
	return h.Wait(), nil
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

// finish decides the verdict, ends the broker, revokes the token and
// writes the run's end receipt.
func (r *activeRun) finish(h *RunHandle, exit hooks.Exit) {
	e := r.e
	r.egress.close() // every connection is receipted, and said, before the verdict
	if hooks.IsResourceLimit(exit.Limit) {
		// Never silent: the stream says why the hook was stopped.
		r.streamLine(storage.LevelError, "warden: the run was stopped: "+exit.Reason)
	}
	r.ingest.close() // every output line is durable before the verdict
	r.brk.End()
	ended := time.Now().UTC()
	rec := r.rec
	rec.Ended = &ended
	code := exit.Code
	rec.Exit = &code

	r.mu.Lock()
	outputs, resultErr, hookErr, cancelWhy := r.outputs, r.resultErr, r.hookErr, r.cancelWhy
	r.mu.Unlock()
	usernsErr := r.usernsError(exit)
	lost, streamErr := r.ingest.failure()
	switch {
	case streamErr != nil:
		// Whatever else happened, the run's record is incomplete: that
		// is its verdict (the hook was stopped for it, see streamFailed).
		rec.Status = storage.RunFailed
		rec.Error = streamFailure(streamErr, lost)
	case exit.Limit == hooks.LimitCancelled || (cancelWhy != "" && exit.Limit == ""):
		rec.Status = storage.RunCancelled
		rec.Error = cancelWhy
	case exit.Limit != "":
		rec.Status = storage.RunFailed
		rec.Error = exit.Describe()
	case exit.Err != nil:
		rec.Status = storage.RunFailed
		rec.Error = exit.Reason
	case hookErr != nil:
		rec.Status = storage.RunFailed
		rec.Error = "the hook reported an error: " + hookErr.Name + ": " + hookErr.Message
	case exit.Code != 0 && usernsErr != "":
		// bwrap's raw "setting up uid map: Permission denied" says
		// nothing of what to do: the run fails with why, and the fix.
		rec.Status = storage.RunFailed
		rec.Error = usernsErr
	case exit.Code != 0:
		rec.Status = storage.RunFailed
		rec.Error = exit.Describe()
	case len(r.hook.Outputs) > 0 && outputs == nil:
		rec.Status = storage.RunFailed
		if resultErr != "" {
			rec.Error = "result refused: " + resultErr
		} else {
			rec.Error = "exited 0 without a result, but the hook declares outputs (" + joinNames(slices.Sorted(maps.Keys(r.hook.Outputs))) + ")"
		}
	default:
		rec.Status = storage.RunSucceeded
	}
	if outputs != nil {
		rec.Outputs, _ = json.Marshal(outputs)
	}
	dur := ended.Sub(r.rec.Started)
	details := map[string]any{"run": rec.ID, "verdict": rec.Status, "exit": code, "durationMs": dur.Milliseconds(), "jail": rec.JailMode}
	if r.session != "" {
		details["session"] = r.session
	}
	if r.limits != "" {
		details["limits"] = r.limits
	}
	if exit.Signal != "" {
		details["signal"] = exit.Signal
	}
	if exit.Limit != "" && streamErr == nil {
		details["limit"] = exit.Limit
	}
	if streamErr != nil {
		details["linesLost"] = lost
	}
	if rec.Error != "" {
		details["error"] = rec.Error
	}
	if n := r.tokenRefusedUnrecorded(); len(n) > 0 {
		details["tokenRefusedUnrecorded"] = n
	}
	if r.egress != nil {
		details["destinations"] = r.egress.destinations()
		if n := r.egress.unrecorded(); n > 0 {
			details["egressRefusedUnrecorded"] = n
		}
	}
	summary := fmt.Sprintf("run %s of %s/%s %s in %s (jail %s%s)", rec.ID, rec.Module, rec.Hook, rec.Status, dur.Round(time.Millisecond), jailName(rec.JailMode), limitsNote(r.limits))
	if rec.Status == storage.RunFailed {
		// Why, where every receipt list and the console's Receipts pane
		// show it (a full disk leaves no stream line to say so).
		summary += ": " + rec.Error
	}
	// The verdict lands even on a full disk: it may use the store's reserve.
	if _, err := e.store.UpdateReserved(func(tx *storage.Tx) error {
		if err := tx.PutRun(rec); err != nil {
			return err
		}
		if _, err := tx.AppendReceipt(storage.Draft{Kind: storage.KindHookEnd, Actor: r.rec.Actor, Subject: rec.Module + "/" + rec.Hook, Summary: summary, Details: details}); err != nil {
			return err
		}
		// The run's one token, revoked in the same commit (a point
		// lookup: no walk of every token ever issued).
		return e.auth.RevokeTx(tx, r.rec.Actor, r.token, "revoked session "+rec.ID)
	}); err != nil {
		rec.Error += "; recording the outcome failed: " + err.Error()
		e.auth.RevokeSession(r.rec.Actor, rec.ID)
	}
	e.bus.publish(Event{Kind: EventRun, Run: &rec})

	h.out = Outcome{Run: rec, Duration: dur}
	e.runsMu.Lock()
	delete(e.active, rec.ID)
	e.runsMu.Unlock()
	// Late connections get run_ended for a while, then the dir goes. This
	// comes before done is closed: Close waits on done, so a run ended by
	// the shutdown has its socket and dir removed before Close returns.
	os.Remove(e.stampPath(rec.ID)) // the stage has been waited for
	e.linger(r.brk, filepath.Dir(r.brk.SocketPath()))
	close(h.done)
}

func (e *Engine) linger(b *broker.Broker, dir string) {
	cleanup := func() {
		b.Close()
		os.RemoveAll(dir)
	}
	e.runsMu.Lock()
	if e.closing {
		// The engine is going: no lingering, and no goroutine the exiting
		// process might not wait for.
		e.runsMu.Unlock()
		cleanup()
		return
	}
	e.lingering[b] = time.AfterFunc(brokerLinger, func() {
		e.runsMu.Lock()
		delete(e.lingering, b)
		e.runsMu.Unlock()
		cleanup()
	})
	e.lingerDirs[b] = dir
	e.runsMu.Unlock()
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
	if r.bwrap != "" {
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

// usernsError is the run's error when bwrap could not create the jail's
// user namespace: a failed jailed run whose one line of output is bwrap
// saying so (it dies before the hook starts, and says one line). The error
// names the cause and the fix (jail.UsernsFailure), where bwrap's raw
// "setting up uid map: Permission denied" says neither. "" otherwise.
func (r *activeRun) usernsError(exit hooks.Exit) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.bwrap == "" || exit.Code == 0 || r.lines != 1 || r.firstErr == "" {
		return ""
	}
	return jail.UsernsFailure(r.firstErr, "/", r.bwrap)
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

func hookNames(m *hooks.Manifest) string {
	return joinNames(slices.Sorted(maps.Keys(m.Hooks)))
}

func joinNames(ss []string) string {
	if len(ss) == 0 {
		return "none"
	}
	out := ss[0]
	for _, s := range ss[1:] {
		out += ", " + s
	}
	return out
}

// linkWarden puts a `warden` link to this very binary in the run's bin
// dir, which is first on the hook's PATH: shell hooks then reach the
// engine's own helper whatever the binary is called (a test binary, a
// renamed build) and never some other warden found on PATH.
func linkWarden(runDir, exe string) error {
	if exe == "" {
		var err error
		if exe, err = thisBinary(); err != nil {
			return fmt.Errorf("cannot find the warden binary to offer hooks: %w", err)
		}
	}
	bin := filepath.Join(runDir, "bin")
	if err := os.Mkdir(bin, 0o700); err != nil {
		return err
	}
	return os.Symlink(exe, filepath.Join(bin, "warden"))
}

// jail admits bubblewrap once per engine (its version is read once).
func (e *Engine) jail() (*jail.Jail, error) {
	e.jailOnce.Do(func() { e.jailAdm, e.jailErr = jail.New(e.opts.BwrapPath) })
	if e.jailErr != nil {
		return nil, fmt.Errorf("%w\n(or run the hook unjailed with --jail=off; every receipt of that run says so)", e.jailErr)
	}
	return e.jailAdm, nil
}

// jailHelper is the binary bound read-only into the jail as `warden`:
// warden-hook beside this binary when it is admitted, else this binary
// (jail.FindHelper). It is looked for at each run: a few lstat calls,
// and an operator who installs or removes warden-hook needs no restart.
func jailHelper() jail.Helper { return jail.FindHelper(wardenBinary()) }

// jailHelper is the package's jailHelper, or the test's Options.helper.
func (e *Engine) jailHelper() jail.Helper {
	if e.opts.helper != "" {
		return jail.Helper{Path: e.opts.helper, Small: filepath.Base(e.opts.helper) == jail.HelperName, Why: "set by the test"}
	}
	return jailHelper()
}

// wardenBinary is this binary.
func wardenBinary() string {
	exe, err := thisBinary()
	if err != nil {
		return "/proc/self/exe"
	}
	return exe
}

// thisBinary is the path of this process's binary, symlinks resolved,
// found once: it is the file this process was started from, which does
// not change while it runs (a run paid a readlink and a path walk for it,
// twice).
var thisBinary = sync.OnceValues(func() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	if real, err := filepath.EvalSymlinks(exe); err == nil {
		exe = real
	}
	return exe, nil
})

// pathInputs lists the hook's declared path inputs with their values.
func pathInputs(h *hooks.Hook, inputs map[string]any) []jail.PathInput {
	var out []jail.PathInput
	for _, name := range slices.Sorted(maps.Keys(h.Inputs)) {
		t := h.Inputs[name]
		if t.Kind != "path" {
			continue
		}
		if v, ok := inputs[name].(string); ok {
			out = append(out, jail.PathInput{Name: name, Path: v, RW: t.RW})
		}
	}
	return out
}

// inputNames lists the run's input names, sorted; [] rather than null
// when there are none (the start receipt's details).
func inputNames(inputs map[string]any) []string {
	names := slices.Sorted(maps.Keys(inputs))
	if names == nil {
		names = []string{}
	}
	return names
}

func jailName(mode string) string {
	if mode == JailOff {
		return "OFF"
	}
	return mode
}

// chooseJail picks the backend for mode (auto, bwrap, landlock): bwrap
// where it is admitted and the host's files do not refuse it a user
// namespace, else landlock, unless the mode forbids the fallback.
func (e *Engine) chooseJail(mode string) (string, error) {
	var bw jail.BwrapState
	if _, err := e.jail(); err != nil {
		bw.Admission = err
	} else if mode != JailBwrap {
		// Explicit bwrap keeps today's path: a refused namespace fails
		// the run with bwrap's own explanation (UsernsFailure).
		bw.Userns = jail.ProbeUserns("/", e.jailAdm.Bwrap.Path)
		if bw.Userns == nil { // no file refuses: try it (a container's seccomp may)
			bw.Userns = jail.TryUserns(e.jailAdm.Bwrap.Path)
		}
	}
	if mode == JailLandlock {
		return jail.Choose(mode, bw, e.landlockABI())
	}
	// auto falls back where bwrap cannot make its namespaces, or is not
	// installed at all (jail.MayFallBack).
	if bw.Admission != nil && (mode == JailBwrap || !jail.MayFallBack(bw.Admission, e.opts.BwrapPath)) {
		return "", bw.Admission // as before: admission's error, with its fix
	}
	return jail.Choose(mode, bw, e.landlockABI())
}

// landlockABI is the kernel's Landlock ABI (0: none), read once.
func (e *Engine) landlockABI() int {
	return hostLandlockABI()
}

var hostLandlockABI = sync.OnceValue(func() int { return jail.ProbeHost().LandlockABI })

// landlockSpec lays out a run under the landlock backend: the plan in
// Landlock's terms (or the reason it cannot be), the spawner and its
// limits. The hook's argv, dir and socket stay host paths.
func (e *Engine) landlockSpec(r *activeRun, pf preflighted, runDir string, sp *spawned) error {
	helper := e.jailHelper()
	plan, err := jail.BuildPlan(jail.PlanInput{ModuleDir: pf.m.Dir, RunDir: runDir, Warden: helper.Path, WardenReason: helper.Reason(), Inputs: pathInputs(pf.hook, pf.inputs), Network: r.network})
	if plan != nil && len(plan.Missing) > 0 {
		sp.startDetails["absent"] = plan.Missing
	}
	if err != nil {
		return err
	}
	in := *pf.landlock
	in.RunDir, in.TmpDir, in.Network, in.Egress, in.UID = runDir, filepath.Join(runDir, "tmp"), r.network, pf.hook.Egress, pf.jl.UID
	in.Hidden = hiddenFromHooks(e.DataDir())
	lp, err := jail.LandlockFor(plan, in)
	if err != nil {
		return err
	}
	sp.startDetails["landlock"] = map[string]any{"abi": lp.ABI, "scoped": lp.Scoped, "denyTCP": lp.DenyTCP, "notHidden": lp.NotHidden}
	// No socket(AF_UNIX) under landlock (connect by path reaches the
	// host's sockets): the hook dials its broker through this fd.
	dialer, err := r.brk.Dialer()
	if err != nil {
		return err
	}
	js := pf.jl.LandlockSpawner(plan, lp, dialer)
	sp.spawner = js
	return r.limit(js, sp.startDetails)
}

// hiddenFromHooks are the paths no landlock rule may hold: the data dir
// (other runs, the store, the trust root) and the operator's home.
func hiddenFromHooks(dataDir string) []string {
	hidden := []string{dataDir}
	if home, err := os.UserHomeDir(); err == nil && home != "" && home != "/" {
		hidden = append(hidden, home)
	}
	return hidden
}

// checkPathInputs refuses, under every backend, a path input that
// reaches into (or holds) what no hook may see: the data dir, the
// operator's home, another module's dir (jail.CheckInputs). The module
// list is read only when the hook has a path input.
func (e *Engine) checkPathInputs(self string, h *hooks.Hook, inputs map[string]any) error {
	in := pathInputs(h, inputs)
	if len(in) == 0 {
		return nil
	}
	// The most specific first: a module dir in the home is named as the
	// module's.
	secrets := []jail.Secret{{Path: e.DataDir(), What: "warden's data dir"}}
	var mods []ModuleRecord
	if err := e.store.View(func(tx *storage.Tx) (err error) {
		mods, err = tx.Modules()
		return err
	}); err != nil {
		return err
	}
	for _, m := range mods {
		if m.ID != self {
			secrets = append(secrets, jail.Secret{Path: m.Path, What: "module " + m.ID + "'s dir"})
		}
	}
	if home, err := os.UserHomeDir(); err == nil && home != "" && home != "/" {
		secrets = append(secrets, jail.Secret{Path: home, What: "the operator's home"})
	}
	return jail.CheckInputs(in, secrets)
}

// ValidJailMode: mode is auto, bwrap or landlock (the modes config.yaml
// may set; off is only ever asked for per run).
func ValidJailMode(mode string) bool { return jail.ValidMode(mode) }
