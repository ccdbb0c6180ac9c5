package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
	gossh "golang.org/x/crypto/ssh"

	"github.com/wardenhq/warden/cmd/serve/sshconsole"
	"github.com/wardenhq/warden/engine"
)

func sshTestKey(t *testing.T) (gossh.Signer, string) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := gossh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s, strings.TrimSpace(string(gossh.MarshalAuthorizedKey(s.PublicKey())))
}

type sshFixture struct {
	e        *engine.Engine
	srv      *sshconsole.Server
	log      *lockedBuffer
	hostKey  gossh.PublicKey
	operator gossh.Signer
	viewer   gossh.Signer
	stranger gossh.Signer
	opsPath  string
}

func newSSHFixture(t *testing.T, cfg sshconsole.Config) *sshFixture {
	t.Helper()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	e, err := engine.Open(engine.Options{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	f := &sshFixture{e: e, log: &lockedBuffer{}}
	var op, vw string
	f.operator, op = sshTestKey(t)
	f.viewer, vw = sshTestKey(t)
	f.stranger, _ = sshTestKey(t)
	f.opsPath = filepath.Join(dir, "operators")
	body := "operator " + op + " alice\n" +
		"operator ssh-ed25519 AAAAnot-base64!! broken\n" +
		"viewer " + vw + " bob\n"
	if err := os.WriteFile(f.opsPath, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.Addr, cfg.Operators, cfg.Log = "127.0.0.1:0", f.opsPath, f.log
	ctx, cancel := context.WithCancel(context.Background())
	f.srv, err = sshconsole.Start(ctx, e, cfg)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); f.srv.Close() })
	pemData, err := os.ReadFile(filepath.Join(data, sshconsole.HostKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	hk, err := gossh.ParsePrivateKey(pemData)
	if err != nil {
		t.Fatal(err)
	}
	f.hostKey = hk.PublicKey()
	return f
}

func (f *sshFixture) dial(signer gossh.Signer) (*gossh.Client, error) {
	return sshDial(f.srv.Addr(), f.hostKey, signer)
}

func sshDial(addr string, hostKey gossh.PublicKey, signer gossh.Signer) (*gossh.Client, error) {
	return gossh.Dial("tcp", addr, &gossh.ClientConfig{
		User:            "warden",
		Auth:            []gossh.AuthMethod{gossh.PublicKeys(signer)},
		HostKeyCallback: gossh.FixedHostKey(hostKey),
		Timeout:         10 * time.Second,
	})
}

// sshConsole is a PTY session showing the console.
type sshConsole struct {
	client *gossh.Client
	sess   *gossh.Session
	in     io.WriteCloser
	screen *lockedBuffer
	done   chan struct{} // closed when the session has ended
	err    error         // then: how it ended (nil: exit status 0)
}

func (f *sshFixture) console(t *testing.T, signer gossh.Signer) *sshConsole {
	t.Helper()
	return openSSHConsole(t, f.srv.Addr(), f.hostKey, signer, f.log)
}

// openSSHConsole logs in with a PTY (40x140) and waits for the console;
// cleanup quits it. log is the server's, shown when a wait fails.
func openSSHConsole(t *testing.T, addr string, hostKey gossh.PublicKey, signer gossh.Signer, log *lockedBuffer) *sshConsole {
	t.Helper()
	c, err := sshDial(addr, hostKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	con := &sshConsole{client: c, sess: s, screen: &lockedBuffer{}, done: make(chan struct{})}
	t.Cleanup(func() { con.quit(); s.Close(); c.Close() })
	if err := s.RequestPty("xterm-256color", 40, 140, gossh.TerminalModes{gossh.ECHO: 0}); err != nil {
		t.Fatal(err)
	}
	s.Stdout, s.Stderr = con.screen, con.screen
	if con.in, err = s.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := s.Shell(); err != nil {
		t.Fatal(err)
	}
	// Like OpenSSH, the client hangs up once its session has ended.
	go func() { con.err = s.Wait(); close(con.done); c.Close() }()
	con.waitFor(t, "Streams", 15*time.Second, log)
	return con
}

// quit ends the console from its side before the connection goes (a
// client that just hangs up makes the server close the PTY under
// bubbletea's input reader: a race inside the libraries).
func (c *sshConsole) quit() {
	for _, k := range []string{"q", "\x03", "\x03"} {
		select {
		case <-c.done:
			return
		default:
		}
		io.WriteString(c.in, k)
		select {
		case <-c.done:
			return
		case <-time.After(3 * time.Second):
		}
	}
}

func (c *sshConsole) text() string { return ansi.Strip(c.screen.String()) }

func (c *sshConsole) waitFor(t *testing.T, want string, timeout time.Duration, log *lockedBuffer) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if strings.Contains(c.text(), want) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	s := c.text()
	if len(s) > 3000 {
		s = s[len(s)-3000:]
	}
	t.Fatalf("the screen never showed %q; tail:\n%q\nserver log:\n%s", want, s, log)
}

func (c *sshConsole) keys(t *testing.T, k string) {
	t.Helper()
	for _, r := range k {
		if _, err := io.WriteString(c.in, string(r)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(150 * time.Millisecond)
	}
}

func sshWaitUntil(t *testing.T, what string, timeout time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestSSHOperatorsFileAndAuth(t *testing.T) {
	f := newSSHFixture(t, sshconsole.Config{})
	// The malformed line is reported with its number, in the log and for
	// doctor; the lines around it still work.
	if !strings.Contains(f.log.String(), "line 2") {
		t.Errorf("log does not report line 2:\n%s", f.log.String())
	}
	probs := sshconsole.CheckOperatorsFile(f.opsPath)
	if len(probs) != 1 || !strings.Contains(probs[0], "line 2") {
		t.Errorf("checkOperatorsFile = %q", probs)
	}
	f.console(t, f.operator) // with a PTY: the screen shows "Streams"
	f.console(t, f.viewer)
	// An unknown key is refused at auth.
	if c, err := f.dial(f.stranger); err == nil {
		c.Close()
		t.Fatal("an unknown key logged in")
	}
	// The host key is 0600 and kept.
	fi, err := os.Stat(filepath.Join(f.e.DataDir(), sshconsole.HostKeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("host key: %v %v", fi, err)
	}
	if _, err := sshconsole.HostKey(f.e.DataDir()); err != nil {
		t.Errorf("reopening the host key: %v", err)
	}
	os.Chmod(filepath.Join(f.e.DataDir(), sshconsole.HostKeyFile), 0o644)
	if _, err := sshconsole.HostKey(f.e.DataDir()); err == nil || !strings.Contains(err.Error(), "0600") {
		t.Errorf("a 0644 host key was not refused: %v", err)
	}
	// The file is re-read when it changes: drop the viewer.
	body, _ := os.ReadFile(f.opsPath)
	lines := strings.Split(string(body), "\n")
	os.WriteFile(f.opsPath, []byte(lines[0]+"\n"), 0o600)
	if c, err := f.dial(f.viewer); err == nil {
		c.Close()
		t.Error("a key removed from the operators file still logs in")
	}
	if c, err := f.dial(f.operator); err != nil {
		t.Errorf("operator after the re-read: %v", err)
	} else {
		c.Close()
	}
}

func TestSSHNoPTYStatusAndSessionLimit(t *testing.T) {
	f := newSSHFixture(t, sshconsole.Config{MaxSessions: 2})
	c, err := f.dial(f.viewer)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.Output("")
	if err != nil {
		t.Fatalf("no-PTY session: %v: %s", err, out)
	}
	for _, want := range []string{"Pending requests: 0", "Running hooks: 0"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	// The third session at once is refused with a message.
	f.console(t, f.operator)
	f.console(t, f.viewer)
	s3, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	out, err = s3.CombinedOutput("")
	var ee *gossh.ExitError
	if !errors.As(err, &ee) || ee.ExitStatus() == 0 || !strings.Contains(string(out), "too many sessions") {
		t.Errorf("third session: %v: %q", err, out)
	}
}

func TestSSHTwoSessionsOneRequest(t *testing.T) {
	f := newSSHFixture(t, sshconsole.Config{})
	hello := example(t, "hello")
	if _, err := f.e.AddModule(engine.LocalActor(), hello); err != nil {
		t.Fatal(err)
	}
	op := f.console(t, f.operator)
	vw := f.console(t, f.viewer)
	opActor, vwActor := sshconsole.Actor(f.operator.PublicKey()), sshconsole.Actor(f.viewer.PublicKey())

	h, err := f.e.StartRun(engine.LocalActor(), engine.RunRequest{
		Module: "hello", Hook: "greet", Inputs: map[string]any{"target": "ssh"}, Jail: engine.JailOff,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Cancel()
	// Both sessions see the same new request.
	op.waitFor(t, "request 1 · press 2 to answer · hello/greet", 60*time.Second, f.log)
	vw.waitFor(t, "request 1 · press 2 to see · hello/greet", 10*time.Second, f.log)

	// A no-PTY session lists it and the running hook.
	c, err := f.dial(f.viewer)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := c.NewSession()
	out, err := s.Output("")
	c.Close()
	if err != nil || !strings.Contains(string(out), "Pending requests: 1") || !strings.Contains(string(out), "hello/greet") || !strings.Contains(string(out), "Running hooks: 1") {
		t.Errorf("status: %v\n%s", err, out)
	}

	// The viewer's approve is refused by the engine, with a receipt.
	vw.keys(t, "2y")
	sshWaitUntil(t, "an access.refused receipt", 10*time.Second, func() bool {
		rs, _ := f.e.Receipts(engine.ReceiptFilter{Kind: "access.refused"})
		for _, r := range rs {
			if r.Actor == string(vwActor) {
				return true
			}
		}
		return false
	})
	if r, err := f.e.Request(1); err != nil || r.Decision != nil {
		t.Fatalf("the viewer decided request 1: %+v %v", r.Decision, err)
	}
	// The operator approves it.
	op.keys(t, "2y")
	sshWaitUntil(t, "request 1 decided", 10*time.Second, func() bool {
		r, err := f.e.Request(1)
		return err == nil && r.Decision != nil
	})
	r, _ := f.e.Request(1)
	if !strings.HasPrefix(r.Decision.Verdict, "approve") || r.Decision.By != string(opActor) {
		t.Errorf("decision %+v, want approved by %s", r.Decision, opActor)
	}
	select {
	case <-h.Done():
	case <-time.After(60 * time.Second):
		t.Fatal("the run did not end")
	}
	if o := h.Wait(); !o.OK() {
		t.Errorf("run: %+v", o.Run)
	}
}

func TestSSHListenAddrIsLoopbackByDefault(t *testing.T) {
	for in, want := range map[string]string{
		"":             "127.0.0.1:2222",
		"2200":         "127.0.0.1:2200",
		":2200":        "127.0.0.1:2200",
		"0.0.0.0:22":   "0.0.0.0:22",
		"[::1]:2200":   "[::1]:2200",
		"example:2200": "example:2200",
	} {
		if got := sshconsole.ListenAddr(in); got != want {
			t.Errorf("sshconsole.ListenAddr(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSSHHostKeyRefusals(t *testing.T) {
	dir := t.TempDir()
	if _, err := sshconsole.HostKey(dir); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, sshconsole.HostKeyFile)
	os.Link(key, filepath.Join(dir, "second-link"))
	if _, err := sshconsole.HostKey(dir); err == nil || !strings.Contains(err.Error(), "links") {
		t.Errorf("a hard-linked key was not refused: %v", err)
	}
	os.Remove(filepath.Join(dir, "second-link"))
	os.Rename(key, key+".real")
	os.Symlink(key+".real", key)
	if _, err := sshconsole.HostKey(dir); err == nil {
		t.Error("a symlinked key was not refused")
	}
}

// Doctor reports a malformed operators line by its number and exits 1:
// serve skips the line, but the operator who asked doctor to check the
// file has a line to fix (scripts rely on the exit code).
func TestDoctorReportsOperatorsFile(t *testing.T) {
	c := newCLI(t)
	needBwrap(t)
	path := filepath.Join(t.TempDir(), "operators")
	good, _, _, _, err := gossh.ParseAuthorizedKey([]byte("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGl9WQ3Z8rS4dA1b0tYtqHk2R3Hq2m0Yc0g6d6mN9WlP a@b"))
	if err != nil {
		t.Fatal(err)
	}
	body := "operator " + string(gossh.MarshalAuthorizedKey(good)) + "viewer not-a-key\n"
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	r := c.run("doctor", "--operators", path)
	if r.code != 1 || !strings.Contains(r.stdout, "operators file") || !strings.Contains(r.stdout, "line 2") {
		t.Errorf("doctor --operators: %s", r)
	}
}

// TestSSHServeSIGTERMRestoresTerminals: SIGTERM to `warden serve --ssh`
// with two consoles open ends both sessions as `q` would: each client gets
// the sequences that leave the alternate screen and turn mouse reporting
// off, then a line saying why, then exit status 0; serve exits 0.
func TestSSHServeSIGTERMRestoresTerminals(t *testing.T) {
	base := privateDir(t, "warden-ssh-term-")
	bin := filepath.Join(base, "bin", "warden")
	data := filepath.Join(base, "data")
	buildWarden(t, bin)
	op, opPub := sshTestKey(t)
	vw, vwPub := sshTestKey(t)
	operators := filepath.Join(base, "operators")
	if err := os.WriteFile(operators, []byte("operator "+opPub+"\nviewer "+vwPub+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", freePort(t))
	var stdout, log lockedBuffer
	serve := exec.Command(bin, "--data-dir", data, "serve", "--ssh", addr, "--operators", operators)
	serve.Stdout, serve.Stderr = &stdout, &log
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- serve.Wait() }()
	t.Cleanup(func() { serve.Process.Kill() })
	output := func() string { return "serve stdout:\n" + stdout.String() + "serve stderr:\n" + log.String() }
	waitUntil(t, "serving", 20*time.Second, func() bool { return strings.Contains(log.String(), "listening on") }, output)
	pemData, err := os.ReadFile(filepath.Join(data, sshconsole.HostKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	hk, err := gossh.ParsePrivateKey(pemData)
	if err != nil {
		t.Fatal(err)
	}
	cons := []*sshConsole{
		openSSHConsole(t, addr, hk.PublicKey(), op, &log),
		openSSHConsole(t, addr, hk.PublicKey(), vw, &log),
	}

	start := time.Now()
	if err := serve.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for i, con := range cons {
		select {
		case <-con.done:
		case <-time.After(15 * time.Second):
			t.Fatalf("console %d still open 15s after SIGTERM\n%s", i, output())
		}
		t.Logf("console %d ended %s after SIGTERM", i, time.Since(start).Round(time.Millisecond))
		if con.err != nil {
			t.Errorf("console %d ended with %v, want exit status 0", i, con.err)
		}
		// What the client got after it last entered the alternate screen.
		raw := con.screen.String()
		if strings.Contains(raw, "GONE") {
			t.Errorf("console %d showed a crash for a clean shutdown:\n%q", i, lastN(raw, 600))
		}
		j := strings.LastIndex(raw, ansi.SetModeAltScreenSaveCursor)
		if j < 0 {
			t.Errorf("console %d never entered the alternate screen", i)
			continue
		}
		tail := raw[j:]
		var missing []string
		for _, want := range []struct{ name, seq string }{
			{"alternate screen off", ansi.ResetModeAltScreenSaveCursor},
			{"mouse cell motion off", ansi.ResetModeMouseButtonEvent},
			{"SGR mouse off", ansi.ResetModeMouseExtSgr},
			{"cursor shown", ansi.ShowCursor},
		} {
			if !strings.Contains(tail, want.seq) {
				missing = append(missing, fmt.Sprintf("%s (%q)", want.name, want.seq))
			}
		}
		if k := strings.LastIndex(tail, ansi.ResetModeAltScreenSaveCursor); k < 0 || !strings.Contains(tail[k:], sshconsole.ShutdownLine) {
			missing = append(missing, fmt.Sprintf("%q on the restored screen", sshconsole.ShutdownLine))
		}
		if len(missing) > 0 {
			t.Errorf("console %d after SIGTERM lacks %s; it got:\n%q", i, strings.Join(missing, ", "), lastN(tail, 600))
		}
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("serve exited %v after SIGTERM\n%s", err, output())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("serve still running 15s after SIGTERM\n%s", output())
	}
	t.Logf("serve stopped %s after SIGTERM", time.Since(start).Round(time.Millisecond))
}

func lastN(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// One viewer's window-change of 65535×65535 (an x/crypto/ssh client may
// send any size) must not grow serve without bound: it once took it from
// 30 MB to 4 GB in 5 s, and the engine's death took a running hook with
// it. The size is bounded (1000×500) before the program sees it; serve's
// memory stays within a small multiple of what it was, and the console
// still answers.
func TestSSHHugeWindowChangeIsBounded(t *testing.T) {
	f := newSSHFixture(t, sshconsole.Config{})
	vw := f.console(t, f.viewer)
	runtime.GC()
	before := rssKiB(os.Getpid())
	peak := before
	if err := vw.sess.WindowChange(65535, 65535); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		peak = max(peak, rssKiB(os.Getpid()))
	}
	vw.keys(t, "3")
	vw.waitFor(t, "Receipts", 15*time.Second, f.log)
	peak = max(peak, rssKiB(os.Getpid()))
	t.Logf("serve's RSS (this process): %d MiB before, peak %d MiB after a 65535x65535 window-change", before>>10, peak>>10)
	if peak > before+300<<10 {
		t.Errorf("RSS grew from %d MiB to %d MiB", before>>10, peak>>10)
	}
}
