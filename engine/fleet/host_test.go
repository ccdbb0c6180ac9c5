package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"warden/engine"
)

// testNats starts a private nats-server -js (scripts/nats-test) in a
// fresh dir and returns its URL and creds dir. Without nats-server the
// test fails under CI and is skipped elsewhere, saying why.
func testNats(t *testing.T) (url, creds string) {
	t.Helper()
	return testNatsIn(t, filepath.Join(t.TempDir(), "nats"))
}

func testNatsIn(t *testing.T, dir string) (url, creds string) {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command("bash", filepath.Join("..", "..", "scripts", "nats-test"), dir)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := "no nats-server for the fleet tests: " + strings.TrimSpace(stderr.String())
		if os.Getenv("CI") == "true" {
			t.Fatal(msg + "; CI needs one (scripts/nats-test installs it)")
		}
		t.Skip(msg)
	}
	t.Cleanup(func() {
		if b, err := os.ReadFile(filepath.Join(dir, "nats.pid")); err == nil {
			var pid int
			if _, err := fmt.Sscan(string(b), &pid); err == nil && pid > 1 {
				syscall.Kill(pid, syscall.SIGTERM)
			}
		}
	})
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1], filepath.Join(dir, "creds")
}

func mustCreds(t *testing.T, dir, user string) Creds {
	t.Helper()
	c, err := LoadCreds(filepath.Join(dir, user))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func waitFor(t *testing.T, what string, d time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestHostCheckpointsAndRejoin: a real engine joined as a host
// checkpoints its chain at every 100th receipt, its checkpoints verify
// against its pinned key, and a host that leaves and joins again
// publishes only what the fleet has not seen.
func TestHostCheckpointsAndRejoin(t *testing.T) {
	url, creds := testNats(t)
	admin, err := Dial(url, mustCreds(t, creds, "admin"), "admin", RoleOperator)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx := t.Context()
	if err := admin.Init(ctx, 64<<20); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(t.TempDir(), "data")
	e, err := engine.Open(engine.Options{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	join := func() *Host {
		h, err := Join(e, HostOptions{URL: url, Creds: mustCreds(t, creds, "hostc"), Name: "hostc", Version: "test"})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	h := join()
	actor := engine.LocalActor()
	var rev uint64
	for i := 0; i < 150; i++ {
		p, err := e.SetPolicy(actor, engine.Policy{Subject: "module:m", Network: i%2 == 0}, rev)
		if err != nil {
			t.Fatal(err)
		}
		rev = p.Revision
	}
	op, err := Dial(url, mustCreds(t, creds, "alice"), "", RoleOperator)
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	var v *View
	waitFor(t, "a checkpoint at seq 100", 8*time.Second, func() bool {
		v, err = op.Load(ctx)
		for _, cp := range v.Checkpoints("hostc") {
			if cp.Seq == 100 {
				return true
			}
		}
		return false
	})
	res, err := op.Verify(ctx, v, "hostc")
	if err != nil || len(res) != 1 || res[0].Status != "verified" {
		t.Fatalf("verify: %+v %v", res, err)
	}
	// The stream holds each event once; leaving and joining again adds
	// nothing already published.
	h.Close()
	// What the fleet acknowledged is remembered: the cursor is at the head.
	last, _ := e.Receipts(engine.ReceiptFilter{Limit: 1})
	var st hostState
	b, err := os.ReadFile(filepath.Join(data, "fleet", stateFile))
	if err != nil || json.Unmarshal(b, &st) != nil || st.Cursor != last[0].Seq || st.Checkpoint == nil || st.Checkpoint.Seq < 100 {
		t.Fatalf("state after leaving: %s %v", b, err)
	}
	before := streamMsgs(t, op)
	h = join()
	defer h.Close()
	if _, err := e.SetPolicy(actor, engine.Policy{Subject: "module:m"}, rev); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	v, _ = op.Load(ctx)
	if v.Duplicates() != 0 {
		t.Errorf("%d duplicate events after a rejoin", v.Duplicates())
	}
	if after := streamMsgs(t, op); after > before+1 {
		t.Errorf("the rejoin republished: %d messages before, %d after", before, after)
	}
	// The heartbeat says who and how far.
	waitFor(t, "a heartbeat", 8*time.Second, func() bool {
		hs, err := op.Hosts(ctx, v)
		return err == nil && len(hs) == 1 && hs[0].Up && hs[0].Heartbeat != nil && hs[0].Heartbeat.Head > last[0].Seq && hs[0].Key == h.PublicKey()
	})
}

func streamMsgs(t *testing.T, c *Client) uint64 {
	t.Helper()
	s, err := c.js.Stream(context.Background(), StreamName)
	if err != nil {
		t.Fatal(err)
	}
	i, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return i.State.Msgs
}

// TestHostJoinsOffline: a host whose fleet is not up yet starts anyway,
// keeps its own work, and publishes its backlog in order once the fleet
// is there (and set up).
func TestHostJoinsOffline(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nats")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	os.WriteFile(filepath.Join(dir, "port"), []byte(fmt.Sprintln(port)), 0o600)
	// The creds exist before the server: nats-test makes them; run it
	// once to make them and stop the server again.
	url, creds := testNatsIn(t, dir)
	b, _ := os.ReadFile(filepath.Join(dir, "nats.pid"))
	var pid int
	fmt.Sscan(string(b), &pid)
	syscall.Kill(pid, syscall.SIGKILL)
	waitFor(t, "the server to stop", 5*time.Second, func() bool { return syscall.Kill(pid, 0) != nil })

	data := filepath.Join(t.TempDir(), "data")
	e, err := engine.Open(engine.Options{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var logs strings.Builder
	var logMu sync.Mutex
	h, err := Join(e, HostOptions{URL: url, Creds: mustCreds(t, creds, "hosta"), Name: "hosta", Version: "test",
		Logf: func(f string, a ...any) { logMu.Lock(); fmt.Fprintf(&logs, f+"\n", a...); logMu.Unlock() }})
	if err != nil {
		t.Fatalf("joining with the fleet away: %v", err)
	}
	defer h.Close()
	var rev uint64
	for i := 0; i < 120; i++ { // work goes on meanwhile
		p, err := e.SetPolicy(engine.LocalActor(), engine.Policy{Subject: "module:m", Network: i%2 == 0}, rev)
		if err != nil {
			t.Fatal(err)
		}
		rev = p.Revision
	}
	testNatsIn(t, dir) // the fleet comes up
	admin, err := Dial(url, mustCreds(t, creds, "admin"), "admin", RoleOperator)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.Init(t.Context(), 64<<20); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the backlog's checkpoint at seq 100", 20*time.Second, func() bool {
		v, err := admin.Load(t.Context())
		if err != nil {
			return false
		}
		cps := v.Checkpoints("hosta")
		return len(cps) > 0 && cps[0].Seq == 100
	})
	logMu.Lock()
	defer logMu.Unlock()
	t.Logf("host log:\n%s", logs.String())
	if !strings.Contains(logs.String(), "working offline") {
		t.Errorf("the host did not say it works offline: %s", logs.String())
	}
}
