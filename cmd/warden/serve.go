package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/wardenhq/warden/cmd/serve/fleethost"
	"github.com/wardenhq/warden/cmd/serve/sshconsole"
	"github.com/wardenhq/warden/engine"
)

// sshShutdownTimeout bounds how long a shutdown waits for SSH sessions to
// end before it drops them.
const sshShutdownTimeout = 5 * time.Second

func (a *app) serveCommand() *cobra.Command {
	var sshAddr, operators, runHook, runJail string
	var fl fleetJoin
	var runInputs []string
	c := &cobra.Command{
		Use:   "serve",
		Short: "Run the engine without a console until SIGTERM or SIGINT",
		Long: `serve holds the data dir and runs the engine headless. Other warden
commands and consoles on this machine attach to it through the data dir's
control socket (control.sock); with --ssh ADDR it also serves the console
over SSH to the keys in --operators FILE (authorized_keys lines prefixed by
a role, operator or viewer).

On SIGTERM or SIGINT it shuts down cleanly: running hooks are cancelled
(each run's receipt says so), run sockets are removed and the data dir is
released. A second signal during the shutdown kills it at once.`,
		Example: `  warden serve
  warden serve --ssh 127.0.0.1:2222 --operators ~/.config/warden/operators
  warden serve --fleet tls://nats.example:4222 --fleet-creds /etc/warden/fleet.creds --fleet-host web1`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if sshAddr == "" && operators != "" {
				return usageError{errors.New("--operators needs --ssh ADDR")}
			}
			set, err := loadSettings()
			if err != nil {
				return err
			}
			fl = fl.or(set.Fleet)
			if err := fl.check(); err != nil {
				return err
			}
			var run *engine.RunRequest
			if runHook != "" {
				mod, hook, ok := strings.Cut(runHook, "/")
				if !ok || mod == "" || hook == "" {
					return usageError{fmt.Errorf("--run %q: want MODULE/HOOK", runHook)}
				}
				if !validJail(runJail) {
					return usageError{fmt.Errorf("--jail %q: want auto, bwrap, landlock or off", runJail)}
				}
				raw, err := parseInputFlags(runInputs)
				if err != nil {
					return err
				}
				run = &engine.RunRequest{Module: mod, Hook: hook, RawInputs: raw, Jail: runJail}
			} else if len(runInputs) > 0 {
				return usageError{errors.New("--input needs --run MODULE/HOOK")}
			}
			return a.serve(sshAddr, operators, run, fl)
		},
	}
	c.Flags().StringVar(&sshAddr, "ssh", "", "serve the console over SSH on ADDR (e.g. 127.0.0.1:2222; default: no SSH)")
	c.Flags().StringVar(&operators, "operators", "", "operators file for --ssh: authorized_keys lines prefixed by operator or viewer")
	// A test and ops convenience: start one hook when serving starts
	// (e.g. to check a shutdown cancels it). Not part of the interface.
	// If the hook cannot start, serve fails before it says "serving".
	c.Flags().StringVar(&runHook, "run", "", "start MODULE/HOOK at startup (as the local operator)")
	c.Flags().StringArrayVar(&runInputs, "input", nil, "an input of the --run hook as NAME=VALUE (repeatable); typed by the manifest")
	fl.bind(c)
	c.Flags().StringVar(&runJail, "jail", "", "jail of the --run hook: auto (default), bwrap, landlock or off")
	c.Flags().MarkHidden("run")
	c.Flags().MarkHidden("input")
	c.Flags().MarkHidden("jail")
	return c
}

// serve runs the engine headless until a signal. With run, it starts that
// hook first: if it cannot, serve fails (exit 1) before it says
// "serving", with SSH and the control socket already closed again.
func (a *app) serve(sshAddr, operators string, run *engine.RunRequest, fl fleetJoin) error {
	// Signals are caught before the engine opens, so that a SIGTERM
	// arriving at any point from here on is a clean shutdown. SIGHUP (the
	// terminal serve was started in closed, an ssh session dropped) is
	// one too: its default killed serve with no grace for the hooks.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)

	logf := func(format string, args ...any) { fmt.Fprintln(a.stderr, safe(fmt.Sprintf(format, args...))) }
	a.sayNewDataDir()
	e, ctl, err := a.openLocal(logf)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	var srv *sshconsole.Server
	var fh *fleethost.Host
	closed := false
	shutdown := func() error {
		if closed {
			return nil
		}
		closed = true
		// The SSH consoles first, while the engine they show still runs:
		// each quits, restoring its client's terminal, and its session
		// ends with exit status 0.
		if srv != nil {
			sctx, scancel := context.WithTimeout(context.Background(), sshShutdownTimeout)
			if err := srv.Shutdown(sctx); err != nil {
				fmt.Fprintf(a.stderr, "ssh: %s\n", safe(err.Error()))
			}
			scancel()
		}
		cancel()
		if fh != nil {
			fh.Close() // the fleet link reads the engine: it stops first
		}
		ctl.Close()      // hangs up on attached consoles and CLIs, removes control.sock
		return e.Close() // cancels and receipts running hooks, removes their dirs, releases the store
	}
	defer shutdown()

	if fh, err = a.joinFleet(e, fl); err != nil {
		return err
	}
	if fh != nil {
		// Fleet operators may answer this host's requests: they wait.
		detach := e.AttachOperator()
		defer detach()
	}

	if sshAddr != "" {
		// Headless, requests wait for an operator who can answer them. With
		// SSH serving consoles one may come (or the request expires), so
		// the engine counts an operator as attached. Without --ssh only a
		// console attached over the control socket can answer: it attaches
		// itself while it is there; with none, a hook's request is denied
		// at once, saying so in its stream.
		detach := e.AttachStandingOperator()
		defer detach()
		s, err := sshconsole.Start(ctx, e, sshconsole.Config{Addr: sshAddr, Operators: operators, Version: version})
		if err != nil {
			return err
		}
		srv = s
	}

	// Everything asked for is in place before serve says it is serving:
	// a --run hook that cannot start (an unknown hook, a missing or
	// malformed input) is an error, not a line in a log.
	if run != nil {
		h, err := e.StartRun(engine.LocalActor(), *run)
		if err != nil {
			return fmt.Errorf("--run %s/%s: %w", run.Module, run.Hook, err)
		}
		// The backend the run got (auto chose one), as its receipts say.
		fmt.Fprintf(a.stderr, "run %s of %s/%s started (%s)\n", h.ID, run.Module, run.Hook, engine.RunNote(h.Jail, h.Limits))
	}
	if a.json {
		a.emitJSON(map[string]any{"dataDir": e.DataDir(), "pid": os.Getpid(), "ssh": sshAddr, "control": ctl.Path()})
	} else {
		a.printf("serving data dir %s (pid %d) on %s\n", e.DataDir(), os.Getpid(), ctl.Path())
	}

	sig := <-sigs
	fmt.Fprintf(a.stderr, "received %s: shutting down (again to force)\n", sig)
	// Said before they go: which runs of which terminals this stop
	// cancels (docs/operating.md).
	by := map[string]int{}
	for _, r := range ctl.InFlight() {
		by[r.ID] = r.PID
	}
	for _, r := range e.RunningHere() {
		from := ""
		if pid, ok := by[r.ID]; ok {
			from = fmt.Sprintf(", whose warden (pid %d) is waiting on it", pid)
		}
		fmt.Fprintf(a.stderr, "cancelling run %s of %s/%s, started by %s%s\n", r.ID, safe(r.Module), safe(r.Hook), safe(r.Actor), from)
	}
	signal.Stop(sigs) // a second signal kills at once
	if err := shutdown(); err != nil {
		return fmt.Errorf("shutting down: %w", err)
	}
	fmt.Fprintln(a.stderr, "stopped")
	return nil
}
