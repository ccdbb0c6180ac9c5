package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/engine/hands"
	"github.com/wardenhq/warden/tui"
)

func (a *app) handsCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "hands",
		Short: "Set up, check and finish \"hands\" containers on Docker or Podman",
		Long: `A hands root is a new directory that owns one container where a task's
effects happen: no network, read-only root, all capabilities dropped,
no-new-privileges, uid 10002, pids and open-file limits, a 128 MiB tmpfs
at /workspace. evidence/setup.json records every phase before its effect,
so the root can always be finished or reconciled. The engine is a Docker
Engine or a Podman service (its Docker-compatible socket, from
` + "`podman system service`" + `; needs catatonit), reached only over the
--engine-socket you name at init (never DOCKER_HOST). warden tells them
apart and records which one it was in setup.json.`,
	}
	var root, socket, image, access string
	initCmd := &cobra.Command{
		Use:   "init --root ABS --engine-socket PATH --image NAME --access files|none",
		Short: "Create a new hands root and start its container",
		Long: `init validates the root (absolute, canonical, new, no control characters
or commas, under ancestors owned by root or you and not group- or
world-writable), checks the engine, creates the layout, resolves the image
LOCALLY to its sha256: id (it never pulls), creates and starts the
container, sets the root's initial policy (workspace read/write when
--access files; no execute, no network) and reaches phase ready. A
progress line per step goes to stderr; --json prints a summary instead.

On an error, SIGINT or SIGTERM after the receipt exists, the container is
stopped (only if it carries this root's owner label), the phase becomes
failed and evidence/initialization-failure.json says what was left.`,
		Example: `  warden hands init --root $HOME/hands/task1 --engine-socket /run/docker.sock \
      --image busybox:1.36 --access files
  warden hands init --root /srv/hands/t2 --engine-socket /run/docker.sock --image alpine:3.20 --access none --json
  warden hands init --root $HOME/hands/t3 --engine-socket /run/podman/podman.sock --image busybox:1.36 --access files`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlags(cmd, "root", "engine-socket", "image", "access"); err != nil {
				return err
			}
			if access != hands.AccessFiles && access != hands.AccessNone {
				return usageError{fmt.Errorf("--access %q: want %s (the workspace may be read and written) or %s\nsee `%s --help`",
					access, hands.AccessFiles, hands.AccessNone, cmd.CommandPath())}
			}
			ctx, stop := a.signalContext()
			defer stop()
			return a.withEngine(func(e engine.Facade) error {
				res, err := e.HandsInit(ctx, engine.LocalActor(), hands.InitOptions{Root: root, EngineSocket: socket, Image: image, Access: access, Progress: a.progress()})
				var failed *hands.InitFailedError
				if errors.As(err, &failed) {
					// The root is spent (a root is never reused): say the
					// one command that closes it.
					return fmt.Errorf("%w\nthis root is spent: `warden hands finish --root %s` closes its books; then init a new root", err, root)
				}
				if err != nil {
					return err
				}
				return a.done(res, "hands %s ready: container %s from %s (%s) on %s, access %s, workspace inodes %s\nfinish it with `warden hands finish --root %s`\n",
					safe(res.Root), safe(res.ContainerID[:12]), safe(res.ImageName), safe(res.Image), safe(res.Engine), safe(res.Access), safe(res.Inodes), safe(res.Root))
			})
		},
	}
	initCmd.Flags().StringVar(&root, "root", "", "the new hands root (absolute; must not exist)")
	initCmd.Flags().StringVar(&socket, "engine-socket", "", "the Docker or Podman unix socket, e.g. /run/docker.sock or /run/podman/podman.sock (required; no default)")
	initCmd.Flags().StringVar(&image, "image", "", "a local image name or id (never pulled)")
	initCmd.Flags().StringVar(&access, "access", "", "files (the workspace may be read and written) or none")

	var finishRoot string
	finish := &cobra.Command{
		Use:   "finish --root ABS",
		Short: "Stop the root's container and close its books",
		Long: `finish reads evidence/setup.json strictly, checks that the engine is the
recorded one (same kind, daemon ID and storage), and stops exactly the recorded
container, only if it carries this root's owner label and is still the
recorded generation; it verifies the stop by inspection, writes phase
finished and revokes every grant of the root's policy. Anything else is
refused with what to do next. The stopped container stays on the engine
(its logs and filesystem changes are evidence warden does not copy): finish
prints the command that removes it (--json: containerKept, keptWhy,
removeWith).`,
		Example: `  warden hands finish --root $HOME/hands/task1`,
		Args:    args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlags(cmd, "root"); err != nil {
				return err
			}
			ctx, stop := a.signalContext()
			defer stop()
			return a.withEngine(func(e engine.Facade) error {
				res, err := e.HandsFinish(ctx, engine.LocalActor(), finishRoot, a.progress())
				if err != nil {
					return err
				}
				what := "stopped"
				if !res.Stopped {
					what = "not stopped: " + safe(res.Note)
				}
				kept := ""
				if res.ContainerKept {
					kept = fmt.Sprintf("the stopped container stays on the engine (%s);\nremove it when you are done with it: %s\n", res.KeptWhy, safe(res.RemoveWith))
				}
				return a.done(res, "hands %s finished: container %s %s; its grants are revoked\n%s", safe(res.Root), orNone12(res.ContainerID), what, kept)
			})
		},
	}
	finish.Flags().StringVar(&finishRoot, "root", "", "the hands root")

	var statusRoot string
	status := &cobra.Command{
		Use:   "status --root ABS",
		Short: "Compare the root's receipt with the live container (exit 1 on drift)",
		Long: `status shows the phase recorded in evidence/setup.json beside what the
engine shows now (running, exited, missing; start time against the
recorded generation; the owner label), and every drift between them with
its fix. It changes nothing. Exit 1 when there is drift.`,
		Example: `  warden hands status --root $HOME/hands/task1
  warden hands status --root $HOME/hands/task1 --json | jq .drift`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireFlags(cmd, "root"); err != nil {
				return err
			}
			return a.withEngine(func(e engine.Facade) error {
				s, err := e.HandsStatus(context.Background(), statusRoot)
				if err != nil {
					return err
				}
				if a.json {
					if err := a.emitJSON(s); err != nil {
						return err
					}
				} else {
					a.printStatus(s)
				}
				if len(s.Drift) > 0 {
					return &exitError{code: 1}
				}
				return nil
			})
		},
	}
	status.Flags().StringVar(&statusRoot, "root", "", "the hands root")

	list := &cobra.Command{
		Use:   "list",
		Short: "List the hands roots this data dir knows",
		Example: `  warden hands list
  warden hands list --json`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withEngine(func(e engine.Facade) error {
				rs, err := e.HandsList()
				if err != nil {
					return err
				}
				if a.json {
					if rs == nil {
						rs = []engine.HandsRecord{}
					}
					return a.emitJSON(rs)
				}
				if len(rs) == 0 {
					a.printf("no hands roots yet: set one up with `warden hands init --root ABS --engine-socket PATH --image NAME --access files|none`\n")
					return nil
				}
				tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ROOT\tPHASE\tENGINE\tCONTAINER\tACCESS\tUPDATED")
				for _, r := range rs {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", safe(r.Root), safe(string(r.Phase)), safe(r.EngineName()), orNone12(r.ContainerID), safe(r.Access), r.Updated.Local().Format("2006-01-02 15:04:05"))
				}
				return tw.Flush()
			})
		},
	}
	c.AddCommand(initCmd, finish, status, list)
	return c
}

// requireFlags makes a missing flag a usage error (exit 2) that names it.
func requireFlags(cmd *cobra.Command, names ...string) error {
	for _, n := range names {
		if f := cmd.Flags().Lookup(n); f == nil || f.Value.String() == "" {
			return usageError{fmt.Errorf("--%s is required (no default)\nusage: %s", n, cmd.UseLine())}
		}
	}
	return nil
}

// signalContext is cancelled by SIGINT or SIGTERM, with the signal as its
// cause, so init's failure path runs instead of warden dying mid-step.
// Later signals are swallowed until the command returns: the cleanup must
// finish.
func (a *app) signalContext() (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				noteStop()
				if ctx.Err() == nil {
					fmt.Fprintf(a.stderr, "warden: received %v: stopping and recording what was left\n", s)
				}
				cancel(fmt.Errorf("received %v", s))
			case <-done:
				return
			}
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		cancel(nil)
	}
}

// progress prints a line per step on stderr, unless --json.
func (a *app) progress() func(step, detail string) {
	if a.json {
		return nil
	}
	return func(step, detail string) {
		mark := "✓"
		if step == hands.StepFailed {
			mark = "✗"
		}
		fmt.Fprintf(a.stderr, "%s %-9s %s\n", mark, safe(step), safe(detail))
	}
}

// printStatus prints a root's status with the console's printer, so the
// CLI and the Hands tab read the same.
func (a *app) printStatus(s hands.StatusReport) {
	fmt.Fprint(a.stdout, tui.HandsStatusText(s))
}

func orNone12(id string) string {
	if len(id) >= 12 {
		return id[:12]
	}
	return "none"
}
