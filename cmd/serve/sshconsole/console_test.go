package sshconsole_test

// The SSH console served in-process on an engine this test opened, and
// reached as an operator's SSH client would (sshtest). What `warden
// serve --ssh` adds, the binary's signals and flags, is cmd/warden's to
// test end to end.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/wardenhq/warden/cmd/serve/sshconsole"
	"github.com/wardenhq/warden/cmd/serve/sshconsole/sshtest"
	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/engine/hookcli"
)

// TestMain lets this test binary be the `warden` a hook finds first on
// its PATH (the engine links it into the run dir): the hook verbs only.
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == "warden" {
		os.Exit(hookcli.Main(os.Args[1:], "test", os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

type sshFixture struct {
	e        *engine.Engine
	srv      *sshconsole.Server
	log      *sshtest.Buffer
	hostKey  gossh.PublicKey
	operator gossh.Signer
	viewer   gossh.Signer
	stranger gossh.Signer
	opsPath  string
}

// newSSHFixture serves the console of a fresh engine on a loopback port,
// with an operators file naming an operator (alice), a malformed line and
// a viewer (bob); stranger is a key the file does not name.
func newSSHFixture(t *testing.T, cfg sshconsole.Config) *sshFixture {
	t.Helper()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	e, err := engine.Open(engine.Options{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	f := &sshFixture{e: e, log: &sshtest.Buffer{}}
	var op, vw string
	f.operator, op = sshtest.Key(t)
	f.viewer, vw = sshtest.Key(t)
	f.stranger, _ = sshtest.Key(t)
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
	return sshtest.Dial(f.srv.Addr(), f.hostKey, signer)
}

func (f *sshFixture) console(t *testing.T, signer gossh.Signer) *sshtest.Console {
	t.Helper()
	return sshtest.Open(t, f.srv.Addr(), f.hostKey, signer, f.log)
}

// privateDir is a fresh dir under the user's cache: module admission
// refuses code under world-writable ancestors, and t.TempDir is under
// /tmp.
func privateDir(t testing.TB, prefix string) string {
	t.Helper()
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(cache, 0o700); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(cache, prefix)
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// example copies an example module to a private dir.
func example(t testing.TB, name string) string {
	t.Helper()
	src, err := filepath.Abs(filepath.Join("..", "..", "..", "examples", "modules", name))
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(privateDir(t, "warden-example-"), name)
	if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("copy %s: %v: %s", name, err, out)
	}
	return dst
}

// hostileModule writes a module whose version and description carry
// control sequences (its hooks are never run here).
func hostileModule(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(privateDir(t, "warden-hostile-"), "hostile")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	manifest := `id: hostile
version: "1.0\e]0;pwned-by-version\a"
description: "desc \e]52;c;cm0gLXJmIH4=\a\e[2J safe\rEVIL end \u202e"
hooks:
  speak:
    run: [./speak.sh]
`
	if err := os.WriteFile(filepath.Join(dir, "module.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "speak.sh"), []byte("#!/bin/sh\necho hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// rssKiB is process pid's resident set, in KiB (0 when unknown).
func rssKiB(pid int) int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			n, _ := strconv.Atoi(strings.Fields(l)[1])
			return n
		}
	}
	return 0
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
	op.WaitFor(t, "request 1 · press 2 to answer · hello/greet", 60*time.Second)
	vw.WaitFor(t, "request 1 · press 2 to see · hello/greet", 10*time.Second)

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
	vw.Keys(t, "2y")
	sshtest.WaitUntil(t, "an access.refused receipt", 10*time.Second, func() bool {
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
	op.Keys(t, "2y")
	sshtest.WaitUntil(t, "request 1 decided", 10*time.Second, func() bool {
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
	if err := vw.Sess.WindowChange(65535, 65535); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		peak = max(peak, rssKiB(os.Getpid()))
	}
	vw.Keys(t, "3")
	vw.WaitFor(t, "Receipts", 15*time.Second)
	peak = max(peak, rssKiB(os.Getpid()))
	t.Logf("serve's RSS (this process): %d MiB before, peak %d MiB after a 65535x65535 window-change", before>>10, peak>>10)
	if peak > before+300<<10 {
		t.Errorf("RSS grew from %d MiB to %d MiB", before>>10, peak>>10)
	}
}

// TestHostileModuleOverSSH: an SSH operator's console shows the module's
// version escaped; its title and clipboard sequences never reach the
// operator's terminal (they did, as the Modules tab's row title).
func TestHostileModuleOverSSH(t *testing.T) {
	f := newSSHFixture(t, sshconsole.Config{})
	if _, err := f.e.AddModule(engine.LocalActor(), hostileModule(t)); err != nil {
		t.Fatal(err)
	}
	con := f.console(t, f.operator)
	con.Keys(t, "4")
	con.WaitFor(t, "hostile 1.0␛]0;pwned-by-version␇", 15*time.Second)
	con.WaitFor(t, "desc ␛]52;c;cm0gLXJmIH4=␇␛[2J safe␍EVIL end", 15*time.Second)
	raw := con.Screen.String()
	for _, bad := range []string{"\x1b]0;pwned", "\x1b]52;", "\x1b[2J safe", "safe\rEVIL", "\u202e"} {
		if i := strings.Index(raw, bad); i >= 0 {
			t.Errorf("the SSH operator's terminal was sent %q at byte %d:\n%q", bad, i, raw[max(i-80, 0):min(i+80, len(raw))])
		}
	}
}

// TestSSHLogEscapesWhatTheClientChose: the session log on serve's stderr
// quotes the client's user name; a user name carrying OSC 0 is escaped.
func TestSSHLogEscapesWhatTheClientChose(t *testing.T) {
	f := newSSHFixture(t, sshconsole.Config{})
	c, err := gossh.Dial("tcp", f.srv.Addr(), &gossh.ClientConfig{
		User:            "eve\x1b]0;pwned\x07",
		Auth:            []gossh.AuthMethod{gossh.PublicKeys(f.operator)},
		HostKeyCallback: gossh.FixedHostKey(f.hostKey),
		Timeout:         10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	s.Output("") // no PTY: the status screen, then the session ends
	c.Close()
	sshtest.WaitUntil(t, "the session is logged", 10*time.Second, func() bool { return strings.Contains(f.log.String(), "eve") })
	if log := f.log.String(); strings.Contains(log, "\x1b]0;pwned") || !strings.Contains(log, "eve␛]0;pwned␇") {
		t.Errorf("the session log is not escaped:\n%q", log)
	}
}
