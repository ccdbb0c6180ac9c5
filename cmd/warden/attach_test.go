package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/teatest"

	"github.com/wardenhq/warden/cmd/serve/control"
	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/engine/hands/handstest"
	"github.com/wardenhq/warden/storage"
	"github.com/wardenhq/warden/themes"
	"github.com/wardenhq/warden/tui"
)

// wardenLink makes this test binary runnable as `warden` (TestMain runs
// the CLI when it is called that), so child processes are real warden
// processes without a separate build.
func wardenLink(t testing.TB, base string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(base, "bin", "warden")
	os.MkdirAll(filepath.Dir(bin), 0o755)
	if err := os.Symlink(self, bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// screen is everything a console under teatest has drawn; the renderer
// redraws only the lines that change, so waits look at what was drawn
// after a mark (mark 0: since the start).
type screen struct {
	t   *testing.T
	out lockedBuffer
}

func newScreen(t *testing.T, tm *teatest.TestModel) *screen {
	s := &screen{t: t}
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	go func() {
		// The output reader says EOF whenever it is empty: poll it.
		r, buf := tm.Output(), make([]byte, 64<<10)
		for {
			n, _ := r.Read(buf)
			s.out.Write(buf[:n])
			if n == 0 {
				select {
				case <-done:
					return
				case <-time.After(10 * time.Millisecond):
				}
			}
		}
	}()
	return s
}

// mark is a point to wait from: what is drawn after it.
func (s *screen) mark() int { return len(s.out.String()) }

// waitFrom waits until want is drawn after mark.
func (s *screen) waitFrom(mark int, want string) {
	s.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if out := s.out.String(); strings.Contains(out[mark:], want) {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the console did not draw %q within 15s; it drew:\n%s", want, s.out.String()[mark:])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestConsoleAndCLIsShareOneEngine is the operator's day with two
// terminals: the console holds the data dir; in the other terminal
// `warden hook run` starts hello/greet (its question goes to the console's
// Requests), and `warden perms approve 1` answers it. Each CLI is a
// separate process attached over the control socket; the console sees the
// request arrive and the decision land live, and the run ends well.
func TestConsoleAndCLIsShareOneEngine(t *testing.T) {
	c := newCLI(t)
	base := privateDir(t, "warden-attach-")
	bin := wardenLink(t, base)
	c.ok("module", "add", example(t, "hello"))

	a := &app{dataDir: c.dir, stdout: io.Discard, stderr: io.Discard}
	e, err := a.openEngine()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := e.(*servedEngine); !ok {
		t.Fatalf("the console attached to %T instead of holding the data dir", e)
	}
	defer e.Close()
	th, _ := themes.ByName("dark")
	m := tui.New(e, tui.Options{Theme: th, Bell: func() {}})
	defer m.Close()
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(160, 40))
	defer tm.Quit()
	scr := newScreen(t, tm)
	scr.waitFrom(0, "0 pending")
	mark := scr.mark()

	// Terminal 2: a hook run, attached.
	var runOut, runErr lockedBuffer
	run := exec.Command(bin, "--data-dir", c.dir, "hook", "run", "hello", "greet", "--input", "target=two", "--jail=off")
	run.Stdout, run.Stderr = &runOut, &runErr
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	defer run.Process.Kill()
	scr.waitFrom(mark, "1 pending")
	scr.waitFrom(mark, "request 1 · press 2 to answer · hello/greet")
	mark = scr.mark()

	// Terminal 3: the decision.
	out, err := exec.Command(bin, "--data-dir", c.dir, "perms", "approve", "1", "--reason", "from another terminal").CombinedOutput()
	if err != nil {
		t.Fatalf("perms approve from a second process: %v: %s", err, out)
	}
	if !strings.Contains(string(out), "approve") {
		t.Fatalf("perms approve said: %s", out)
	}
	scr.waitFrom(mark, "0 pending")
	tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("2")})
	scr.waitFrom(mark, "approve-once")

	if err := run.Wait(); err != nil {
		t.Fatalf("hook run: %v\nstdout %s\nstderr %s", err, runOut.String(), runErr.String())
	}
	if !strings.Contains(runErr.String(), "succeeded") || !strings.Contains(runOut.String(), "two") {
		t.Fatalf("hook run output:\nstdout %s\nstderr %s", runOut.String(), runErr.String())
	}
	// The decision is recorded as the operator at the other terminal.
	rs, err := e.Receipts(engine.ReceiptFilter{Kind: "request.decide"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].Actor != string(engine.LocalActor()) {
		t.Fatalf("decision receipts %+v", rs)
	}
}

// startServe starts `warden serve` on dir and waits until it serves; the
// test's end stops it (SIGTERM) if the test has not.
func startServe(t testing.TB, bin, dir string) *exec.Cmd {
	t.Helper()
	var out lockedBuffer
	srv := exec.Command(bin, "--data-dir", dir, "serve")
	srv.Stdout, srv.Stderr = &out, &out
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Process.Signal(syscall.SIGTERM)
		srv.Wait()
	})
	waitUntil(t, "serve", 10*time.Second, func() bool { return strings.Contains(out.String(), "serving data dir") }, out.String)
	return srv
}

// attachedConsole starts `warden serve` on c's data dir and a console (in
// this process, under teatest) attached to it.
func attachedConsole(t *testing.T, c *cli, bin string) (*exec.Cmd, *teatest.TestModel, *screen) {
	t.Helper()
	srv := startServe(t, bin, c.dir)

	a := &app{dataDir: c.dir, stdout: io.Discard, stderr: io.Discard}
	e, err := a.openEngine()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if _, ok := e.(*control.Client); !ok || attachedPID(e) != srv.Process.Pid {
		t.Fatalf("console engine %T attached to pid %d, want serve's %d", e, attachedPID(e), srv.Process.Pid)
	}
	th, _ := themes.ByName("dark")
	m := tui.New(e, tui.Options{Theme: th, Bell: func() {}, AttachedPID: attachedPID(e),
		Takeover: func() (engine.Facade, int, error) {
			e, err := a.openEngine()
			if err != nil {
				return nil, 0, err
			}
			return e, attachedPID(e), nil
		}})
	t.Cleanup(m.Close)
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(160, 40))
	t.Cleanup(func() { tm.Quit() })
	scr := newScreen(t, tm)
	scr.waitFrom(0, fmt.Sprintf("attached to pid %d", srv.Process.Pid))
	return srv, tm, scr
}

// TestConsoleTakesOver: a console attached to `warden serve` says so in
// its header; when the server dies (SIGKILL) the console says the engine
// went away, and t takes the data dir over: the console then holds it and
// serves the next CLI.
func TestConsoleTakesOver(t *testing.T) {
	c := newCLI(t)
	bin := wardenLink(t, privateDir(t, "warden-takeover-"))
	c.ok("trust", "status")
	srv, tm, scr := attachedConsole(t, c, bin)

	srv.Process.Signal(syscall.SIGKILL)
	srv.Wait()
	scr.waitFrom(0, fmt.Sprintf("ENGINE (pid %d) GONE", srv.Process.Pid))
	scr.waitFrom(0, "take over the data dir")
	mark := scr.mark()
	tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("t")})
	scr.waitFrom(mark, "took over the data dir")

	// The console holds the data dir now and serves the next CLI.
	if pid := storagePID(t, c.dir); pid != os.Getpid() {
		t.Fatalf("warden.pid says %d after the takeover, the console is %d", pid, os.Getpid())
	}
	out, err := exec.Command(bin, "--data-dir", c.dir, "trust", "status").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "agrees") {
		t.Fatalf("a CLI after the takeover: %v: %s", err, out)
	}
}

// TestConsoleCarriesOnWhenHolderLetsGo: when the process the console is
// attached to lets go of the data dir on purpose (a stopped serve, a
// `hook run` that finished), the console takes it over by itself; the
// operator is not asked.
func TestConsoleCarriesOnWhenHolderLetsGo(t *testing.T) {
	c := newCLI(t)
	bin := wardenLink(t, privateDir(t, "warden-handover-"))
	c.ok("trust", "status")
	srv, _, scr := attachedConsole(t, c, bin)

	mark := scr.mark()
	srv.Process.Signal(syscall.SIGTERM)
	if err := srv.Wait(); err != nil {
		t.Fatalf("serve after SIGTERM: %v", err)
	}
	scr.waitFrom(mark, "took over the data dir")
	if strings.Contains(scr.out.String()[mark:], "GONE") {
		t.Fatal("the console reported a crash for a clean hand-over")
	}
	if pid := storagePID(t, c.dir); pid != os.Getpid() {
		t.Fatalf("warden.pid says %d after the hand-over, the console is %d", pid, os.Getpid())
	}
}

// TestEveryVerbAttached runs each group of verbs while `warden serve`
// holds the data dir: every one attaches over the control socket and
// works as it does on its own (hands init's progress lines included), the
// changes are receipted as the local operator, and serve still holds the
// store at the end.
func TestEveryVerbAttached(t *testing.T) {
	sock := handstest.Docker(t)
	needBwrap(t)
	c := newCLI(t)
	base := privateDir(t, "warden-attached-")
	bin := wardenLink(t, base)
	hello := example(t, "hello")
	c.ok("trust", "status") // a data dir to serve

	srv := startServe(t, bin, c.dir)
	pid := srv.Process.Pid

	has := func(r result, want string) {
		t.Helper()
		if !strings.Contains(r.stdout+r.stderr, want) {
			t.Fatalf("want %q in:\n%s", want, r)
		}
	}
	has(c.ok("doctor"), fmt.Sprintf("held and served by warden pid %d", pid))
	has(c.ok("module", "add", hello), "hello")
	has(c.ok("module", "list"), "hello")
	has(c.ok("module", "show", "hello"), "greet")
	has(c.ok("hook", "plan", "hello", "greet"), "/module")

	var o engine.Outcome
	c.json(0, &o, "hook", "run", "hello", "greet", "--input", "target=attached")
	if !o.OK() || o.Run.JailMode != engine.JailBwrap {
		t.Fatalf("jailed hook run through serve: %+v", o.Run)
	}
	has(c.ok("hook", "runs"), o.Run.ID)
	has(c.ok("hook", "logs", o.Run.ID), "attached")

	has(c.runIn("tok-value\n", "secrets", "set", "hello", "visit_token"), "visit_token")
	has(c.ok("secrets", "list", "hello"), "visit_token")
	has(c.ok("secrets", "delete", "hello", "visit_token"), "visit_token")
	has(c.ok("config", "set", "hello", "greeting_word", "Howdy"), "set")
	if r := c.ok("config", "get", "hello", "greeting_word"); r.stdout != "Howdy\n" {
		t.Fatalf("config get: %s", r)
	}
	has(c.ok("config", "list", "hello"), "greeting_word=Howdy")
	has(c.ok("config", "delete", "hello", "greeting_word"), "greeting_word")

	var p engine.Policy
	c.json(0, &p, "perms", "policy", "show", "module:hello")
	has(c.ok("perms", "policy", "set", "module:hello", "--revision", fmt.Sprint(p.Revision), "--network", "false"), "module:hello")
	has(c.ok("perms", "list", "--all"), "operator.confirm")

	root := filepath.Join(handstest.Base(t, sock), "attached")
	has(c.ok("hands", "init", "--root", root, "--engine-socket", sock, "--image", handstest.Image, "--access", "files"), "✓ running")
	has(c.ok("hands", "status", "--root", root), "drift      none")
	has(c.ok("hands", "list"), root)
	has(c.ok("hands", "finish", "--root", root), "finished")

	has(c.ok("trust", "rotate"), "generation 2")
	has(c.ok("receipts", "show", "1"), "trust.init")
	has(c.ok("receipts", "verify"), "intact")

	var rs []engine.Receipt
	c.json(0, &rs, "receipts", "list", "--limit", "0")
	me := string(engine.LocalActor())
	for _, r := range rs {
		// Everything not done by the hook itself or the engine on its own
		// was asked for by this test's commands, through the socket.
		if !strings.HasPrefix(r.Actor, "run:") && r.Actor != "engine" && r.Actor != me {
			t.Errorf("receipt %d %s by %q, want %q", r.Seq, r.Kind, r.Actor, me)
		}
		if strings.Contains(r.Summary, "tok-value") || strings.Contains(string(r.Details), "tok-value") {
			t.Errorf("receipt %d holds the secret value", r.Seq)
		}
	}
	if got := storagePID(t, c.dir); got != pid {
		t.Fatalf("warden.pid says %d; serve (%d) should still hold the data dir", got, pid)
	}
}

// TestAttachedHookRunCtrlC: ctrl-c on a `warden hook run` attached to
// serve cancels the run in serve (receipted, its processes gone) and the
// command exits 1 saying so; serve keeps serving.
func TestAttachedHookRunCtrlC(t *testing.T) {
	c := newCLI(t)
	base := privateDir(t, "warden-attached-int-")
	bin := wardenLink(t, base)
	mod, marker := sleeperModule(t, base)
	c.ok("module", "add", mod)

	srv := startServe(t, bin, c.dir)

	var out, errb lockedBuffer
	run := exec.Command(bin, "--data-dir", c.dir, "hook", "run", "sleeper", "nap", "--jail=off")
	run.Stdout, run.Stderr = &out, &errb
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	defer run.Process.Kill()
	more := func() string { return "stdout:\n" + out.String() + "stderr:\n" + errb.String() }
	waitUntil(t, "the hook's first line", 10*time.Second, func() bool { return strings.Contains(out.String(), "napping") }, more)
	waitUntil(t, "the hook's sleep", 10*time.Second, func() bool { return len(procsWith(marker)) > 0 }, more)
	run.Process.Signal(syscall.SIGINT)
	err := run.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(errb.String(), "cancelled") {
		t.Fatalf("hook run after ctrl-c: %v\n%s", err, more())
	}
	waitUntil(t, "the hook's processes to go", 10*time.Second, func() bool { return len(procsWith(marker)) == 0 }, more)
	var runs []storage.RunRecord
	c.json(0, &runs, "hook", "runs")
	if len(runs) != 1 || runs[0].Status != storage.RunCancelled || runs[0].Error != "cancelled by the operator" {
		t.Fatalf("runs after ctrl-c: %+v", runs)
	}
	if srv.ProcessState != nil {
		t.Fatal("serve stopped")
	}
	has := c.ok("receipts", "list", "--kind", "hook.end")
	if !strings.Contains(has.stdout, "cancelled") {
		t.Fatalf("hook.end receipt: %s", has)
	}
}

// TestAttachedHookRunWhenServeStops: a `hook run` attached to a serve
// that is stopped on purpose (SIGTERM) says the engine stopped on
// purpose; one whose serve is killed says it went away. Only a real death
// reads as a crash.
func TestAttachedHookRunWhenServeStops(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sig     syscall.Signal
		want    string
		notWant string
	}{
		{"sigterm", syscall.SIGTERM, "the engine stopped on purpose", "crashed"},
		{"sighup", syscall.SIGHUP, "the engine stopped on purpose", "crashed"},
		{"sigkill", syscall.SIGKILL, "crashed or was killed", "on purpose"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCLI(t)
			base := privateDir(t, "warden-attached-stop-")
			bin := wardenLink(t, base)
			mod, marker := sleeperModule(t, base)
			c.ok("module", "add", mod)
			srv := startServe(t, bin, c.dir)

			var out, errb lockedBuffer
			run := exec.Command(bin, "--data-dir", c.dir, "hook", "run", "sleeper", "nap", "--jail=off")
			run.Stdout, run.Stderr = &out, &errb
			if err := run.Start(); err != nil {
				t.Fatal(err)
			}
			defer run.Process.Kill()
			more := func() string { return "stdout:\n" + out.String() + "stderr:\n" + errb.String() }
			waitUntil(t, "the hook's sleep", 10*time.Second, func() bool { return len(procsWith(marker)) > 0 }, more)

			srv.Process.Signal(tc.sig)
			srv.Wait()
			err := run.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Fatalf("hook run after its serve got %s: %v\n%s", tc.sig, err, more())
			}
			if !strings.Contains(errb.String(), tc.want) || strings.Contains(errb.String(), tc.notWant) {
				t.Fatalf("hook run after its serve got %s: want %q and not %q in:\n%s", tc.sig, tc.want, tc.notWant, more())
			}
			// The outcome printed is the stored one (serve's SIGTERM
			// stores the run cancelled; a killed serve's run is closed
			// as failed at the next open), never a made-up "failed in
			// 0s".
			id := strings.Fields(strings.TrimPrefix(errb.String(), "run "))[0]
			runs := c.ok("hook", "runs", "--json")
			stored := ""
			var list []struct{ ID, Status string }
			json.Unmarshal([]byte(runs.stdout), &list)
			for _, r := range list {
				if r.ID == id {
					stored = r.Status
				}
			}
			if stored == "" || !strings.Contains(errb.String(), "run "+id+" "+stored+" in ") || strings.Contains(errb.String(), " in 0s") {
				t.Errorf("the run is stored %q; the client said:\n%s\n(hook runs: %s)", stored, errb.String(), runs.stdout)
			}
		})
	}
}

// TestRunSIGTERMNotOperator (a short name: the run's socket path holds
// it): a `hook run` stopped by SIGTERM or SIGHUP (its terminal closed)
// (`timeout 5 warden hook run …`, a supervisor) records its run as
// cancelled by that signal, not "by the operator", whether the run is
// its own engine's or a serve's it is attached to (the reason crosses
// the control socket).
func TestRunSIGTERMNotOperator(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sig      syscall.Signal
		attached bool
	}{
		{"own", syscall.SIGTERM, false}, {"att", syscall.SIGTERM, true},
		{"hown", syscall.SIGHUP, false}, {"hatt", syscall.SIGHUP, true},
	} {
		attached := tc.attached
		t.Run(tc.name, func(t *testing.T) {
			c := newCLI(t)
			base := privateDir(t, "warden-sigterm-")
			bin := wardenLink(t, base)
			mod, marker := sleeperModule(t, base)
			c.ok("module", "add", mod)
			if attached {
				startServe(t, bin, c.dir)
			}
			var out, errb lockedBuffer
			run := exec.Command(bin, "--data-dir", c.dir, "hook", "run", "sleeper", "nap", "--jail=off")
			run.Stdout, run.Stderr = &out, &errb
			if err := run.Start(); err != nil {
				t.Fatal(err)
			}
			defer run.Process.Kill()
			more := func() string { return "stdout:\n" + out.String() + "stderr:\n" + errb.String() }
			waitUntil(t, "the hook's sleep", 10*time.Second, func() bool { return len(procsWith(marker)) > 0 }, more)
			run.Process.Signal(tc.sig)
			err := run.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Fatalf("hook run after %s: %v\n%s", tc.sig, err, more())
			}
			var runs []storage.RunRecord
			c.json(0, &runs, "hook", "runs")
			name := map[syscall.Signal]string{syscall.SIGTERM: "SIGTERM", syscall.SIGHUP: "SIGHUP"}[tc.sig]
			want := fmt.Sprintf("cancelled by %s to warden hook run (pid %d), not by an operator", name, run.Process.Pid)
			if len(runs) != 1 || runs[0].Status != storage.RunCancelled || runs[0].Error != want {
				t.Fatalf("runs after %s: %+v\nwant error %q", name, runs, want)
			}
			waitUntil(t, "the hook's processes to go", 10*time.Second, func() bool { return len(procsWith(marker)) == 0 }, more)
		})
	}
}
