package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/engine/jail"
)

// exitRefused is `warden run`'s status when warden itself refused or
// failed (as `docker run` has it): every other status is the command's.
const exitRefused = 125

// runFlags are `warden run`'s flags.
type runFlags struct {
	profile   string
	workspace string
	freshHome bool
	allow     []string
	ro        []string
	env       []string
	secretEnv []string
	jail      string
	timeout   time.Duration
	print     bool
	learn     bool
}

func (a *app) runCommand() *cobra.Command {
	var f runFlags
	c := &cobra.Command{
		Use:   "run [flags] -- COMMAND [ARGS...]",
		Short: "Run any program (an agent CLI: claude, codex) in the jail, its network by name",
		Long: `run starts COMMAND in warden's jail, as a hook runs, and exits with its status
(125 when warden itself refused or failed, with the reason).

  the command   found on your PATH; it and what it needs to start (its npm
                package and the dependencies beside it, its interpreter) are
                bound read-only at their own paths; --ro adds more
  workspace     --workspace DIR (default: the current dir), read-write; the
                command starts there
  home          a private HOME, kept per profile in the data dir (0700):
                an agent's login and settings last between sessions;
                --fresh-home gives an empty one, removed at the end. Your
                own home stays out of reach
  network       none, unless the profile or --allow-host names hosts; then
                everything goes through the run's egress proxy
                (HTTPS_PROXY, HTTP_PROXY), and a host nobody named is a
                permission request for the console or ` + "`warden perms`" + `.
                --allow-host localhost:PORT is the one way to a service on
                this host's loopback (a local model server), one port each
  environment   the hook allow-list, plus --env NAME (from yours) and
                --secret-env NAME=SECRET (a secret of module "run": warden
                secrets set run SECRET); secret values never show anywhere

The session is a run: it shows in ` + "`warden hook runs`" + `, the console's Streams
and receipts. --print shows what would be bound and why, and starts
nothing. Profiles (--profile NAME): shipped claude and codex, or your own
in the data dir's profiles/NAME.yaml.`,
		Example: `  warden run --profile claude -- claude
  warden run --profile claude --print -- claude
  warden run --allow-host localhost:11434 -- ./agent.py
  warden run --secret-env ANTHROPIC_API_KEY=anthropic -- claude -p "fix the test"`,
		Args: func(cmd *cobra.Command, argv []string) error {
			if len(argv) == 0 {
				return usageError{fmt.Errorf("no command: give it after --\nusage: %s", cmd.UseLine())}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, argv []string) error {
			if !validJail(f.jail) {
				return usageError{fmt.Errorf("--jail %q: want auto, bwrap or landlock", f.jail)}
			}
			cr, rc, err := a.commandRun(f, argv)
			if err != nil {
				return &exitError{code: exitRefused, err: err}
			}
			if f.print {
				return a.printCommandRun(cr, rc, f)
			}
			return a.startCommandRun(cr, f)
		},
	}
	fl := c.Flags()
	fl.StringVar(&f.profile, "profile", "", "a profile: its hosts, env names and settings (shipped: claude, codex; yours: DATA/profiles/NAME.yaml)")
	fl.StringVar(&f.workspace, "workspace", "", "the dir bound read-write, where the command starts (default: the current dir)")
	fl.BoolVar(&f.freshHome, "fresh-home", false, "an empty HOME, removed afterwards, instead of the profile's kept one")
	fl.StringArrayVar(&f.allow, "allow-host", nil, "a host the command may reach, HOST[:PORT] (repeatable); localhost:PORT reaches this host's loopback")
	fl.StringArrayVar(&f.ro, "ro", nil, "one more path bound read-only at its own path (repeatable)")
	fl.StringArrayVar(&f.env, "env", nil, "pass NAME from your environment (repeatable)")
	fl.StringArrayVar(&f.secretEnv, "secret-env", nil, "set NAME from warden's secret SECRET of module run, as NAME=SECRET (repeatable)")
	fl.StringVar(&f.jail, "jail", "", "auto (bwrap, else landlock), bwrap or landlock")
	fl.DurationVar(&f.timeout, "timeout", 0, "stop the command after this long (default: the profile's, else 24h)")
	fl.BoolVar(&f.print, "print", false, "show what the command would get, and start nothing")
	fl.BoolVar(&f.learn, "learn", false, "run as usual, refusing what is not allowed; at the end print the profile that would have allowed what it tried (nothing is granted by learning)")
	return c
}

// commandRun resolves what only this process can see (the PATH, the
// working dir, the environment) into the engine's request.
func (a *app) commandRun(f runFlags, argv []string) (*engine.CommandRun, *resolvedCommand, error) {
	dataDir, err := engine.ResolveDataDir(a.dataDir)
	if err != nil {
		return nil, nil, err
	}
	var prof *engine.Profile
	if f.profile != "" {
		if prof, err = engine.LoadProfile(dataDir, f.profile); err != nil {
			return nil, nil, err
		}
	}
	rc, err := resolveCommand(argv[0])
	if err != nil {
		return nil, nil, err
	}
	cr := &engine.CommandRun{Argv: argv, Exe: rc.Exe, FreshHome: f.freshHome, Env: map[string]string{}, SecretEnv: map[string]string{}, Timeout: f.timeout}
	hosts := f.allow
	ro := f.ro
	if prof != nil {
		cr.Profile = prof.Name
		hosts = append(append([]string{}, prof.Hosts...), hosts...)
		ro = append(append([]string{}, prof.RO...), ro...)
		for _, k := range prof.Env {
			if v, ok := os.LookupEnv(k); ok {
				cr.Env[k] = v
			}
		}
		cr.SetEnv = prof.SetEnv
		if prof.Command != "" && filepath.Base(argv[0]) == prof.Command && len(prof.Args) > 0 {
			cr.Argv = append(append([]string{argv[0]}, prof.Args...), argv[1:]...)
		}
		if cr.Timeout == 0 {
			cr.Timeout = prof.TimeoutOr(0)
		}
	}
	if cr.Hosts, cr.Loopback, err = engine.SplitHosts(hosts); err != nil {
		return nil, nil, fmt.Errorf("--allow-host %w", err)
	}
	for _, p := range ro {
		abs, err := filepath.Abs(p)
		if err == nil {
			abs, err = filepath.EvalSymlinks(abs)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("--ro %s: %w", p, err)
		}
		if rc.add(abs, "--ro") {
			rc.Binds[len(rc.Binds)-1].Asked = true
		}
	}
	for _, k := range f.env {
		v, ok := os.LookupEnv(k)
		if !ok {
			return nil, nil, fmt.Errorf("--env %s: it is not set in your environment", k)
		}
		cr.Env[k] = v
	}
	for _, kv := range f.secretEnv {
		k, s, ok := strings.Cut(kv, "=")
		if !ok || k == "" || s == "" {
			return nil, nil, fmt.Errorf("--secret-env %q: want NAME=SECRET (a secret of module run: `warden secrets set run SECRET`)", kv)
		}
		cr.SecretEnv[k] = s
	}
	ws := f.workspace
	if ws == "" {
		if ws, err = os.Getwd(); err != nil {
			return nil, nil, fmt.Errorf("the current dir: %w (give --workspace)", err)
		}
	}
	if ws, err = filepath.Abs(ws); err == nil {
		ws, err = filepath.EvalSymlinks(ws)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("--workspace: %w", err)
	}
	if st, err := os.Stat(ws); err != nil || !st.IsDir() {
		return nil, nil, fmt.Errorf("--workspace %s is not a dir", ws)
	}
	cr.Workspace = ws
	// What warden found for the program inside the workspace is part of
	// it (read-write, as the workspace is); what the operator asked for
	// stays a bind of its own.
	for _, b := range rc.Binds {
		if b.Asked || !(b.Path == ws || strings.HasPrefix(b.Path, ws+"/")) {
			cr.Binds = append(cr.Binds, b)
		}
	}
	// The engine checks again; refusing here first leaves nothing made.
	home, _ := os.UserHomeDir()
	if err := jail.CheckCommand(&jail.Command{Exe: cr.Exe, Binds: cr.Binds, Workspace: cr.Workspace, Home: filepath.Join(dataDir, "homes", cr.HomeName())}, dataDir, home); err != nil {
		return nil, nil, err
	}
	return cr, rc, nil
}

// commandPlan is what --print shows (and --json gives).
type commandPlan struct {
	Command   []string          `json:"command"`
	Found     string            `json:"found"`
	Exe       string            `json:"exe"`
	Binds     []jail.Bind       `json:"binds"`
	Workspace string            `json:"workspace"`
	Home      string            `json:"home"`
	Hosts     []string          `json:"hosts"`
	Loopback  []uint16          `json:"loopback"`
	Env       []string          `json:"env"`
	SecretEnv map[string]string `json:"secretEnv"`
	Profile   string            `json:"profile,omitempty"`
	Jail      string            `json:"jail"`
}

func (a *app) printCommandRun(cr *engine.CommandRun, rc *resolvedCommand, f runFlags) error {
	dataDir, _ := engine.ResolveDataDir(a.dataDir)
	home := filepath.Join(dataDir, "homes", cr.HomeName())
	if cr.FreshHome {
		home = "(fresh: an empty dir in the run's dir, removed at its end)"
	}
	p := commandPlan{Command: cr.Argv, Found: rc.Found, Exe: cr.Exe, Binds: cr.Binds, Workspace: cr.Workspace, Home: home,
		Hosts: cr.Hosts, Loopback: cr.Loopback, Env: slices.Sorted(maps.Keys(cr.Env)), SecretEnv: cr.SecretEnv, Profile: cr.Profile}
	if err := a.withEngine(func(e engine.Facade) error {
		var err error
		if p.Jail, err = e.JailBackend(f.jail); err != nil {
			p.Jail = "none: " + err.Error()
		}
		return nil
	}); err != nil {
		return &exitError{code: exitRefused, err: err}
	}
	if a.json {
		return a.emitJSON(p)
	}
	w := a.stdout
	fmt.Fprintf(w, "command    %s\n", safe(strings.Join(cr.Argv, " ")))
	fmt.Fprintf(w, "program    %s (found on PATH as %s)\n", safe(cr.Exe), safe(rc.Found))
	for _, b := range cr.Binds {
		fmt.Fprintf(w, "ro         %s  (%s)\n", safe(b.Path), safe(b.Reason))
	}
	fmt.Fprintf(w, "rw         %s  (the workspace; the command starts here)\n", safe(cr.Workspace))
	fmt.Fprintf(w, "rw         %s  (HOME)\n", safe(home))
	switch {
	case len(cr.Hosts) == 0 && len(cr.Loopback) == 0:
		fmt.Fprintln(w, "network    none (name hosts with --allow-host or a profile)")
	default:
		fmt.Fprintf(w, "network    through the run's egress proxy to: %s", safe(strings.Join(cr.Hosts, ", ")))
		for _, port := range cr.Loopback {
			fmt.Fprintf(w, "; LOOPBACK localhost:%d", port)
		}
		fmt.Fprintln(w, "; any other host is a permission request")
	}
	if len(p.Env) > 0 {
		fmt.Fprintf(w, "env        %s\n", safe(strings.Join(p.Env, " ")))
	}
	for _, k := range slices.Sorted(maps.Keys(cr.SecretEnv)) {
		fmt.Fprintf(w, "secret env %s from secret %s of module run\n", safe(k), safe(cr.SecretEnv[k]))
	}
	fmt.Fprintf(w, "jail       %s, with the system's /usr, /bin, /lib*, CA certificates and a private /tmp (see `warden doctor`, docs/jail.md)\n", safe(p.Jail))
	return nil
}

// startCommandRun runs cr and follows its stream here; the process exits
// with the command's status.
func (a *app) startCommandRun(cr *engine.CommandRun, f runFlags) error {
	return a.withEngine(func(e engine.Facade) error {
		req := engine.RunRequest{Command: cr, Jail: f.jail}
		signalledVerb = "warden run"
		var runID atomic.Value
		// A question (a host nobody named) waits for the console or
		// `warden perms`; from the background of a terminal it says
		// which request waits.
		tty, background := openTTY(a.stdin)
		switch {
		case tty != nil && !a.json && isTerminal(a.stdout): // `> out` gets pipes
			// The terminal is the command's: a pty of the run's, its
			// questions go to the console or `warden perms`.
			defer tty.Close()
			cols, rows, err := term.GetSize(int(tty.Fd()))
			if err != nil {
				return &exitError{code: exitRefused, err: fmt.Errorf("the terminal's size: %w", err)}
			}
			req.TTY = &engine.TTYSize{Rows: uint16(rows), Cols: uint16(cols)}
		case tty != nil:
			defer tty.Close()
			req.Confirm = ttyConfirm(tty, &openPrompt{tty: tty}, backgroundConfirm(e, a.stderr, &runID))
		case background:
			req.Confirm = backgroundConfirm(e, a.stderr, &runID)
		}
		w, err := startWatched(e, req, &runID)
		if err != nil {
			return &exitError{code: exitRefused, err: err}
		}
		defer w.close()
		h, sub := w.h, w.sub
		if !a.json {
			fmt.Fprintf(a.stderr, "run %s of %s started (%s%s)\n", h.ID, safe(strings.Join(cr.Argv, " ")), engine.RunNote(h.Jail, h.Limits), loopbackNote(cr))
		}
		restore := func() {}
		var drained <-chan struct{}
		if req.TTY != nil {
			if restore, drained, err = attachTerminal(tty, h); err != nil {
				h.CancelFor("warden run could not reach the run's terminal: " + err.Error())
				h.Wait()
				return &exitError{code: exitRefused, err: err}
			}
		}
		w.cancelOnSignal(func() { restore() }) // the operator's terminal is theirs again at once
		if req.TTY != nil {
			<-h.Done()
			select {
			case <-drained:
			case <-time.After(2 * time.Second):
			}
			restore()
		} else {
			var out io.Writer = a.stdout
			if a.json {
				out = io.Discard
			}
			var asked func(engine.Request)
			if tty == nil && !background {
				asked = waitingNotice(e, a.stderr)
			}
			a.followAsking(e, sub, h.ID, 0, out, writeLine, h.Done(), asked)
		}
		o := h.Wait()
		if stored, ok := a.storedOutcome(e, h.ID); ok {
			o = stored
		}
		var learned *learnedProfile
		if f.learn {
			learned = learn(cr, o)
		}
		if a.json {
			if learned != nil {
				a.emitJSON(map[string]any{"outcome": o, "learned": learned})
			} else {
				a.emitJSON(o)
			}
		} else {
			fmt.Fprintf(a.stderr, "run %s %s in %s", o.Run.ID, o.Run.Status, o.Duration.Round(time.Millisecond))
			if o.Run.Error != "" {
				fmt.Fprintf(a.stderr, ": %s", safe(o.Run.Error))
			}
			fmt.Fprintln(a.stderr)
			if learned != nil {
				learned.print(a.stderr)
			}
		}
		return commandExit(o, a.json)
	})
}

// commandExit is the command's own status, or exitRefused when it never
// ran or warden stopped it. The reason was printed with the run's end
// line; --json, which prints no such line, gets it as the error.
func commandExit(o engine.Outcome, json bool) error {
	if o.OK() {
		return nil
	}
	if o.Run.Exit != nil && *o.Run.Exit > 0 && *o.Run.Exit < 256 {
		return &exitError{code: *o.Run.Exit}
	}
	why := ""
	if json {
		why = o.Run.Error
		if why == "" {
			why = "the run " + string(o.Run.Status)
		}
	}
	return &exitError{code: exitRefused, err: errors.New(why)}
}

func loopbackNote(cr *engine.CommandRun) string {
	var b strings.Builder
	for i, p := range cr.Loopback {
		if i == 0 {
			b.WriteString(", LOOPBACK: localhost:")
		} else {
			b.WriteString(", ")
		}
		fmt.Fprint(&b, p)
	}
	return b.String()
}
