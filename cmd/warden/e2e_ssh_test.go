package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wardenhq/warden/engine"
)

// TestSSHEndToEnd drives `warden serve --ssh` with the real OpenSSH client,
// each session in a terminal of a private tmux server, on a fresh data dir
// with the hello example registered. The operators file names an operator
// key (A), a malformed line and a viewer key (B). What operators see:
//
//   - the server log reports the malformed line by its number; A and B
//     still log in, each to a console of its own on the one engine;
//   - A runs hello/greet from Modules; its operator.confirm rings in both
//     consoles at once;
//   - `ssh -T` (no terminal) prints the one-screen status: the pending
//     request and the running hook, and exits 0;
//   - B, a viewer, presses y on the request: the console says a viewer may
//     watch but not decide, and the request stays pending;
//   - A presses y: both consoles show it decided, and the run succeeds;
//   - an unknown key C gets "Permission denied" (ssh exits 255);
//   - SIGTERM stops the server (exit 0), which first ends both sessions as
//     q would: each ssh exits 0 and leaves its terminal restored (no
//     alternate screen, no mouse reporting), saying "warden is shutting
//     down"; no process of the test is left;
//   - the receipts name A's key fingerprint as the decider (and as who
//     started the run) and B's on an access.refused.
func TestSSHEndToEnd(t *testing.T) {
	needTool(t, "tmux", "apt-get install tmux")
	needTool(t, "ssh", "apt-get install openssh-client")
	needTool(t, "ssh-keygen", "apt-get install openssh-client")
	needBwrap(t)

	// Everything lives in one private dir, whose random name also tells
	// this test's processes (serve, its hooks, ssh, tmux) from anyone else's.
	base := privateDir(t, "warden-e2e-ssh-")
	bin := filepath.Join(base, "bin", "warden")
	data := filepath.Join(base, "data")
	buildWarden(t, bin)
	hello := filepath.Join(base, "modules", "hello")
	os.MkdirAll(filepath.Dir(hello), 0o755)
	if out, err := exec.Command("cp", "-a", filepath.Join("..", "..", "examples", "modules", "hello"), hello).CombinedOutput(); err != nil {
		t.Fatalf("copy hello: %v: %s", err, out)
	}
	if out, err := exec.Command(bin, "--data-dir", data, "module", "add", hello).CombinedOutput(); err != nil {
		t.Fatalf("module add: %v: %s", err, out)
	}
	t.Cleanup(func() { killProcsWith(t, base) })

	// Three keys: A an operator, B a viewer, C unknown; between A and B a
	// malformed line.
	keyA, fpA := sshKeygen(t, base, "key-a")
	keyB, fpB := sshKeygen(t, base, "key-b")
	keyC, fpC := sshKeygen(t, base, "key-c")
	operators := filepath.Join(base, "operators")
	pub := func(key string) string {
		b, err := os.ReadFile(key + ".pub")
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	body := "operator " + pub(keyA) + "\noperator not-a-key\nviewer " + pub(keyB) + "\n"
	if err := os.WriteFile(operators, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}

	// The server, headless, on a free loopback port, its log in a file
	// (shown when a wait fails). It reports the malformed line by number.
	port := freePort(t)
	addr := net.JoinHostPort("127.0.0.1", port)
	serveLog := filepath.Join(base, "serve.log")
	logFile, err := os.Create(serveLog)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	var stdout lockedBuffer
	serve := exec.Command(bin, "--data-dir", data, "serve", "--ssh", addr, "--operators", operators)
	serve.Stdout, serve.Stderr = &stdout, logFile
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- serve.Wait() }()
	t.Cleanup(func() { serve.Process.Kill() })
	logText := func() string { b, _ := os.ReadFile(serveLog); return string(b) }
	output := func() string { return "serve stdout:\n" + stdout.String() + "serve log:\n" + logText() }
	waitUntil(t, "serving", 10*time.Second, func() bool { return strings.Contains(stdout.String(), "serving data dir "+data) }, output)
	waitUntil(t, "the SSH port accepting", 10*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	}, output)
	if !regexp.MustCompile(`warden ssh: .* host key SHA256:\S+ \(`).MatchString(logText()) {
		t.Errorf("the server log does not name the host key's fingerprint:\n%s", logText())
	}
	if !regexp.MustCompile(`operators file \S+: line 2: .*\(skipped\)`).MatchString(logText()) {
		t.Errorf("the server log does not report the malformed line 2:\n%s", logText())
	}

	// A and B each open a console with `ssh -t`, side by side in one
	// tmux server.
	opCon := startSSHConsole(t, base, "operator", serveLog, sshArgs(keyA, port, "-t")...)
	vwCon := startSSHConsole(t, base, "viewer", serveLog, sshArgs(keyB, port, "-t")...)
	opCon.waitFor(t, "1 Streams", 10*time.Second)
	vwCon.waitFor(t, "1 Streams", 10*time.Second)

	// A runs hello/greet from the console's Modules tab, typing its target
	// input into the form.
	opCon.keys(t, "4")
	opCon.waitRe(t, `▸\s+greet\s+inputs target:string`, 10*time.Second)
	opCon.keys(t, "Enter")
	opCon.waitFor(t, "target (string)", 10*time.Second)
	opCon.text(t, "ssh")
	opCon.keys(t, "Enter")
	opCon.waitFor(t, "hello/greet · running", 10*time.Second)

	// Its operator.confirm rings in both consoles at once (the toast lasts
	// 8s); in Requests both show the question.
	opCon.waitFor(t, "request 1 · press 2 to answer · hello/greet", 30*time.Second)
	vwCon.waitFor(t, "request 1 · press 2 to see · hello/greet", 10*time.Second)
	for _, con := range []*tmuxConsole{opCon, vwCon} {
		con.keys(t, "2")
		con.waitFor(t, "operator.confirm: Greet ssh?", 10*time.Second)
		con.waitFor(t, "Requests · 1 pending · 0 decided", 10*time.Second)
	}
	// The header says who each is (the key's comment and role); the
	// viewer is offered no decision keys.
	opCon.waitFor(t, "warden │ key-a · operator │", 10*time.Second)
	vwCon.waitFor(t, "warden │ key-b · viewer │", 10*time.Second)
	if s := vwCon.capture(t); strings.Contains(s, "approve once") || strings.Contains(s, "n deny") {
		t.Errorf("the viewer is offered decision keys:\n%s", s)
	}

	// Without a terminal, ssh (key A) gets the one-screen status: the
	// pending request and the running hook, started by A; exit 0.
	status, err := runSSH(t, sshArgs(keyA, port, "-T")...)
	if err != nil {
		t.Fatalf("ssh -T: %v\n%s\n%s", err, status, output())
	}
	for _, re := range []string{
		`(?m)^Pending requests: 1$`,
		`(?m)^\s+#1\s+operator\.confirm\s+hello/greet run \S+$`,
		`(?m)^Running hooks: 1$`,
		`(?m)^\s+hello/greet run \S+ by ` + regexp.QuoteMeta("ssh:"+fpA) + ` since `,
	} {
		if !regexp.MustCompile(re).MatchString(status) {
			t.Errorf("ssh -T status does not match /%s/:\n%s", re, status)
		}
	}

	// `ssh host VERB` runs a read-only verb with the key's role: B, a
	// viewer, lists the pending request; a verb that would change
	// anything is refused with a usage line and exit status 2.
	perms, err := runSSH(t, append(sshArgs(keyB, port, "-T"), "perms", "list")...)
	if err != nil || !regexp.MustCompile(`(?m)^#1\s+pending\s+module:hello\s+hello/greet `).MatchString(perms) {
		t.Errorf("ssh host perms list (viewer): %v:\n%s\n%s", err, perms, output())
	}
	if runs, err := runSSH(t, append(sshArgs(keyB, port, "-T"), "hook", "runs")...); err != nil || !strings.Contains(runs, "hello/greet") {
		t.Errorf("ssh host hook runs: %v:\n%s", err, runs)
	}
	refused, err := runSSH(t, append(sshArgs(keyB, port, "-T"), "perms", "approve", "1")...)
	if !errors.As(err, new(*exec.ExitError)) || err.(*exec.ExitError).ExitCode() != 2 || !strings.Contains(refused, "usage: ssh HOST [perms list") {
		t.Errorf("ssh host perms approve 1: %v, want exit 2 and the usage line:\n%s", err, refused)
	}

	// B, a viewer, presses y: the engine refuses it and the console says
	// so; a while later the request is still pending in both consoles.
	vwCon.keys(t, "y")
	vwCon.waitRe(t, `viewer ssh:`+regexp.QuoteMeta(fpB)+` may watch but not approve request 1: ask an operator`, 10*time.Second)
	time.Sleep(500 * time.Millisecond)
	for _, con := range []*tmuxConsole{opCon, vwCon} {
		con.waitFor(t, "Requests · 1 pending · 0 decided", 10*time.Second)
	}

	// A approves once: both consoles show it decided; the run succeeds.
	opCon.keys(t, "y")
	for _, con := range []*tmuxConsole{opCon, vwCon} {
		con.waitRe(t, `#1\s+approve-once`, 10*time.Second)
		// The actor: the key's comment next to its short fingerprint.
		con.waitFor(t, "by key-a (ssh:"+fpA[:13]+"…"+fpA[len(fpA)-4:]+")", 10*time.Second)
		con.waitFor(t, "Requests · 0 pending · 1 decided", 10*time.Second)
	}
	opCon.keys(t, "1")
	opCon.waitFor(t, "hello/greet · succeeded", 30*time.Second)
	opCon.waitFor(t, "Hello, ssh!", 10*time.Second)

	// The SSH console follows its terminal's size (window-change
	// requests): 120x40, then 80x24, each time redrawn to fit, the help
	// line on the last row.
	for _, size := range [][2]int{{120, 40}, {80, 24}} {
		opCon.resize(t, size[0], size[1])
		opCon.waitSized(t, size[0], size[1], 10*time.Second)
	}

	// :theme picks a theme, remembered for the key (the next session
	// starts with it).
	opCon.keys(t, ":")
	opCon.text(t, "theme light")
	opCon.keys(t, "Enter")
	opCon.waitFor(t, "theme light", 10*time.Second)
	waitUntil(t, "the key's theme to be remembered", 10*time.Second, func() bool {
		b, _ := os.ReadFile(filepath.Join(data, "ssh_themes.json"))
		return strings.Contains(string(b), `"ssh:`+fpA+`": "light"`)
	}, output)

	// c over SSH: the OSC 52 goes down the session to the client's
	// terminal, here a tmux pane (TERM screen, tmux's default). tmux at
	// its defaults drops it, and the status line says which setting lets
	// it through; with that setting, it arrives in tmux's paste buffer.
	opCon.keys(t, "4")
	opCon.waitRe(t, `▸\s+greet`, 10*time.Second)
	opCon.keys(t, "c")
	opCon.waitFor(t, "copied module/hook (11 bytes) · tmux needs `set -s set-clipboard on`", 10*time.Second)
	if out, err := opCon.tmux("show-buffer"); err == nil {
		t.Errorf("tmux at its defaults kept %q from the session's OSC 52", out)
	}
	if out, err := opCon.tmux("set", "-s", "set-clipboard", "on"); err != nil {
		t.Fatalf("set-clipboard on: %v: %s", err, out)
	}
	opCon.keys(t, "c")
	waitUntil(t, "the copy to reach tmux's buffer", 10*time.Second, func() bool {
		out, err := opCon.tmux("show-buffer")
		return err == nil && string(out) == "hello greet"
	}, output)

	// An unknown key is refused at authentication, and the log names it.
	out, err := runSSH(t, sshArgs(keyC, port, "-T")...)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 255 || !strings.Contains(out, "Permission denied") {
		t.Errorf("ssh with an unknown key: %v, want exit 255 and Permission denied:\n%s", err, out)
	}
	waitUntil(t, "the log to name the refused key", 10*time.Second,
		func() bool { return strings.Contains(logText(), "refused key "+fpC) }, output)

	// SIGTERM: serve exits 0, having ended both sessions first: each ssh
	// exits 0 and its terminal is back out of the alternate screen with
	// mouse reporting off, showing why (the panes stay, dead, to be
	// looked at). Then, the tmux server killed, nothing of this test is
	// left running (serve, hooks, ssh and tmux all name base on their
	// command lines).
	if len(procsWith(base)) < 3 {
		t.Fatalf("before SIGTERM only %q run: the check after it would prove little", procsWith(base))
	}
	for _, con := range []*tmuxConsole{opCon, vwCon} {
		if st := con.paneState(t); st["alternate_on"] != "1" || st["mouse_any_flag"] != "1" {
			t.Fatalf("%s before SIGTERM: %v, want the alternate screen and mouse reporting on", con.session, st)
		}
	}
	sigterm := time.Now()
	if err := serve.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("serve exited %v after SIGTERM\n%s", err, output())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("serve still running 15s after SIGTERM\n%s", output())
	}
	t.Logf("serve stopped %s after SIGTERM", time.Since(sigterm).Round(time.Millisecond))
	for _, con := range []*tmuxConsole{opCon, vwCon} {
		var st map[string]string
		var screen []byte
		// ssh runs under a shell that prints its exit status and stays:
		// tmux 3.3a was seen leaving an exited ssh unreaped (a zombie,
		// pane dead, no status) for good, so its status is not asked of
		// tmux.
		waitUntil(t, con.session+"'s ssh to exit", 10*time.Second,
			func() bool {
				screen, _ = con.tmux("capture-pane", "-p", "-S", "-", "-t", con.session)
				st = con.paneState(t)
				return sshExited.Match(screen)
			},
			func() string { return fmt.Sprintf("pane %v, screen:\n%s\n%s", st, screen, output()) })
		status := string(sshExited.FindSubmatch(screen)[1])
		if status != "0" || st["alternate_on"] != "0" || st["mouse_any_flag"] != "0" || !strings.Contains(string(screen), "warden is shutting down") {
			t.Errorf("%s after SIGTERM: ssh exited %s, %v; want ssh's exit status 0, the alternate screen and mouse reporting off, and the reason shown; screen:\n%s",
				con.session, status, st, screen)
		}
	}
	opCon.tmux("kill-server")
	waitUntil(t, "every process of the test to exit", 10*time.Second,
		func() bool { return len(procsWith(base)) == 0 },
		func() string { return fmt.Sprintf("left: %q\n%s", procsWith(base), output()) })

	// The receipts, read with the CLI now that the store is free: A started
	// the run and decided the request; B's approve was refused.
	var rs []engine.Receipt
	list, err := exec.Command(bin, "--data-dir", data, "receipts", "list", "--limit", "0", "--json").Output()
	if err != nil {
		if errors.As(err, &ee) {
			t.Fatalf("receipts list: %v: %s", err, ee.Stderr)
		}
		t.Fatalf("receipts list: %v", err)
	}
	if err := json.Unmarshal(list, &rs); err != nil {
		t.Fatalf("receipts list --json: %v:\n%s", err, list)
	}
	find := func(kind, actor, subject string) bool {
		for _, r := range rs {
			if r.Kind == kind && r.Actor == actor && strings.Contains(r.Subject+" "+r.Summary, subject) {
				return true
			}
		}
		return false
	}
	for _, want := range []struct{ kind, actor, subject string }{
		{"hook.start", "ssh:" + fpA, "hello/greet"},
		{"request.decide", "ssh:" + fpA, "approve-once"},
		{"access.refused", "ssh:" + fpB, "approve request 1"},
	} {
		if !find(want.kind, want.actor, want.subject) {
			t.Errorf("no %s receipt by %s about %q in:\n%s", want.kind, want.actor, want.subject, list)
		}
	}
	if out, err := exec.Command(bin, "--data-dir", data, "receipts", "verify").CombinedOutput(); err != nil {
		t.Errorf("receipts verify: %v: %s", err, out)
	}
}

// sshKeygen makes an ed25519 key pair without a passphrase in dir and
// returns the private key's path and its SHA256 fingerprint.
func sshKeygen(t *testing.T, dir, name string) (path, fingerprint string) {
	t.Helper()
	path = filepath.Join(dir, name)
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", path).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v: %s", err, out)
	}
	out, err := exec.Command("ssh-keygen", "-l", "-E", "sha256", "-f", path+".pub").Output()
	if err != nil {
		t.Fatalf("ssh-keygen -l: %v", err)
	}
	// "256 SHA256:... name (ED25519)"
	f := strings.Fields(string(out))
	if len(f) < 2 || !strings.HasPrefix(f[1], "SHA256:") {
		t.Fatalf("ssh-keygen -l: %q", out)
	}
	return path, f[1]
}

// sshArgs are the ssh arguments to log in to 127.0.0.1:port with key only,
// ignoring the user's config, agent and known hosts; mode is -t or -T.
func sshArgs(key, port, mode string) []string {
	return []string{"-F", "/dev/null", "-i", key, "-p", port,
		"-o", "IdentitiesOnly=yes", "-o", "IdentityAgent=none", "-o", "BatchMode=yes",
		"-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
		"-o", "ConnectTimeout=10", mode, "127.0.0.1"}
}

// runSSH runs ssh without a terminal and returns its output (stdout and
// stderr); it gives up after 20s.
func runSSH(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("ssh", args...)
	cmd.Stdin = nil
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.String(), err
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("ssh %s still running after 20s:\n%s", strings.Join(args, " "), out.String())
		return "", nil
	}
}

// startSSHConsole runs `ssh args...` in a 200x50 session named name of
// the tmux server at base/tmux.sock (started by the first call; cleanup
// kills it). Failed waits show the server log.
func startSSHConsole(t *testing.T, base, name, serveLog string, args ...string) *tmuxConsole {
	t.Helper()
	tm := &tmuxConsole{sock: filepath.Join(base, "tmux.sock"), session: name, stderr: serveLog}
	if _, err := os.Stat(tm.sock); err != nil {
		t.Cleanup(func() { exec.Command("tmux", "-S", tm.sock, "kill-server").Run() })
	}
	// The shell says how ssh ended and stays, with the terminal's state
	// at the end; remain-on-exit keeps the pane should the shell go too.
	command := shellQuote(append([]string{"ssh"}, args...)...) + `; echo "[ssh exited $?]"; exec sleep 3600`
	// remain-on-exit: when ssh exits its pane stays, with its exit status
	// and the terminal's state at the end.
	if out, err := tm.tmux("new-session", "-d", "-s", name, "-x", "200", "-y", "50", command, ";",
		"set-option", "-w", "-t", name, "remain-on-exit", "on"); err != nil {
		t.Fatalf("tmux new-session: %v: %s", err, out)
	}
	return tm
}

// paneState is what tmux knows of the console's pane: whether its process
// has exited and with what status, and whether the terminal is in the
// alternate screen and reports the mouse.
// sshExited is the line the shell around ssh prints when ssh ends.
var sshExited = regexp.MustCompile(`\[ssh exited (\d+)\]`)

func (tm *tmuxConsole) paneState(t *testing.T) map[string]string {
	t.Helper()
	keys := []string{"pane_dead", "pane_dead_status", "alternate_on", "mouse_any_flag"}
	var format []string
	for _, k := range keys {
		format = append(format, "#{"+k+"}")
	}
	out, err := tm.tmux("display-message", "-p", "-t", tm.session, strings.Join(format, ","))
	if err != nil {
		t.Fatalf("tmux display-message: %v: %s", err, out)
	}
	vals := strings.Split(strings.TrimSpace(string(out)), ",")
	st := map[string]string{}
	for i, k := range keys {
		if i < len(vals) {
			st[k] = vals[i]
		}
	}
	return st
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// killProcsWith kills, by pid, every process whose command line contains
// marker.
func killProcsWith(t *testing.T, marker string) {
	for _, p := range procsWith(marker) {
		pid, _, _ := strings.Cut(p, ":")
		t.Logf("killing a leftover process: %s", p)
		exec.Command("kill", "-9", pid).Run()
	}
}
