package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/wardenhq/warden/engine/broker"
	"github.com/wardenhq/warden/engine/hooks"
	"github.com/wardenhq/warden/engine/jail"
	"github.com/wardenhq/warden/storage"
)

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
		sp.release() // and the run's cgroup, if it has one
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
	m      *hooks.Manifest
	hook   *hooks.Hook
	inputs map[string]any
	// jail is the run's jail backend; nil for a run asked for unjailed
	// (JailOff), the one case the engine handles itself.
	jail jail.Backend
	gate string // for an MCP client's run: what let it through
	// command: a run of the operator's own program (command_run.go).
	command *jail.Command
}

// jailMode is the run's JailMode: its backend's name, or JailOff.
func (pf preflighted) jailMode() string {
	if pf.jail == nil {
		return JailOff
	}
	return pf.jail.Name()
}

// preflight refuses a run that cannot start: the actor's role, the module
// and hook, the inputs by their declared types, the capabilities the hook
// requires, the jail, the trust root.
func (e *Engine) preflight(actor Actor, req RunRequest) (pf preflighted, err error) {
	if req.Command != nil {
		return e.preflightCommand(actor, req)
	}
	if req.Module == RunModule {
		return pf, fmt.Errorf("module %q is warden run's own: run a command with `warden run -- COMMAND`", RunModule)
	}
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
	pf = preflighted{m: m, hook: hook, inputs: inputs}
	if mode := e.jailModeOf(req); mode != JailOff {
		if !jail.ValidMode(mode) {
			return pf, fmt.Errorf("unknown jail mode %q (want auto, bwrap, landlock or off)", mode)
		}
		if pf.jail, err = e.jails.Choose(mode); err != nil {
			return pf, err
		}
		// The ceiling may have been lowered since the module was added.
		if err := hooks.CheckCeiling(m, e.ceiling()); err != nil {
			return pf, fmt.Errorf("%w\n(the module was added under a higher ceiling; lower its limits or raise config.yaml's, then `warden module add` it again)", err)
		}
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
		JailMode: pf.jailMode(), Started: now, Deadline: now.Add(pf.hook.Timeout), PID: os.Getpid()}
	if raw, err := json.Marshal(pf.inputs); err == nil {
		rec.Inputs = raw
	}
	r := &activeRun{e: e, rec: rec, jail: pf.jail, manifest: pf.m, hook: pf.hook, inputs: pf.inputs, confirm: req.Confirm, actor: "run:" + rec.ID, started: time.Now(), session: req.Session,
		command: req.Command, jc: pf.command}
	if req.Command != nil {
		r.ttySize = req.TTY
	}
	if req.Client != "" {
		r.mcpDetails = map[string]any{"session": req.Session, "via": string(actor), "gate": pf.gate}
	}
	if pf.jail != nil && pf.hook.Network {
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
		if r.tty != nil {
			r.tty.close(0)
			r.tty.pty.Master.Close()
			r.tty.pty.Slave.Close()
		}
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
	// An unjailed hook finds this very binary as `warden` through the
	// run's bin/; a backend lays out its own.
	if r.jail == nil {
		exe, err := thisBinary()
		if err != nil {
			return nil, fmt.Errorf("cannot find the warden binary to offer hooks: %w", err)
		}
		if err := jail.LinkWarden(runDir, exe); err != nil {
			return nil, err
		}
	} else if err := r.jail.Prepare(runDir, e.jailHelper()); err != nil {
		return nil, err
	}
	if r.command != nil {
		if r.jc.Home, err = e.commandHome(r.command, runDir); err != nil {
			return nil, err
		}
	}
	if r.ttySize != nil {
		if r.tty, err = e.openTTY(r, *r.ttySize); err != nil {
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
	stampStage   bool // the first process may outlive the engine (jail.RunSpec)
}

// release lets go of what the spawner holds for the start (the files
// handed to the jail; the run's cgroup, and on v1 a launcher thread, if
// the process never started).
func (sp spawned) release() {
	if rel, ok := sp.spawner.(hooks.Releaser); ok {
		rel.Release()
	}
}

// spawnSpec lays out the process: the backend's plan (before the start
// receipt, which lists what is absent on this host), limits and egress
// proxy, then the argv, dir and environment in the jail's terms. A
// jailed hook whose network is a list gets its egress proxy here
// (r.egress; prepare's undo closes it if the start fails later).
func (e *Engine) spawnSpec(r *activeRun, pf preflighted) spawned {
	m, hook, runDir := pf.m, pf.hook, filepath.Dir(r.brk.SocketPath())
	sp := spawned{
		spawner: hooks.DirectSpawner{},
		spawn: hooks.Spawn{
			Argv: append([]string{filepath.Join(m.Dir, hook.Run[0])}, hook.Run[1:]...),
			Dir:  m.Dir,
		},
		startDetails: map[string]any{"run": r.rec.ID, "module": m.ID, "hook": hook.Name, "jail": pf.jailMode(), "inputs": inputNames(pf.inputs)},
	}
	maps.Copy(sp.startDetails, r.mcpDetails)
	if r.command != nil {
		maps.Copy(sp.startDetails, commandDetails(r.command, r.jc))
	}
	vars := map[string]string{
		"WARDEN_SOCKET": r.brk.SocketPath(),
		"WARDEN_TOKEN":  r.token,
		"WARDEN_RUN":    r.rec.ID,
		"WARDEN_MODULE": m.ID,
		"WARDEN_HOOK":   hook.Name,
	}
	pathFirst := filepath.Join(runDir, "bin")
	var spec *jail.RunSpec
	if r.jail == nil {
		if hook.Egress {
			r.streamLater = append(r.streamLater, storage.Line{At: time.Now(), Level: storage.LevelWarn,
				Text: "jail OFF: this hook's network list is not enforced (it has the host's network)"})
		}
	} else {
		sp.startDetails["network"] = r.network
		maps.Copy(sp.startDetails, r.networkDetails)
		spec, sp.planErr = r.jail.Spec(jail.SpecInput{ModuleDir: m.Dir, Run: hook.Run, Command: r.jc, RunDir: runDir, Socket: r.brk.SocketPath(),
			Helper: e.jailHelper(), Inputs: pathInputs(hook, pf.inputs), Network: r.network, Egress: hook.Egress,
			Hidden: hiddenFromHooks(e.DataDir()), Dialer: r.brk.Dialer})
		maps.Copy(sp.startDetails, spec.Details)
		if spec.Spawner != nil {
			sp.spawner = spec.Spawner
		}
		if sp.planErr == nil {
			sp.planErr = r.limit(spec.Spawner, sp.startDetails)
		}
		if sp.planErr == nil && hook.Egress {
			sp.planErr = r.egressSetup(spec.Spawner, runDir, sp.startDetails)
		}
		sp.spawn.Argv, sp.spawn.Dir, pathFirst, sp.stampStage = spec.Argv, spec.Dir, spec.PathFirst, spec.StampStage
		if vars["WARDEN_SOCKET"] = spec.Socket; spec.Socket == "" {
			delete(vars, "WARDEN_SOCKET") // the hook dials through its fd
		}
	}
	sp.spawn.Env = hooks.BuildEnv(os.Environ(), vars, pathFirst)
	if r.tty != nil {
		sp.spawn.PTY = r.tty.pty
	}
	if spec != nil {
		if spec.DialerFd != 0 {
			sp.spawn.Env = append(sp.spawn.Env, broker.DialerEnv+"="+strconv.Itoa(spec.DialerFd))
		}
		sp.spawn.Env = spec.ApplyEnv(sp.spawn.Env)
	}
	if r.egress != nil {
		sp.spawn.Env = egressEnv(sp.spawn.Env)
	}
	if r.command != nil && spec != nil {
		jailEnv := map[string]string{"HOME": spec.Env["HOME"], "TMPDIR": spec.Env["TMPDIR"]}
		if jailEnv["TMPDIR"] == "" {
			jailEnv["TMPDIR"] = "/tmp" // the jail's own
		}
		var err error
		if sp.spawn.Env, err = e.commandEnv(sp.spawn.Env, r.command, jailEnv); err != nil && sp.planErr == nil {
			sp.planErr = err
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
			Summary: fmt.Sprintf("run %s of %s started (%s%s%s)", r.rec.ID, r.what(), RunNote(r.rec.JailMode, r.limits), networkNote(r.network, r.egress != nil), commandNote(r.command)),
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
	h := &RunHandle{ID: r.rec.ID, Jail: r.rec.JailMode, Limits: r.limits, done: make(chan struct{}), r: r}
	if r.tty != nil {
		h.TTY = r.tty.path
	}
	e.runsMu.Lock()
	e.active[r.rec.ID] = h
	e.runsMu.Unlock()

	for _, l := range r.streamLater {
		r.streamLine(l.Level, l.Text)
	}
	r.streamLater = nil
	// The spawner is released once the process started, or at once when
	// it never will.
	if sp.planErr != nil {
		if r.tty != nil {
			// No reader takes the master: both ends go now.
			r.tty.pty.Slave.Close()
			r.tty.pty.Master.Close()
		}
		sp.release()
		go r.finish(h, hooks.Exit{Code: -1, Err: sp.planErr, Reason: sp.planErr.Error()})
		return h
	}
	proc, err := hooks.Start(sp.spawner, sp.spawn, hooks.Limits{Timeout: r.hook.Timeout, IdleTimeout: r.hook.IdleTimeout, KillGrace: r.hook.KillGrace}, r.output)
	sp.release()
	if err != nil {
		if r.tty != nil {
			r.tty.pty.Slave.Close()
			r.tty.pty.Master.Close()
		}
		go r.finish(h, hooks.Exit{Code: -1, Err: err, Reason: "could not start: " + err.Error()})
		return h
	}
	r.proc.Store(proc)
	if sp.stampStage {
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
