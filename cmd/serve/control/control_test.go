package control

// These tests hold a real engine on a real data dir, serve it on its real
// control socket and attach real Clients to it. The test binary doubles
// as the hook (TestMain's "hook-scenario") and as a process of another
// uid ("dial-as"), so runs and refusals are real processes too.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/engine/sdk/hookkit"
	"github.com/wardenhq/warden/storage"
	"github.com/wardenhq/warden/storage/storagetest"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "hook-scenario" {
		os.Exit(hookScenario(os.Args[2]))
	}
	if len(os.Args) > 2 && os.Args[1] == "dial-as" {
		_, err := Dial(os.Args[2])
		if err == nil {
			fmt.Println("attached")
			os.Exit(0)
		}
		fmt.Println(err)
		os.Exit(1)
	}
	if len(os.Args) > 3 && os.Args[1] == "hold-silent" {
		os.Exit(holdSilent(os.Args[2], os.Args[3]))
	}
	os.Exit(m.Run())
}

// holdSilent opens n connections to the socket and says nothing on any
// of them, as a hostile local process may, until its stdin closes.
func holdSilent(sock, count string) int {
	n, _ := strconv.Atoi(count)
	var held []net.Conn
	for range n {
		nc, err := net.Dial("unix", sock)
		if err != nil {
			fmt.Println(err)
			return 1
		}
		held = append(held, nc)
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	for _, nc := range held {
		nc.Close()
	}
	return 0
}

// hookScenario is the hook side of the run tests.
func hookScenario(name string) int {
	c, err := hookkit.Connect()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	defer c.Close()
	switch name {
	case "confirm":
		c.Log("info", "asking")
		ok, err := c.Confirm("Proceed with the test?")
		if err != nil {
			c.Fail("confirm", err.Error())
			return 1
		}
		c.Logf("answer %v", ok)
		if err := c.Result(map[string]any{"answer": fmt.Sprint(ok)}); err != nil {
			return 1
		}
	case "sleep":
		c.Log("info", "sleeping")
		time.Sleep(2 * time.Minute)
	case "big":
		// 12 lines of almost 1 MiB between small ones: 12 MiB in all.
		for i := range 12 {
			c.Logf("small %d", i)
			c.Log("info", fmt.Sprintf("big %d ", i)+strings.Repeat("x", 1<<20-200))
		}
	}
	return 0
}

func testModule(t testing.TB) string {
	t.Helper()
	base, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(base, 0o700)
	dir, err := os.MkdirTemp(base, "warden-control-module-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	script := "#!/bin/sh\nexec warden hook-scenario \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "hook.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	manifest := `id: ctl
version: 1.0.0
description: control socket scenarios
secrets: [api_key]
config: [region]
hooks:
  confirm:
    run: [./hook.sh, confirm]
    requires: [operator]
    outputs: {answer: string}
  sleep:
    run: [./hook.sh, sleep]
  big:
    run: [./hook.sh, big]
`
	if err := os.WriteFile(filepath.Join(dir, "module.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// served opens an engine on a fresh data dir and serves it.
func served(t testing.TB) (*engine.Engine, *Server) {
	t.Helper()
	return servedAt(t, filepath.Join(t.TempDir(), "data"))
}

func servedAt(t testing.TB, dir string) (*engine.Engine, *Server) {
	t.Helper()
	e, err := engine.Open(engine.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	s, err := Listen(e, Options{})
	if err != nil {
		e.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		e.Close()
	})
	return e, s
}

func attach(t testing.TB, dir string) *Client {
	t.Helper()
	c, err := Dial(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestSocketFile(t *testing.T) {
	e, s := served(t)
	fi, err := os.Lstat(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("control socket mode %v, want a 0600 socket", fi.Mode())
	}
	if s.Path() != filepath.Join(e.DataDir(), "control.sock") {
		t.Fatalf("socket at %s", s.Path())
	}
	c := attach(t, e.DataDir())
	if c.PID() != os.Getpid() || c.DataDir() != e.DataDir() || c.Actor() != engine.LocalActor() {
		t.Fatalf("welcome: pid %d dir %s actor %s", c.PID(), c.DataDir(), c.Actor())
	}
	s.Close()
	if _, err := os.Lstat(s.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket left behind after Close: %v", err)
	}
	if _, err := Dial(e.DataDir()); !errors.Is(err, ErrNoServer) {
		t.Fatalf("Dial after Close: %v, want ErrNoServer", err)
	}
}

// sameJSON fails unless two results encode alike: what a caller reads
// through the socket is what it would read in-process.
func sameJSON(t *testing.T, what string, local, remote any) {
	t.Helper()
	a, _ := json.Marshal(local)
	b, _ := json.Marshal(remote)
	if string(a) != string(b) {
		t.Fatalf("%s differs over the socket:\nin-process %s\nsocket     %s", what, a, b)
	}
}

func sameErr(t *testing.T, what string, local, remote error) {
	t.Helper()
	if (local == nil) != (remote == nil) || (local != nil && local.Error() != remote.Error()) {
		t.Fatalf("%s: in-process error %v, socket error %v", what, local, remote)
	}
}

// TestParity makes changes through the socket and reads everything back
// both ways.
func TestParity(t *testing.T) {
	e, _ := served(t)
	c := attach(t, e.DataDir())
	me := engine.LocalActor()
	mod := testModule(t)

	m, err := c.AddModule("ssh:SHA256:someone-else", mod)
	if err != nil {
		t.Fatal(err)
	}
	if m.Manifest == nil || m.Manifest.ID != "ctl" || m.Manifest.Hooks["confirm"] == nil {
		t.Fatalf("AddModule over the socket: %+v", m)
	}
	if err := c.SetSecret(me, "ctl", "api_key", "s3cr3t-value"); err != nil {
		t.Fatal(err)
	}
	if err := c.SetConfig(me, "ctl", "region", "eu"); err != nil {
		t.Fatal(err)
	}
	p, _, err := c.Policy("module:ctl")
	if err != nil {
		t.Fatal(err)
	}
	p.Network = true
	for range 2 { // the first policy is revision 0, the next 1
		if p, err = c.SetPolicy(me, p, p.Revision); err != nil {
			t.Fatal(err)
		}
	}
	_, err = c.SetPolicy(me, p, 0) // stale revision
	var conflict *engine.ConflictError
	if !errors.As(err, &conflict) || conflict.Subject != "module:ctl" {
		t.Fatalf("stale SetPolicy over the socket: %v, want a *ConflictError", err)
	}

	// The actor is the peer as the kernel names it, whatever the client
	// passed: AddModule was asked for as an ssh key.
	rs, err := e.Receipts(engine.ReceiptFilter{})
	if err != nil {
		t.Fatal(err)
	}
	// Every change made over the socket above, by kind: each must be
	// there, and name the peer.
	changes := map[string]int{storage.KindModuleAdd: 0, storage.KindSecretSet: 0, storage.KindConfigSet: 0, storage.KindPolicySet: 0}
	for _, r := range rs {
		if _, ok := changes[r.Kind]; ok {
			changes[r.Kind]++
			if r.Actor != string(me) {
				t.Fatalf("receipt %d (%s) names actor %q, want %q", r.Seq, r.Kind, r.Actor, me)
			}
		}
		if strings.Contains(r.Summary, "s3cr3t-value") {
			t.Fatalf("receipt %d holds the secret value", r.Seq)
		}
	}
	for kind, n := range changes {
		if n == 0 {
			t.Errorf("no %s receipt for the change made over the socket", kind)
		}
	}

	check := func(what string, local, remote func() (any, error)) {
		t.Helper()
		lv, lerr := local()
		rv, rerr := remote()
		sameErr(t, what, lerr, rerr)
		sameJSON(t, what, lv, rv)
	}
	check("Receipts", func() (any, error) { return e.Receipts(engine.ReceiptFilter{}) }, func() (any, error) { return c.Receipts(engine.ReceiptFilter{}) })
	check("Receipt", func() (any, error) { return e.Receipt(2) }, func() (any, error) { return c.Receipt(2) })
	check("VerifyReceipts", func() (any, error) { return e.VerifyReceipts() }, func() (any, error) { return c.VerifyReceipts() })
	check("TrustStatus", func() (any, error) { return e.TrustStatus() }, func() (any, error) { return c.TrustStatus() })
	check("Modules", func() (any, error) { return e.Modules() }, func() (any, error) { return c.Modules() })
	check("Module", func() (any, error) { return e.Module("ctl") }, func() (any, error) { return c.Module("ctl") })
	check("PlanHook", func() (any, error) { return e.PlanHook("ctl", "confirm", nil) }, func() (any, error) { return c.PlanHook("ctl", "confirm", nil) })
	check("SecretNames", func() (any, error) { return e.SecretNames("ctl") }, func() (any, error) { return c.SecretNames("ctl") })
	check("ConfigAll", func() (any, error) { return e.ConfigAll("ctl") }, func() (any, error) { return c.ConfigAll("ctl") })
	check("Config", func() (any, error) { v, ok, err := e.Config("ctl", "region"); return []any{v, ok}, err },
		func() (any, error) { v, ok, err := c.Config("ctl", "region"); return []any{v, ok}, err })
	check("Policy", func() (any, error) { p, ok, err := e.Policy("module:ctl"); return []any{p, ok}, err },
		func() (any, error) { p, ok, err := c.Policy("module:ctl"); return []any{p, ok}, err })
	check("Requests", func() (any, error) { return e.Requests(engine.RequestFilter{All: true}) }, func() (any, error) { return c.Requests(engine.RequestFilter{All: true}) })
	check("Runs", func() (any, error) { return e.Runs(0) }, func() (any, error) { return c.Runs(0) })
	check("HandsList", func() (any, error) { return e.HandsList() }, func() (any, error) { return c.HandsList() })

	// Errors keep their text, their sentinels and their types.
	_, lerr := e.Module("nope")
	_, rerr := c.Module("nope")
	sameErr(t, "Module(nope)", lerr, rerr)
	if !errors.Is(rerr, engine.ErrNotFound) {
		t.Fatalf("Module(nope) over the socket: %v does not match ErrNotFound", rerr)
	}
	lerr, rerr = e.ValidateHandsRoot("relative/root"), c.ValidateHandsRoot("relative/root")
	sameErr(t, "ValidateHandsRoot", lerr, rerr)
	var rootErr *engine.HandsRootError
	if !errors.As(rerr, &rootErr) || rootErr.Fix == "" {
		t.Fatalf("ValidateHandsRoot over the socket: %v, want a *HandsRootError with its fix", rerr)
	}
	_, lerr = e.Request(99)
	_, rerr = c.Request(99)
	sameErr(t, "Request(99)", lerr, rerr)
	existed, err := c.DeleteConfig(me, "ctl", "region")
	if err != nil || !existed {
		t.Fatalf("DeleteConfig: %v %v", existed, err)
	}
	if _, ok, _ := e.Config("ctl", "region"); ok {
		t.Fatal("DeleteConfig over the socket did not delete")
	}
}

// TestRunOverSocket starts a run from an attached client: its question
// comes back to the client's Confirm, its lines and receipts reach the
// client's subscription live, and its outcome reaches Wait.
func TestRunOverSocket(t *testing.T) {
	e, _ := served(t)
	if _, err := e.AddModule(engine.LocalActor(), testModule(t)); err != nil {
		t.Fatal(err)
	}
	c := attach(t, e.DataDir())
	sub := c.Subscribe()
	defer sub.Close()
	var asked []string
	var mu sync.Mutex
	h, err := c.StartRun(engine.LocalActor(), engine.RunRequest{Module: "ctl", Hook: "confirm", Jail: engine.JailOff,
		Confirm: func(ctx context.Context, msg string) (bool, error) {
			mu.Lock()
			asked = append(asked, msg)
			mu.Unlock()
			return true, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	o := h.Wait()
	if !o.OK() || !strings.Contains(string(o.Run.Outputs), `"answer":"true"`) || o.Run.ID != h.ID {
		t.Fatalf("run over the socket: %+v", o.Run)
	}
	mu.Lock()
	if len(asked) != 1 || asked[0] != "Proceed with the test?" {
		t.Fatalf("Confirm was asked %q", asked)
	}
	mu.Unlock()
	// The subscription saw the run's lines and its end receipt.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var sawLine, sawEnd bool
	for !sawLine || !sawEnd {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("events over the socket: %v (line %v, end %v)", err, sawLine, sawEnd)
		}
		if ev.Kind == engine.EventLines && ev.Lines.Run == h.ID {
			for _, l := range ev.Lines.Lines {
				sawLine = sawLine || l.Text == "answer true"
			}
		}
		if ev.Kind == engine.EventReceipt && ev.Receipt.Kind == "hook.end" {
			sawEnd = true
		}
	}
}

// TestHangUpCancelsRuns: a client that goes away takes the runs it was
// following with it, receipted; Cancel works over the socket too.
func TestHangUpCancelsRuns(t *testing.T) {
	e, _ := served(t)
	if _, err := e.AddModule(engine.LocalActor(), testModule(t)); err != nil {
		t.Fatal(err)
	}
	c := attach(t, e.DataDir())
	h, err := c.StartRun(engine.LocalActor(), engine.RunRequest{Module: "ctl", Hook: "sleep", Jail: engine.JailOff})
	if err != nil {
		t.Fatal(err)
	}
	h.Cancel()
	if o := h.Wait(); o.Run.Status != storage.RunCancelled {
		t.Fatalf("cancelled over the socket: %+v", o.Run)
	}

	c2, err := Dial(e.DataDir())
	if err != nil {
		t.Fatal(err)
	}
	h2, err := c2.StartRun(engine.LocalActor(), engine.RunRequest{Module: "ctl", Hook: "sleep", Jail: engine.JailOff})
	if err != nil {
		t.Fatal(err)
	}
	waitRunning(t, e, h2.ID)
	c2.Close()
	<-h2.Done() // the client's own handle ends with the connection
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := e.Run(h2.ID)
		if err == nil && r.Status == storage.RunCancelled {
			if !strings.Contains(r.Error, "local:") {
				t.Fatalf("cancel reason %q does not name who", r.Error)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s not cancelled after its client hung up: %+v %v", h2.ID, r, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitRunning(t *testing.T, e *engine.Engine, id string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		lines, _ := e.StreamLines(id, 0, 0)
		if len(lines) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s said nothing", id)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestServerGone: when the serving process lets go of the data dir an
// attached client's subscription ends with ErrEngineGone saying it was on
// purpose, and so do its calls. (A server that dies says nothing; the
// console tests SIGKILL one.)
func TestServerGone(t *testing.T) {
	e, s := served(t)
	c := attach(t, e.DataDir())
	sub := c.Subscribe()
	s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := sub.Next(ctx)
	var gone *engine.EngineGoneError
	if !errors.Is(err, engine.ErrEngineGone) || !errors.As(err, &gone) || !gone.Closed || gone.PID != os.Getpid() ||
		!strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Fatalf("subscription after the server closed: %v", err)
	}
	if _, err := c.Runs(0); !errors.Is(err, engine.ErrEngineGone) {
		t.Fatalf("call after the server went: %v", err)
	}
}

// TestMalformedLines: garbage gets an error reply and the connection
// keeps working; only facade methods can be called.
func TestMalformedLines(t *testing.T) {
	e, _ := served(t)
	nc, err := net.Dial("unix", filepath.Join(e.DataDir(), engine.ControlSocket))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 1<<16)
	exchange := func(line string) string {
		t.Helper()
		if _, err := nc.Write([]byte(line + "\n")); err != nil {
			t.Fatal(err)
		}
		n, err := nc.Read(buf)
		if err != nil {
			t.Fatalf("after %s: %v", line, err)
		}
		return string(buf[:n])
	}
	if got := exchange(`{"op":"hello","version":1}`); !strings.Contains(got, `"op":"welcome"`) {
		t.Fatalf("hello: %s", got)
	}
	for line, want := range map[string]string{
		`not json`: "malformed control message",
		`{"op":"call","id":1,"method":"Runs","args":[0],"extra":1}`:       "unknown field",
		`{"op":"call","id":2,"method":"SetRole","args":["x","operator"]}`: "not a method of the engine facade",
		`{"op":"call","id":3,"method":"Runs","args":["ten"]}`:             "Runs argument 1",
		`{"op":"call","id":4,"method":"Runs","args":[]}`:                  "too few arguments",
		`{"op":"frobnicate","id":5}`:                                      "unknown op",
	} {
		if got := exchange(line); !strings.Contains(got, want) {
			t.Fatalf("%s: got %s, want %q", line, got, want)
		}
	}
	if got := exchange(`{"op":"call","id":6,"method":"Runs","args":[0]}`); !strings.Contains(got, `"op":"reply","id":6,"results":[`) {
		t.Fatalf("a good call after the garbage: %s", got)
	}
}

// TestOtherUIDRefused: a process of another uid cannot attach. With the
// data dir 0700 and the socket 0600 the kernel stops it at connect; with
// both opened up (a mistake, a umask race) the server's peer credential
// check still refuses it, and the refusal is receipted.
func TestOtherUIDRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("this test needs root (to run a process as another uid); CI runs as root")
		}
		t.Skip("needs root to run a process as another uid")
	}
	// A base other users can traverse (t.TempDir's parent is 0700), with
	// the test binary in it, where uid 60998 can run it.
	base, err := os.MkdirTemp("", "warden-control-uid-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(base)
	os.Chmod(base, 0o711)
	e, s := servedAt(t, filepath.Join(base, "data"))
	bin := filepath.Join(base, "control.test")
	self, _ := os.Executable()
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	dialAs := func() (string, error) {
		cmd := exec.Command(bin, "dial-as", e.DataDir())
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 60998, Gid: 60998}}
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	out, err := dialAs()
	if err == nil || !strings.Contains(out, "data dir belongs to uid 0; you are uid 60998") && !strings.Contains(out, "permission denied") {
		t.Fatalf("another uid with the usual modes: %v: %s", err, out)
	}
	os.Chmod(e.DataDir(), 0o711)
	os.Chmod(s.Path(), 0o666)
	defer os.Chmod(e.DataDir(), 0o700)
	out, err = dialAs()
	if err == nil || !strings.Contains(out, "refused this process") || !strings.Contains(out, "uid 60998 may not attach") {
		t.Fatalf("another uid through opened modes: %v: %s", err, out)
	}
	rs, err := e.Receipts(engine.ReceiptFilter{})
	if err != nil {
		t.Fatal(err)
	}
	last := rs[len(rs)-1]
	if last.Kind != "control.refused" || last.Actor != "uid:60998" {
		t.Fatalf("no refusal receipt; last receipt %+v", last)
	}
}

// TestSilentConnectionsLockNobodyOut: 64 connections that never say
// hello, from one process, locked every real client out ("too many
// clients (64) attached"). Silent ones are counted apart, at most 4 a
// process, so a client that says hello still attaches.
func TestSilentConnectionsLockNobodyOut(t *testing.T) {
	e, s := served(t)
	sock := filepath.Join(e.DataDir(), engine.ControlSocket)
	cmd := exec.Command(os.Args[0], "hold-silent", sock, "64")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
		t.Fatalf("the silent process: %q", line)
	}
	// The server has taken in what it will of them: 4 waiting (the rest
	// refused at once, and their refusals counted nowhere).
	waitFor(t, "the silent connections to be taken in", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.silent) >= maxSilentPerPID
	})
	c, err := Dial(e.DataDir())
	if err != nil {
		t.Fatalf("a client that says hello, beside 64 silent connections: %v", err)
	}
	defer c.Close()
	if _, err := c.Runs(0); err != nil {
		t.Fatalf("a call: %v", err)
	}
}

// waitFor polls cond for up to 20 s (a loaded machine's slow accept).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within 20 s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDamagedStoreOverSocket: a leaf page damaged under a running serve
// (its mapping sees the change at once): a verify or a receipt search
// through control.sock gets a CorruptError naming the file, and the
// server lives on (both panicked and killed serve).
func TestDamagedStoreOverSocket(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	path := storagetest.FillReceipts(t, dir, 200)
	pgid, ps := storagetest.ReceiptsLeaf(t, path)
	_, s := servedAt(t, dir)
	storagetest.FlipLeafCountAt(t, path, pgid, ps, 255)
	c := attach(t, filepath.Dir(s.Path()))
	for i := 0; i < 2; i++ {
		v, err := c.VerifyReceipts()
		if err == nil || !strings.Contains(err.Error(), "storage corrupt: "+path) || !strings.Contains(err.Error(), "backup") {
			t.Fatalf("verify --full over the socket: %+v, %v", v, err)
		}
		if _, err := c.Receipts(storage.ReceiptFilter{Kind: "test.fill"}); err == nil || !strings.Contains(err.Error(), "storage corrupt") {
			t.Fatalf("receipts search over the socket: %v", err)
		}
	}
}
