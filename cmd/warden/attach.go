package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/wardenhq/warden/cmd/serve/control"
	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/storage"
)

// attachWithin bounds how long a command keeps trying when the data dir
// is locked but nobody serves it yet: the holder may be starting (it
// serves the socket right after it opens the store).
const attachWithin = 1500 * time.Millisecond

// openEngine returns the engine a command works on. When another warden
// process holds the data dir (a console, `warden serve`, a long `hook
// run`), the command attaches to it over the control socket; otherwise it
// opens the store itself and serves it to others until it is closed.
// Either way the command sees the same engine.Facade.
func (a *app) openEngine() (engine.Facade, error) {
	dir, set, err := a.dataDirSettings()
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(attachWithin)
	for {
		c, err := control.Dial(dir)
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, control.ErrNoServer) {
			return nil, err
		}
		e, srv, err := openServed(dir, set, 250*time.Millisecond, nil)
		if err == nil {
			return &servedEngine{Engine: e, srv: srv, dir: dir, stderr: a.stderr}, nil
		}
		var locked *storage.LockedError
		if !errors.As(err, &locked) || time.Now().After(deadline) {
			return nil, err
		}
	}
}

// openLocal opens the store in this process and serves it (warden serve:
// the SSH server needs the engine itself). Another process serving the
// data dir is an error that names it.
func (a *app) openLocal(logf func(string, ...any)) (*engine.Engine, *control.Server, error) {
	dir, set, err := a.dataDirSettings()
	if err != nil {
		return nil, nil, err
	}
	if c, err := control.Dial(dir); err == nil {
		pid := c.PID()
		c.Close()
		return nil, nil, fmt.Errorf("warden (pid %d) already holds and serves %s: attach to it (any warden command does), or stop it first (kill %d)", pid, dir, pid)
	}
	return openServed(dir, set, 0, logf)
}

// dataDirSettings is the data dir a command means and the config file's
// settings (a broken config file stops the command, naming file and line).
func (a *app) dataDirSettings() (string, settings, error) {
	dir, err := engine.ResolveDataDir(a.dataDir)
	if err != nil {
		return "", settings{}, err
	}
	if err := a.checkChosenDataDir(); err != nil {
		return "", settings{}, err
	}
	set, err := loadSettings()
	return dir, set, err
}

func openServed(dir string, set settings, lockTimeout time.Duration, logf func(string, ...any)) (*engine.Engine, *control.Server, error) {
	e, err := engine.Open(engine.Options{DataDir: dir, BwrapPath: set.Bwrap, Jail: set.Jail, LimitCeiling: set.Limits, LockTimeout: lockTimeout})
	if err != nil {
		return nil, nil, err
	}
	srv, err := control.Listen(e, control.Options{Logf: logf})
	if err != nil {
		e.Close()
		return nil, nil, fmt.Errorf("serving %s to other warden processes: %w", dir, err)
	}
	return e, srv, nil
}

// stopSignalled is set by every verb that catches SIGINT, SIGTERM or
// SIGHUP itself (noteStop): servedEngine.Close then does not wait for
// attached runs, which its own signal handler would no longer see.
var stopSignalled atomic.Bool

// noteStop records that this process was asked to stop.
func noteStop() { stopSignalled.Store(true) }

// servedEngine is an engine this process holds and serves.
type servedEngine struct {
	*engine.Engine
	srv    *control.Server
	dir    string
	stderr io.Writer
}

// Close first lets the runs that attached processes started here end
// (they are this process's children, and their clients are waiting on
// them: a `hook run` that attached to this one's must not be cancelled
// because this verb ended first), saying so; a signal (SIGINT, SIGTERM,
// SIGHUP) stops the wait. Then it hangs up on attached processes (what
// is left is cancelled and receipted while the store is still open), and
// closes the engine.
func (s *servedEngine) Close() error {
	// Not when the verb caught a stop signal of its own before it got
	// here (hook run, mcp serve, hands): the process was asked to stop,
	// and a SIGTERM is never swallowed by a wait.
	if !stopSignalled.Load() {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
		s.srv.Drain(ctx, func(n int) {
			if s.stderr != nil {
				fmt.Fprintf(s.stderr, "warden: waiting for %d run(s) that other warden processes started through this one (pid %d holds %s) to end; ctrl-c cancels them\n", n, os.Getpid(), s.dir)
			}
		})
		stop()
	}
	s.srv.Close()
	return s.Engine.Close()
}

// attachedPID is the serving process's pid when e is attached to one.
func attachedPID(e engine.Facade) int {
	if c, ok := e.(*control.Client); ok {
		return c.PID()
	}
	return 0
}
