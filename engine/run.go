package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"warden/engine/broker"
	"warden/engine/hooks"
	"warden/engine/jail"
	"warden/engine/protocol"
	"warden/storage"
)

// Jail modes.
const (
	JailBwrap = "bwrap"
	JailOff   = "off"
)

// RunRecord is one hook run.
type RunRecord = storage.RunRecord

// Line is one stream line.
type Line = storage.Line

// RunRequest asks for a hook run.
type RunRequest struct {
	Module string
	Hook   string
	// Inputs are typed values (from a form or JSON); RawInputs are CLI
	// k=v strings parsed by the hook's declared types. Use one or the other.
	Inputs    map[string]any
	RawInputs map[string]string
	// Jail is JailBwrap (the default) or JailOff, which must be asked for.
	Jail string
	// Confirm answers operator.confirm inline (a terminal prompt). Without
	// it, requests wait for an attached operator, or are answered "no" at
	// once when none is attached.
	Confirm func(ctx context.Context, message string) (bool, error) `json:"-"`
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
	ID     string
	done   chan struct{}
	out    Outcome
	r      *activeRun // nil for a run followed from another process
	cancel func()
}

// NewRunHandle makes a handle for a run that lives elsewhere (another
// process's engine, reached over its control socket): cancel asks that
// engine to stop it, and end, called exactly once, records its outcome
// and releases Wait and Done.
func NewRunHandle(id string, cancel func()) (h *RunHandle, end func(Outcome)) {
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

// Cancel stops the run (SIGTERM, then SIGKILL).
func (h *RunHandle) Cancel() {
	if h.r == nil {
		h.cancel()
		return
	}
	h.r.cancel("cancelled by the operator")
}

// Run limits that are not per hook.
const (
	DefaultStreamLimit  = 64 << 20 // stored bytes per run
	DefaultStreamBudget = 1 << 30  // stored bytes across runs
	brokerLinger        = 10 * time.Second
	killGrace           = 2 * time.Second
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
	confirm  func(context.Context, string) (bool, error)
	actor    string // "run:<id>": who the hook's own writes are recorded as

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

	streamLater []storage.Line // lines said before the stream exists (StartRun's goroutine only)
}

// StartRun preflights and starts a hook run. Preflight failures (unknown
// module or hook, bad inputs, a missing capability, jail not chosen) are
// returned here, before anything is spawned or recorded as a run.
func (e *Engine) StartRun(actor Actor, req RunRequest) (*RunHandle, error) {
	if err := e.authorize(actor, "run "+req.Module+"/"+req.Hook); err != nil {
		return nil, err
	}
	mod, err := e.Module(req.Module)
	if err != nil {
		return nil, err
	}
	if mod.Manifest == nil {
		return nil, fmt.Errorf("module %s cannot run: %s", req.Module, mod.Problem)
	}
	m := mod.Manifest
	hook, ok := m.Hooks[req.Hook]
	if !ok {
		return nil, fmt.Errorf("module %s has no hook %q (it has: %s)", m.ID, req.Hook, hookNames(m))
	}
	inputs := req.Inputs
	switch {
	case req.RawInputs != nil && req.Inputs != nil:
		return nil, errors.New("give inputs either typed or as k=v strings, not both")
	case req.RawInputs != nil:
		if inputs, err = hooks.ParseInputs(hook.Inputs, req.RawInputs); err != nil {
			return nil, err
		}
	default:
		if inputs == nil {
			inputs = map[string]any{}
		}
		if err := hooks.CheckInputs(hook.Inputs, inputs); err != nil {
			return nil, err
		}
	}
	for _, c := range hook.Requires {
		if _, ok := capabilities[c]; !ok {
			return nil, fmt.Errorf("hook %s/%s requires capability %q, which this engine does not provide (available: %s)", m.ID, hook.Name, c, capabilityNames())
		}
	}
	jailMode := req.Jail
	if jailMode == "" {
		jailMode = JailBwrap
	}
	var jl *jail.Jail
	switch jailMode {
	case JailOff:
	case JailBwrap:
		var err error
		if jl, err = e.jail(); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("unknown jail mode %q (want bwrap or off)", jailMode)
	}
	if err := e.auth.Err(); err != nil {
		return nil, err
	}

	now := time.Now().UTC()
	rec := RunRecord{ID: storage.NewRunID(now), Module: m.ID, Hook: hook.Name, Actor: string(actor), Status: storage.RunRunning,
		JailMode: jailMode, Started: now, Deadline: now.Add(hook.Timeout), PID: os.Getpid()}
	if raw, err := json.Marshal(inputs); err == nil {
		rec.Inputs = raw
	}
	r := &activeRun{e: e, rec: rec, manifest: m, hook: hook, inputs: inputs, confirm: req.Confirm, actor: "run:" + rec.ID, started: time.Now()}
	// A jailed hook that declares network gets it only by its module's
	// policy, or by the operator's answer to a permission request, asked
	// here before anything of the run exists (a run without a grant goes
	// on without network; the stream says so, with the fix).
	network, networkDetails := false, map[string]any(nil)
	if jl != nil && hook.Network {
		network, networkDetails = e.networkFor(r)
		if e.life.Err() != nil {
			return nil, errors.New("the engine is shutting down: the run was not started")
		}
		// The operator may have taken a while: the run's clock starts now.
		now = time.Now().UTC()
		rec.Started, rec.Deadline = now, now.Add(hook.Timeout)
		r.rec, r.started = rec, time.Now()
	}
	runDir := filepath.Join(e.DataDir(), "runs", rec.ID)
	if err := os.MkdirAll(filepath.Dir(runDir), 0o700); err != nil {
		return nil, err
	}
	if err := os.Mkdir(runDir, 0o700); err != nil {
		return nil, err
	}
	if err := linkWarden(runDir); err != nil {
		os.RemoveAll(runDir)
		return nil, err
	}
	// The token lives as long as the run may, plus the kill grace. It is
	// recorded with the start receipt, in the same commit: until then it
	// authorizes nothing, and nothing is spawned before.
	tok, err := e.auth.Mint(string(actor), rec.ID, "hook", rec.ID, hook.Timeout+killGrace+time.Second)
	if err != nil {
		os.RemoveAll(runDir)
		return nil, err
	}
	r.token = tok.Token
	// The stream exists before the broker: a refused hello writes a line.
	r.ingest = e.newIngester(rec.ID)
	if r.brk, err = broker.Start(runDir, r); err != nil {
		r.ingest.close()
		os.RemoveAll(runDir)
		return nil, err
	}

	// The jail's plan is laid out before the start receipt, which lists
	// what is absent on this host; a missing required path fails the run
	// before anything is spawned.
	var spawner hooks.Spawner = hooks.DirectSpawner{}
	var planErr error
	startDetails := map[string]any{"run": rec.ID, "module": m.ID, "hook": hook.Name, "jail": jailMode, "inputs": sortedKeys(inputs)}
	spawn := hooks.Spawn{
		Argv: append([]string{filepath.Join(m.Dir, hook.Run[0])}, hook.Run[1:]...),
		Dir:  m.Dir,
	}
	socket, pathFirst := r.brk.SocketPath(), filepath.Join(runDir, "bin")
	if jl != nil {
		startDetails["network"] = network
		for k, v := range networkDetails {
			startDetails[k] = v
		}
		plan, err := jail.BuildPlan(jail.PlanInput{ModuleDir: m.Dir, RunDir: runDir, Warden: wardenBinary(), Inputs: pathInputs(hook, inputs), Network: network})
		if plan != nil && len(plan.Missing) > 0 {
			startDetails["absent"] = plan.Missing
		}
		if err != nil {
			planErr = err
		} else if err := jl.HandOver(runDir, socket); err != nil {
			planErr = err
		}
		js := jl.Spawner(plan, network)
		if planErr == nil && hook.Egress {
			planErr = r.egressSetup(js, runDir, startDetails)
		}
		spawner = js
		spawn.Argv = append([]string{path.Join(jail.ModuleTarget, hook.Run[0])}, hook.Run[1:]...)
		spawn.Dir = jail.ModuleTarget
		socket, pathFirst = jail.SocketTarget, jail.BinDir
	} else if hook.Egress {
		r.streamLater = append(r.streamLater, storage.Line{At: time.Now(), Level: storage.LevelWarn,
			Text: "jail OFF: this hook's network list is not enforced (it has the host's network)"})
	}
	spawn.Env = hooks.BuildEnv(os.Environ(), map[string]string{
		"WARDEN_SOCKET": socket,
		"WARDEN_TOKEN":  r.token,
		"WARDEN_RUN":    rec.ID,
		"WARDEN_MODULE": m.ID,
		"WARDEN_HOOK":   hook.Name,
	}, pathFirst)
	if r.egress != nil {
		spawn.Env = egressEnv(spawn.Env)
	}
	if jl != nil {
		// The operator's HOME does not exist in the jail; /tmp is the
		// hook's own (the synthesized passwd agrees).
		for i, kv := range spawn.Env {
			if len(kv) > 5 && kv[:5] == "HOME=" {
				spawn.Env[i] = "HOME=/tmp"
			}
		}
	}

	rec.Network = runNetwork(network, r.egress != nil)
	r.rec.Network = rec.Network
	var freed int64
	if _, err := e.store.Update(func(tx *storage.Tx) error {
		freed = e.pruneStreams(tx)
		if err := tok.Record(tx); err != nil {
			return err
		}
		if err := tx.PutRun(rec); err != nil {
			return err
		}
		_, err := tx.AppendReceipt(storage.Draft{Kind: "hook.start", Actor: string(actor), Subject: m.ID + "/" + hook.Name,
			Summary: fmt.Sprintf("run %s of %s/%s started (jail %s%s)", rec.ID, m.ID, hook.Name, jailName(jailMode), networkNote(network, r.egress != nil)),
			Details: startDetails})
		return err
	}); err != nil {
		r.egress.close()
		r.brk.Close() // the token was not recorded: nothing to revoke
		r.ingest.close()
		os.RemoveAll(runDir)
		return nil, err
	}
	e.streamBytes.Add(-freed)
	e.bus.publish(Event{Kind: EventRun, Run: &rec})

	h := &RunHandle{ID: rec.ID, done: make(chan struct{}), r: r}
	e.runsMu.Lock()
	e.active[rec.ID] = h
	e.runsMu.Unlock()

	for _, l := range r.streamLater {
		r.streamLine(l.Level, l.Text)
	}
	r.streamLater = nil
	if planErr != nil {
		go r.finish(h, hooks.Exit{Code: -1, Err: planErr, Reason: planErr.Error()})
		return h, nil
	}
	proc, err := hooks.Start(spawner, spawn, hooks.Limits{Timeout: hook.Timeout, IdleTimeout: hook.IdleTimeout, KillGrace: killGrace}, r.output)
	if rel, ok := spawner.(interface{ Release() }); ok {
		rel.Release()
	}
	if err != nil {
		go r.finish(h, hooks.Exit{Code: -1, Err: err, Reason: "could not start: " + err.Error()})
		return h, nil
	}
	r.proc.Store(proc)
	go func() { r.finish(h, proc.Wait()) }()
	return h, nil
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
		return fmt.Errorf("run %s is not running here: %w", id, ErrNotFound)
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
	switch {
	case exit.Limit == "cancelled" || (cancelWhy != "" && exit.Limit == ""):
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
	case exit.Code != 0:
		rec.Status = storage.RunFailed
		rec.Error = exit.Describe()
	case len(r.hook.Outputs) > 0 && outputs == nil:
		rec.Status = storage.RunFailed
		if resultErr != "" {
			rec.Error = "result refused: " + resultErr
		} else {
			rec.Error = "exited 0 without a result, but the hook declares outputs (" + joinNames(sortedKeys(r.hook.Outputs)) + ")"
		}
	default:
		rec.Status = storage.RunSucceeded
	}
	if outputs != nil {
		rec.Outputs, _ = json.Marshal(outputs)
	}
	dur := ended.Sub(r.rec.Started)
	details := map[string]any{"run": rec.ID, "verdict": rec.Status, "exit": code, "durationMs": dur.Milliseconds(), "jail": rec.JailMode}
	if exit.Signal != "" {
		details["signal"] = exit.Signal
	}
	if exit.Limit != "" {
		details["limit"] = exit.Limit
	}
	if rec.Error != "" {
		details["error"] = rec.Error
	}
	if r.egress != nil {
		details["destinations"] = r.egress.destinations()
	}
	summary := fmt.Sprintf("run %s of %s/%s %s in %s (jail %s)", rec.ID, rec.Module, rec.Hook, rec.Status, dur.Round(time.Millisecond), jailName(rec.JailMode))
	if _, err := e.store.Update(func(tx *storage.Tx) error {
		if err := tx.PutRun(rec); err != nil {
			return err
		}
		if _, err := tx.AppendReceipt(storage.Draft{Kind: "hook.end", Actor: r.rec.Actor, Subject: rec.Module + "/" + rec.Hook, Summary: summary, Details: details}); err != nil {
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

// output is the executor's sink: stdout is info, stderr is warn.
func (r *activeRun) output(lines []hooks.OutputLine) {
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

func hookNames(m *hooks.Manifest) string {
	return joinNames(sortedKeys(m.Hooks))
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
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
func linkWarden(runDir string) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("cannot find the warden binary to offer hooks: %w", err)
	}
	if real, err := filepath.EvalSymlinks(exe); err == nil {
		exe = real
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

// wardenBinary is this binary, bound read-only into the jail.
func wardenBinary() string {
	exe, err := os.Executable()
	if err != nil {
		return "/proc/self/exe"
	}
	if real, err := filepath.EvalSymlinks(exe); err == nil {
		exe = real
	}
	return exe
}

// pathInputs lists the hook's declared path inputs with their values.
func pathInputs(h *hooks.Hook, inputs map[string]any) []jail.PathInput {
	var out []jail.PathInput
	for _, name := range sortedKeys(h.Inputs) {
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

func jailName(mode string) string {
	if mode == JailOff {
		return "OFF"
	}
	return mode
}
