package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/wardenhq/warden/cmd/serve/control"
	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/engine/hookcli"
	"github.com/wardenhq/warden/engine/termsafe"
)

// hookCommand holds the operator's hook verbs (run, runs, logs, plan) and the
// helpers a hook calls from inside its jail (context, log, secret, ...).
func (a *app) hookCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "hook",
		Short: "Run hooks and read their streams; inside a hook, talk to the engine",
		Long: `Operator verbs: run, runs, logs, plan.

Inside a running hook (WARDEN_SOCKET and WARDEN_TOKEN set), these are the
shell helper: context, log, secret, config, call, confirm, result. They exit
0 on success, 1 when the engine threw (message on stderr), 2 on usage. In a
jail, the hook's warden is warden-hook, a small binary with just these verbs
when it sits beside this one (warden doctor says which).`,
	}
	c.AddCommand(a.hookRunCommand(), a.hookRunsCommand(), a.hookLogsCommand(), a.hookPlanCommand())
	c.AddCommand(hookVerbs(hookcli.Commands(&hookcli.Env{Stdout: a.stdout, Stderr: a.stderr, Stdin: a.stdin, JSON: &a.json}))...)
	return c
}

func (a *app) hookRunCommand() *cobra.Command {
	var inputs []string
	var jail string
	c := &cobra.Command{
		Use:   "run MODULE HOOK",
		Short: "Run a hook, stream its lines here, and exit with its verdict",
		Long: `run starts the hook, prints its stream lines as they become durable and exits
0 when the run succeeded, 1 when it failed. Ctrl-C cancels the run (it is
receipted). When the hook asks operator.confirm, a terminal gets a [y/N]
prompt; without a terminal the answer is no (unless a console is attached:
it waits there). Started in the background of a terminal (&), run never
reads or queries the terminal: it says which request waits, and the
console or ` + "`warden perms approve ID`" + ` answers it.`,
		Example: `  warden hook run hello on_install --input target=world --jail=off
  warden hook run hello on_install --json`,
		Args: args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			raw, err := parseInputFlags(inputs)
			if err != nil {
				return err
			}
			if !validJail(jail) {
				return usageError{fmt.Errorf("--jail %q: want auto, bwrap, landlock or off", jail)}
			}
			return a.withEngineModule(argv[0], func(e engine.Facade, mod *engine.Module) error {
				req := engine.RunRequest{Module: argv[0], Hook: argv[1], RawInputs: raw, Jail: jail}
				if err := checkInputs(mod, req); err != nil {
					return usageError{fmt.Errorf("%w\nusage: %s (see `warden module show %s`)", err, cmd.UseLine(), argv[0])}
				}
				var runID atomic.Value
				tty, background := openTTY(a.stdin)
				var prompt *openPrompt
				switch {
				case tty != nil:
					defer tty.Close()
					prompt = &openPrompt{tty: tty}
					req.Confirm = ttyConfirm(tty, prompt, backgroundConfirm(e, a.stderr, &runID))
				case background:
					req.Confirm = backgroundConfirm(e, a.stderr, &runID)
				}
				w, err := startWatched(e, req, &runID)
				if err != nil {
					return err
				}
				defer w.close()
				h, sub := w.h, w.sub
				if !a.json {
					// The backend the run got (auto chose one) and how its
					// limits stand, as its start receipt says.
					fmt.Fprintf(a.stderr, "run %s of %s/%s started (%s)\n", h.ID, argv[0], argv[1], engine.RunNote(h.Jail, h.Limits))
				}
				w.cancelOnSignal(func() {})
				var out io.Writer = a.stdout
				if a.json {
					out = io.Discard
				} else if prompt != nil {
					out = breakPrompt{out, prompt}
				}
				var asked func(engine.Request)
				if tty == nil && !background {
					asked = waitingNotice(e, a.stderr)
				}
				a.followAsking(e, sub, h.ID, 0, out, writeLine, h.Done(), asked)
				o := h.Wait()
				if stored, ok := a.storedOutcome(e, h.ID); ok {
					o = stored
					if !a.json {
						fmt.Fprintf(a.stderr, "warden: %s; the run as the store has it:\n", safe(e.(*control.Client).Err().Error()))
					}
				}
				if a.json {
					a.emitJSON(o)
				} else {
					fmt.Fprintf(a.stderr, "run %s %s in %s", o.Run.ID, o.Run.Status, o.Duration.Round(time.Millisecond))
					if o.Run.Error != "" {
						fmt.Fprintf(a.stderr, ": %s", safe(o.Run.Error))
					}
					fmt.Fprintln(a.stderr)
					if len(o.Run.Outputs) > 0 {
						fmt.Fprintf(a.stderr, "outputs %s\n", safe(string(o.Run.Outputs)))
					}
				}
				if !o.OK() {
					return &exitError{code: 1}
				}
				return nil
			})
		},
	}
	c.Flags().StringArrayVar(&inputs, "input", nil, "an input as NAME=VALUE (repeatable); typed by the manifest")
	c.Flags().StringVar(&jail, "jail", "", "auto (bwrap, else landlock; the default unless config.yaml's jail: says otherwise), bwrap (never fall back), landlock, or off; off runs the hook unjailed and every receipt says so")
	return c
}

// storedOutcome is the run's outcome as the store has it, when the
// engine this command was attached to went away before saying how the
// run ended: the run may well have ended, and been stored, before (a
// script must never retry work the store says was done). The data dir
// is taken over (a run found still running is closed as dead there) and
// let go of again.
func (a *app) storedOutcome(e engine.Facade, run string) (engine.Outcome, bool) {
	c, ok := e.(*control.Client)
	if !ok || !errors.Is(c.Err(), engine.ErrEngineGone) {
		return engine.Outcome{}, false
	}
	again, err := a.openEngine()
	if err != nil {
		return engine.Outcome{}, false
	}
	defer again.Close()
	rec, err := again.Run(run)
	if err != nil || rec.Ended == nil {
		return engine.Outcome{}, false
	}
	return engine.Outcome{Run: rec, Duration: rec.Ended.Sub(rec.Started)}, true
}

// parseInputFlags reads repeated --input NAME=VALUE flags; the values are
// typed later, by the hook's declared inputs.
func parseInputFlags(inputs []string) (map[string]string, error) {
	raw := map[string]string{}
	for _, kv := range inputs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usageError{fmt.Errorf("--input %q: want NAME=VALUE", kv)}
		}
		if _, dup := raw[k]; dup {
			return nil, usageError{fmt.Errorf("--input %s given twice", k)}
		}
		raw[k] = v
	}
	return raw, nil
}

// validJail: j is a jail mode a run may ask for ("" is the config's).
func validJail(j string) bool {
	return j == "" || j == engine.JailOff || engine.ValidJailMode(j)
}

// follow prints a run's lines from line from with write, reading storage
// (the truth) whenever events say there is more, until stop is closed and
// the stream is drained.
func (a *app) follow(e engine.Facade, sub *engine.Subscription, run string, from uint64, out io.Writer, writeLine func(*bufio.Writer, engine.Line), stop <-chan struct{}) {
	a.followAsking(e, sub, run, from, out, writeLine, stop, nil)
}

// followAsking is follow that also hands each request the run opens to
// asked (nil: none).
func (a *app) followAsking(e engine.Facade, sub *engine.Subscription, run string, from uint64, out io.Writer, writeLine func(*bufio.Writer, engine.Line), stop <-chan struct{}, asked func(engine.Request)) {
	w := bufio.NewWriterSize(out, 64<<10)
	defer w.Flush()
	next := from
	drain := func() {
		for {
			lines, err := e.StreamLines(run, next, 8192)
			if err != nil || len(lines) == 0 {
				return
			}
			for _, l := range lines {
				writeLine(w, l)
			}
			next = lines[len(lines)-1].N + 1
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-stop
		cancel()
	}()
	drain()
	w.Flush() // what the run said so far shows now, even if it says nothing more
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			drain()
			return
		}
		switch ev.Kind {
		case engine.EventLines:
			if ev.Lines.Run != run {
				continue
			}
			ls := ev.Lines.Lines
			if len(ls) > 0 && ls[0].N == next { // contiguous: no need to re-read
				for _, l := range ls {
					writeLine(w, l)
				}
				next = ls[len(ls)-1].N + 1
			} else {
				drain()
			}
		case engine.EventMissed:
			drain()
		case engine.EventRequest:
			if r := ev.Request; asked != nil && r != nil && r.Decision == nil && r.Requester.Run == run {
				asked(*r)
			}
		}
		if sub.Pending() == 0 {
			w.Flush()
		}
	}
}

// writeLine prints a stream line for a terminal: the hook's text escaped.
func writeLine(w *bufio.Writer, l engine.Line) {
	fmt.Fprintf(w, "%s %-7s %s\n", l.At.Local().Format("15:04:05.000"), l.Level, safe(l.Text))
}

// writeRawLine prints a stream line's text exactly as stored (valid UTF-8,
// the hook's bytes otherwise), for `hook logs --raw` into a pipe or file.
func writeRawLine(w *bufio.Writer, l engine.Line) {
	w.WriteString(l.Text)
	w.WriteByte('\n')
}

func (a *app) hookRunsCommand() *cobra.Command {
	var limit int
	var before string
	c := &cobra.Command{
		Use:   "runs [RUN]",
		Short: "List hook runs, newest first; with RUN, show that run and its outputs",
		Long: `Lists hook runs, newest first, --limit at a time (read from the store by
key range, so a long history costs no more than a short one). The next
page is --before the last RUN shown.

With a RUN, shows that one run: its status, times, exit, error, inputs
and the outputs its result carried (escaped for the terminal; --json
carries them exact). Its stream is ` + "`warden hook logs RUN`" + `.`,
		Example: `  warden hook runs
  warden hook runs --limit 200 --json
  warden hook runs --before 20261129T140932-3fa2c1
  warden hook runs 20261129T140932-3fa2c1`,
		Args: args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if len(argv) == 1 {
				if cmd.Flags().Changed("limit") || cmd.Flags().Changed("before") {
					return usageError{fmt.Errorf("--limit and --before page the list; with a RUN there is one run to show")}
				}
				if !engine.ValidRunID(argv[0]) {
					return usageError{fmt.Errorf("%q is not a run id (like 20261129T140932-3fa2c1; see `warden hook runs`)", argv[0])}
				}
				return a.withEngine(func(e engine.Facade) error { return a.showRun(e, argv[0]) })
			}
			if limit < 0 {
				return usageError{fmt.Errorf("--limit must be 0 (no limit) or more, got %d", limit)}
			}
			if before != "" && !engine.ValidRunID(before) {
				return usageError{fmt.Errorf("--before %q is not a run id (like 20261129T140932-3fa2c1; see `warden hook runs`)", before)}
			}
			return a.withEngine(func(e engine.Facade) error {
				rs, err := e.RunsBefore(before, limit)
				if err != nil {
					return err
				}
				if a.json {
					if rs == nil {
						rs = []engine.RunRecord{}
					}
					return a.emitJSON(rs)
				}
				if len(rs) == 0 {
					a.printf("no runs yet: start one with `warden hook run MODULE HOOK`\n")
					return nil
				}
				tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "RUN\tSTATUS\tMODULE/HOOK\tJAIL\tSTARTED\tDURATION\tERROR")
				for _, r := range rs {
					dur := "-"
					if r.Ended != nil {
						dur = r.Ended.Sub(r.Started).Round(time.Millisecond).String()
					}
					fmt.Fprintf(tw, "%s\t%s\t%s/%s\t%s\t%s\t%s\t%s\n", safe(r.ID), safe(r.Status), safe(r.Module), safe(r.Hook), safe(engine.JailName(r.JailMode)), r.Started.Local().Format("2006-01-02 15:04:05"), dur, oneLine(r.Error, 60))
				}
				if err := tw.Flush(); err != nil {
					return err
				}
				if limit > 0 && len(rs) == limit {
					a.printf("older: `warden hook runs --limit %d --before %s`\n", limit, rs[len(rs)-1].ID)
				}
				return nil
			})
		},
	}
	c.Flags().IntVar(&limit, "limit", 50, "at most this many (0 for all)")
	c.Flags().StringVar(&before, "before", "", "only runs older than this RUN (the next page)")
	return c
}

func (a *app) hookLogsCommand() *cobra.Command {
	var followFlag, raw bool
	c := &cobra.Command{
		Use:   "logs RUN",
		Short: "Replay a run's stream lines; --follow keeps printing while it runs",
		Long: `logs prints a run's stream lines with their time and level. The hook's text
is escaped for the terminal: a control character shows as its picture (ESC
as ␛, CR as ␍), so a hook cannot drive the operator's terminal.

--raw prints only the lines' text, exactly as stored, for a pipe or a file;
it refuses a terminal. --json carries the exact text too, JSON-escaped.`,
		Example: `  warden hook logs 20261129T140000-1a2b3c
  warden hook logs -f 20261129T140000-1a2b3c
  warden hook logs --raw 20261129T140000-1a2b3c > run.log`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			run := argv[0]
			write := writeLine
			if raw {
				if a.json {
					return usageError{errors.New("--raw and --json: choose one (--json carries the exact text too, JSON-escaped)")}
				}
				if isTerminal(a.stdout) {
					return usageError{errors.New("--raw prints the hook's bytes unescaped, and stdout is a terminal: redirect or pipe it (e.g. `warden hook logs --raw RUN > run.log`), or drop --raw to read the lines escaped")}
				}
				write = writeRawLine
			}
			return a.withEngine(func(e engine.Facade) error {
				rec, err := e.Run(run)
				if err != nil {
					if errors.Is(err, engine.ErrNotFound) {
						return fmt.Errorf("no run %q (see `warden hook runs`)", run)
					}
					return err
				}
				info, err := e.StreamInfo(run)
				if err != nil {
					return err
				}
				if a.json {
					lines, err := e.StreamLines(run, 0, 0)
					if err != nil {
						return err
					}
					type jl struct {
						N     uint64    `json:"n"`
						At    time.Time `json:"at"`
						Level string    `json:"level"`
						Text  string    `json:"text"`
					}
					out := make([]jl, len(lines))
					for i, l := range lines {
						out[i] = jl{l.N, l.At, l.Level.String(), l.Text}
					}
					return a.emitJSON(map[string]any{"run": rec, "dropped": info.Dropped, "lines": out})
				}
				if info.Dropped > 0 {
					// --raw keeps stdout to the hook's lines.
					w := a.stdout
					if raw {
						w = a.stderr
					}
					fmt.Fprintf(w, "… %d earlier lines were dropped (stream retention)\n", info.Dropped)
				}
				stop := make(chan struct{})
				if !followFlag || rec.Status != "running" {
					close(stop)
				}
				sub := e.Subscribe()
				defer sub.Close()
				if followFlag && rec.Status == "running" {
					go func() {
						for {
							r, err := e.Run(run)
							if err != nil || r.Status != "running" {
								close(stop)
								return
							}
							time.Sleep(200 * time.Millisecond)
						}
					}()
				}
				a.follow(e, sub, run, info.First, a.stdout, write, stop)
				return nil
			})
		},
	}
	c.Flags().BoolVarP(&followFlag, "follow", "f", false, "keep printing new lines until the run ends")
	c.Flags().BoolVar(&raw, "raw", false, "print only the lines' exact text, unescaped (refuses a terminal: pipe or redirect it)")
	return c
}

// openTTY returns the controlling terminal when stdin is one and this
// process is in its foreground; background says stdin is a terminal but
// this process is not in its foreground (`warden hook run … &`), where
// reading it would stop the process.
func openTTY(stdin io.Reader) (tty *os.File, background bool) {
	f, ok := stdin.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil, false
	}
	if !foreground(f) {
		return nil, true
	}
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return nil, false
	}
	if !foreground(tty) {
		tty.Close()
		return nil, true
	}
	return tty, false
}

// ttyConfirm asks operator.confirm questions at the terminal, one at a
// time. It reads the terminal only from the first question asked while
// this process is in the terminal's foreground: a run moved to the
// background before that (ctrl-z, bg) is not stopped by a read, and a
// question asked there goes to background (never the terminal).
func ttyConfirm(tty *os.File, prompt *openPrompt, background func(context.Context, string) (bool, error)) func(context.Context, string) (bool, error) {
	lines := make(chan string)
	var reading sync.Once
	read := func() {
		r := bufio.NewReader(tty)
		for {
			s, err := r.ReadString('\n')
			if err != nil {
				close(lines)
				return
			}
			lines <- strings.TrimSpace(s)
		}
	}
	return func(ctx context.Context, msg string) (bool, error) {
		if !foreground(tty) {
			return background(ctx, msg)
		}
		reading.Do(func() { go read() })
		// The message is the hook's: escaped, on lines of its own, so it
		// cannot clear the screen or overwrite the question with a CR.
		// The [y/N] is ours, on a line the hook's text cannot reach.
		var b strings.Builder
		b.WriteString("\n? the hook asks:\n")
		for _, l := range strings.Split(msg, "\n") {
			b.WriteString("  " + termsafe.String(l) + "\n")
		}
		prompt.ask(b.String() + "[y/N] ")
		select {
		case s, ok := <-lines:
			prompt.answered() // the operator's enter ended the line
			if !ok {
				return false, io.EOF
			}
			return strings.EqualFold(s, "y") || strings.EqualFold(s, "yes"), nil
		case <-ctx.Done():
			prompt.breakLine()
			fmt.Fprintln(tty, "(answered elsewhere)")
			return false, ctx.Err()
		}
	}
}

// openPrompt is the terminal's [y/N] line while it waits: the run's
// stream lines, and the note that the question was answered elsewhere
// (the console, `warden perms approve`), start on a line of their own
// instead of after "[y/N] ".
type openPrompt struct {
	mu   sync.Mutex
	tty  io.Writer
	open bool
}

func (p *openPrompt) ask(text string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	io.WriteString(p.tty, text)
	p.open = true
}

func (p *openPrompt) answered() {
	p.mu.Lock()
	p.open = false
	p.mu.Unlock()
}

// breakLine ends the [y/N] line if it is still open.
func (p *openPrompt) breakLine() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.open {
		io.WriteString(p.tty, "\n")
		p.open = false
	}
}

// breakPrompt writes the run's stream, ending an open [y/N] line first.
type breakPrompt struct {
	w io.Writer
	p *openPrompt
}

func (b breakPrompt) Write(s []byte) (int, error) {
	b.p.breakLine()
	return b.w.Write(s)
}

// checkInputs types the --input flags against the hook's declared inputs
// before anything starts: a missing, unknown or malformed input is the
// caller's mistake (a usage error, exit 2), as a bad flag is. An unknown
// module or hook is left to the engine, which names what there is.
func checkInputs(m *engine.Module, req engine.RunRequest) error {
	if m == nil || m.Manifest == nil {
		return nil
	}
	h, ok := m.Manifest.Hooks[req.Hook]
	if !ok {
		return nil
	}
	_, err := engine.RunInputs(h, req)
	return err
}

// startCatching starts the run with sigs already caught. The hook may be
// running before StartRun answers; a SIGTERM or SIGINT in that window,
// uncaught, would kill this process, and the run would be cancelled as a
// hang-up, not by the signal. Caught, such a signal cancels the run, for
// that signal, as soon as it has an id. A start that is slow to answer (it
// may wait on a permission request) does not hold the signal: after
// startGrace the signal takes its default course.
func startCatching(e engine.Facade, req engine.RunRequest, sigs chan os.Signal) (*engine.RunHandle, error) {
	type started struct {
		h   *engine.RunHandle
		err error
	}
	startc := make(chan started, 1)
	go func() {
		h, err := e.StartRun(engine.LocalActor(), req)
		startc <- started{h, err}
	}()
	select {
	case r := <-startc:
		return r.h, r.err
	case sig := <-sigs:
		noteStop()
		select {
		case r := <-startc:
			if r.err == nil {
				r.h.CancelFor(signalReason(sig))
			}
			return r.h, r.err
		case <-time.After(startGrace):
			signal.Reset(sig)
			if s, ok := sig.(syscall.Signal); ok {
				syscall.Kill(os.Getpid(), s)
			}
			return nil, fmt.Errorf("%s while the run was starting", sig)
		}
	}
}

// watchedRun is a run started by a foreground verb: its events, and the
// stop signals that cancel it.
type watchedRun struct {
	h    *engine.RunHandle
	sub  *engine.Subscription
	sigs chan os.Signal
}

// startWatched subscribes to e's events, catches the stop signals and
// starts req (startCatching); the run's id goes into runID for the
// questions it asks.
func startWatched(e engine.Facade, req engine.RunRequest, runID *atomic.Value) (*watchedRun, error) {
	w := &watchedRun{sub: e.Subscribe(), sigs: make(chan os.Signal, 1)}
	signal.Notify(w.sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	h, err := startCatching(e, req, w.sigs)
	if err != nil {
		w.close()
		return nil, err
	}
	runID.Store(h.ID)
	w.h = h
	return w, nil
}

// cancelOnSignal cancels the run on the first stop signal, for that
// signal (the record says what stopped it: Ctrl-C is the operator's; a
// SIGTERM from a timeout, kill or supervisor is not), then calls after.
func (w *watchedRun) cancelOnSignal(after func()) {
	go func() {
		select {
		case sig := <-w.sigs:
			noteStop()
			w.h.CancelFor(signalReason(sig))
			after()
		case <-w.h.Done():
		}
	}()
}

func (w *watchedRun) close() {
	signal.Stop(w.sigs)
	w.sub.Close()
}

// startGrace is how long a signal waits for a run's start to answer.
const startGrace = 2 * time.Second

// signalledVerb names this process in signalReason: the verb a signal
// to it stops (`warden run` sets its own).
var signalledVerb = "warden hook run"

// signalReason is the cancel reason recorded when `warden hook run` is
// stopped by sig.
func signalReason(sig os.Signal) string {
	if sig == syscall.SIGINT {
		return "" // Ctrl-C: the operator's own cancel
	}
	name := sig.String()
	if s, ok := sig.(syscall.Signal); ok {
		switch s {
		case syscall.SIGTERM:
			name = "SIGTERM"
		case syscall.SIGHUP: // the terminal closed, an ssh session dropped
			name = "SIGHUP"
		}
	}
	return fmt.Sprintf("cancelled by %s to %s (pid %d), not by an operator", name, signalledVerb, os.Getpid())
}

// showRun prints one run, its outputs included: a past run's outputs
// were only in --json before.
func (a *app) showRun(e engine.Facade, id string) error {
	r, err := e.Run(id)
	if err != nil {
		if errors.Is(err, engine.ErrNotFound) {
			return fmt.Errorf("no run %q (see `warden hook runs`)", id)
		}
		return err
	}
	if a.json {
		return a.emitJSON(r)
	}
	a.printf("run      %s\nstatus   %s\nhook     %s/%s\njail     %s\nstarted  %s\n", safe(r.ID), safe(r.Status), safe(r.Module), safe(r.Hook),
		safe(engine.JailName(r.JailMode)), r.Started.Local().Format("2006-01-02 15:04:05"))
	if r.Ended != nil {
		a.printf("ended    %s (%s)\n", r.Ended.Local().Format("2006-01-02 15:04:05"), r.Ended.Sub(r.Started).Round(time.Millisecond))
	}
	if r.Exit != nil {
		a.printf("exit     %d\n", *r.Exit)
	}
	if r.Error != "" {
		a.printf("error    %s\n", safe(r.Error))
	}
	if len(r.Inputs) > 0 && string(r.Inputs) != "null" && string(r.Inputs) != "{}" {
		a.printf("inputs   %s\n", safe(string(r.Inputs)))
	}
	var outs map[string]json.RawMessage
	if len(r.Outputs) > 0 && json.Unmarshal(r.Outputs, &outs) == nil && len(outs) > 0 {
		a.printf("outputs\n")
		keys := make([]string, 0, len(outs))
		for k := range outs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			a.printf("  %s = %s\n", safe(k), safe(string(outs[k])))
		}
	} else if len(r.Outputs) > 0 && string(r.Outputs) != "null" {
		a.printf("outputs  %s\n", safe(string(r.Outputs)))
	} else {
		a.printf("outputs  none (no result was sent)\n")
	}
	a.printf("stream   `warden hook logs %s`\n", safe(r.ID))
	return nil
}
