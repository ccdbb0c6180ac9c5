package main

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
)

// ptyShell runs a shell script on a new pseudo-terminal (its controlling
// terminal, the shell its session leader and foreground) that never
// answers a query, and returns what the terminal was sent so far.
func ptyShell(t *testing.T, script string) (out func() string, done <-chan error) {
	t.Helper()
	cmd := exec.Command("bash", "-c", script)
	cmd.Env = append(os.Environ(), "TERM=xterm-256color") // termenv skips dumb, screen and tmux
	tty, err := pty.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var buf bytes.Buffer
	read := make(chan struct{})
	go func() {
		defer close(read)
		b := make([]byte, 4096)
		for {
			n, err := tty.Read(b)
			mu.Lock()
			buf.Write(b[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	ch := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		select { // what the shell wrote last, read (EIO once it is gone)
		case <-read:
		case <-time.After(5 * time.Second):
		}
		ch <- err
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		tty.Close()
	})
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.ReplaceAll(buf.String(), "\r\n", "\n")
	}, ch
}

// A verb on a terminal that never answers a query: no OSC 11 or cursor
// position query reaches it, and the verb does not wait for an answer
// (a package init that queries it, as Bubble Tea's can, would make every
// verb wait 5 s).
func TestVerbsNeverQueryTheTerminal(t *testing.T) {
	c := newCLI(t)
	bin := wardenLink(t, privateDir(t, "warden-query-"))
	start := time.Now()
	out, done := ptyShell(t, bin+" --data-dir "+c.dir+" perms list; echo verb-exit=$?")
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("perms list did not end:\n%q", out())
	}
	took := time.Since(start)
	got := out()
	if !strings.Contains(got, "verb-exit=0") {
		t.Fatalf("perms list failed:\n%q", got)
	}
	if strings.Contains(got, "\x1b]11;?") || strings.Contains(got, "\x1b[6n") {
		t.Errorf("a verb queried the terminal:\n%q", got)
	}
	if took > 3*time.Second {
		t.Errorf("perms list took %s on a terminal that does not answer", took)
	}
}

// `warden hook run … &` from a job-control shell: the run is in a
// background process group of the terminal. It neither stops (a terminal
// read from there stops it with SIGTTIN until fg) nor shows a [y/N]: it says
// which request waits, and `warden perms approve ID` from elsewhere
// answers it; the hook then takes its yes branch.
func TestHookRunInBackgroundNeverStops(t *testing.T) {
	c := newCLI(t)
	base := privateDir(t, "warden-bg-")
	bin := wardenLink(t, base)
	c.ok("module", "add", mcpModule(t, base, "vault", "store", "    timeout: 1m\n",
		`if warden hook confirm "Store it?"; then warden hook log "branch: stored"; else warden hook log "branch: not stored ($?)"; fi
`))
	out, done := ptyShell(t, "set -m; "+bin+" --data-dir "+c.dir+" hook run vault store --jail=off & pid=$!; wait $pid; echo run-exit=$?; jobs -l; sleep 0.2")
	re := regexp.MustCompile(`\? the hook asks \(request (\d+)\):`)
	var id string
	waitUntil(t, "the background run's note on its request", 20*time.Second, func() bool {
		if m := re.FindStringSubmatch(out()); m != nil {
			id = m[1]
			return true
		}
		return false
	}, out)
	got := out()
	if strings.Contains(got, "[y/N]") {
		t.Errorf("a background run prompted:\n%s", got)
	}
	if !strings.Contains(got, "this run is in the background of its terminal, so it asks nothing here") || !strings.Contains(got, "warden perms approve "+id) {
		t.Errorf("the note does not say where the request waits:\n%s", got)
	}
	if b, err := exec.Command(bin, "--data-dir", c.dir, "perms", "approve", id).CombinedOutput(); err != nil {
		t.Fatalf("perms approve %s: %v %s", id, err, b)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the shell did not end:\n%s", out())
	}
	got = out()
	if !strings.Contains(got, "branch: stored") || !strings.Contains(got, "run-exit=0") || strings.Contains(got, "Stopped") {
		t.Errorf("the approved background run did not end well:\n%s", got)
	}
}

// Started in the foreground, then stopped (as ctrl-z does) and sent to
// the background with bg before the hook asks: the question is not read
// at the terminal (a read there stopped the job again, "Stopped (tty
// input)"), and the request waits for `warden perms approve ID`.
func TestHookRunMovedToBackgroundNeverStops(t *testing.T) {
	c := newCLI(t)
	base := privateDir(t, "warden-bg2-")
	bin := wardenLink(t, base)
	pidFile := base + "/warden.pid"
	c.ok("module", "add", mcpModule(t, base, "vault", "store", "    timeout: 1m\n",
		`kill -TSTP "$(cat `+pidFile+`)"; sleep 1
if warden hook confirm "Store it?"; then warden hook log "branch: stored"; else warden hook log "branch: not stored ($?)"; fi
`))
	// The hook stops the warden that runs it, as ctrl-z would: the shell
	// gets the terminal back, and bg resumes the job in the background.
	script := "set -m; " +
		"(echo $BASHPID > " + pidFile + "; exec " + bin + " --data-dir " + c.dir + " hook run vault store --jail=off); echo fg-status=$?; bg; wait; echo run-exit=$?; sleep 0.2"
	out, done := ptyShell(t, script)
	re := regexp.MustCompile(`\? the hook asks \(request (\d+)\):`)
	var id string
	waitUntil(t, "the note on the request of a run sent to the background", 20*time.Second, func() bool {
		if m := re.FindStringSubmatch(out()); m != nil {
			id = m[1]
			return true
		}
		return false
	}, out)
	if got := out(); strings.Contains(got, "[y/N]") || !strings.Contains(got, "fg-status=148") {
		t.Errorf("the run was not stopped and sent to the background as ctrl-z and bg do, or it prompted:\n%s", got)
	}
	if b, err := exec.Command(bin, "--data-dir", c.dir, "perms", "approve", id).CombinedOutput(); err != nil {
		t.Fatalf("perms approve %s: %v %s", id, err, b)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the shell did not end:\n%s", out())
	}
	if got := out(); !strings.Contains(got, "branch: stored") || !strings.Contains(got, "run-exit=0") {
		t.Errorf("the approved run did not end well:\n%s", got)
	}
}

// A foreground run's [y/N] answered elsewhere (`warden perms approve`,
// or the console): the stream lines that follow, and the note, start on
// lines of their own, not run on after "[y/N] ", which ends no line.
func TestPromptAnsweredElsewhere(t *testing.T) {
	c := newCLI(t)
	base := privateDir(t, "warden-fgprompt-")
	bin := wardenLink(t, base)
	c.ok("module", "add", mcpModule(t, base, "vault", "store", "    timeout: 1m\n",
		`if warden hook confirm "Store it?"; then warden hook log "branch: stored"; fi
`))
	out, done := ptyShell(t, bin+" --data-dir "+c.dir+" hook run vault store --jail=off; echo run-exit=$?")
	waitUntil(t, "the [y/N] prompt", 20*time.Second, func() bool { return strings.Contains(out(), "[y/N] ") }, out)
	if b, err := exec.Command(bin, "--data-dir", c.dir, "perms", "approve", "1").CombinedOutput(); err != nil {
		t.Fatalf("perms approve 1: %v %s", err, b)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the run did not end:\n%s", out())
	}
	got := out()
	if !strings.Contains(got, "branch: stored") || !strings.Contains(got, "run-exit=0") || !strings.Contains(got, "\n(answered elsewhere)\n") {
		t.Fatalf("the approved run did not end well:\n%s", got)
	}
	if regexp.MustCompile(`\[y/N\] [^\n]`).MatchString(got) {
		t.Errorf("text ran on after the [y/N] prompt:\n%s", got)
	}
}

// TestPromptAnsweredElsewhereAttached: the same, with `warden serve`
// holding the data dir (the usual case with a console open): the prompt
// closes when the answer arrives, and its note comes then, before the
// lines the hook writes after the answer, not together at the run's end.
func TestPromptAnsweredElsewhereAttached(t *testing.T) {
	c := newCLI(t)
	base := privateDir(t, "warden-fgprompt-att-")
	bin := wardenLink(t, base)
	c.ok("module", "add", mcpModule(t, base, "vault", "store", "    timeout: 1m\n",
		`if warden hook confirm "Store it?"; then warden hook log "branch: stored"; fi; sleep 2; warden hook log "later"
`))
	startServe(t, bin, c.dir)
	out, done := ptyShell(t, bin+" --data-dir "+c.dir+" hook run vault store --jail=off; echo run-exit=$?")
	waitUntil(t, "the [y/N] prompt", 20*time.Second, func() bool { return strings.Contains(out(), "[y/N] ") }, out)
	if b, err := exec.Command(bin, "--data-dir", c.dir, "perms", "approve", "1").CombinedOutput(); err != nil {
		t.Fatalf("perms approve 1: %v %s", err, b)
	}
	waitUntil(t, "the note, while the run goes on", 10*time.Second, func() bool { return strings.Contains(out(), "(answered elsewhere)") }, out)
	if strings.Contains(out(), "later") || strings.Contains(out(), "run-exit=") {
		t.Errorf("the note came only at the run's end:\n%s", out())
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the run did not end:\n%s", out())
	}
	if got := out(); !strings.Contains(got, "branch: stored") || !strings.Contains(got, "run-exit=0") {
		t.Errorf("the approved run did not end well:\n%s", got)
	}
}
