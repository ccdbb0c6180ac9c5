package fleethost

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/engine/fleet"
	"github.com/wardenhq/warden/storage"
)

// testNats starts a private nats-server -js (scripts/nats-test) in a
// fresh dir and returns its URL and creds dir. Without nats-server the
// test fails under CI and is skipped elsewhere, saying why.
func testNats(t testing.TB) (url, creds string) {
	t.Helper()
	return testNatsIn(t, filepath.Join(t.TempDir(), "nats"))
}

func testNatsIn(t testing.TB, dir string) (url, creds string) {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command("bash", filepath.Join("..", "..", "..", "scripts", "nats-test"), dir)
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
				stopPID(pid) // before its dir is removed: a live server would write it again
			}
		}
	})
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1], filepath.Join(dir, "creds")
}

func mustCreds(t testing.TB, dir, user string) fleet.Creds {
	t.Helper()
	c, err := fleet.LoadCreds(filepath.Join(dir, user))
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
	admin, err := fleet.Dial(url, mustCreds(t, creds, "admin"), "admin", fleet.RoleOperator)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx := t.Context()
	if err := admin.Init(ctx, fleet.InitOptions{MaxBytes: 64 << 20}); err != nil {
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
	actor := engine.LocalActor()
	var rev uint64
	setPolicies := func(n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			p, err := e.SetPolicy(actor, engine.Policy{Subject: "module:m", Network: i%2 == 0}, rev)
			if err != nil {
				t.Fatal(err)
			}
			rev = p.Revision
		}
	}
	// An earlier session published up to a timed checkpoint at the
	// head, short of 100 (a timed one can land anywhere: its first tick
	// is at a random phase). The count checkpoint still comes at seq 100.
	setPolicies(37)
	early, err := e.Receipts(engine.ReceiptFilter{Limit: 1})
	if err != nil || len(early) != 1 || early[0].Seq >= 100 {
		t.Fatalf("head after 37 changes: %+v %v", early, err)
	}
	seeded, _ := json.Marshal(hostState{Cursor: early[0].Seq, Checkpoint: &fleet.Checkpoint{At: time.Now().UTC(), Hash: early[0].Hash, Host: "hostc", Seq: early[0].Seq}})
	if err := os.MkdirAll(filepath.Join(data, "fleet"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "fleet", stateFile), seeded, 0o600); err != nil {
		t.Fatal(err)
	}
	h := join()
	setPolicies(113)
	op, err := fleet.Dial(url, mustCreds(t, creds, "alice"), "", fleet.RoleOperator)
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	var v *fleet.View
	waitFor(t, "a checkpoint at seq 100", 8*time.Second, func() bool {
		v, err = op.Load(ctx, true)
		for _, cp := range v.Checkpoints("hostc") {
			if cp.Seq == 100 {
				return true
			}
		}
		return false
	})
	res, err := op.Verify(ctx, v, fleet.VerifyOptions{Only: "hostc"})
	if err != nil || len(res) != 1 || res[0].Status != "verified" {
		t.Fatalf("verify: %+v %v", res, err)
	}
	// The same, reading the chain a receipt at a time (a long chain).
	verifyInMemory.Store(0)
	res2, err := op.Verify(ctx, v, fleet.VerifyOptions{Only: "hostc"})
	verifyInMemory.Store(100_000)
	if err != nil || len(res2) != 1 || res2[0].Status != "verified" || res2[0].Head != res[0].Head {
		t.Fatalf("verify a receipt at a time: %+v %v (in one go: %+v)", res2, err, res)
	}
	// The stream holds each event once; leaving and joining again adds
	// nothing already published. (Leave once the publisher has gone
	// through the chain, so that the state it saves is at the head.)
	last, _ := e.Receipts(engine.ReceiptFilter{Limit: 1})
	waitFor(t, "the publisher at the head", 10*time.Second, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.state.Cursor == last[0].Seq
	})
	h.Close()
	// What the fleet acknowledged is remembered: the cursor is at the head.
	var st hostState
	b, err := os.ReadFile(filepath.Join(data, "fleet", stateFile))
	if err != nil || json.Unmarshal(b, &st) != nil || st.Cursor != last[0].Seq || st.Checkpoint == nil || st.Checkpoint.Seq < 100 {
		t.Fatalf("state after leaving: %s %v", b, err)
	}
	before := streamMsgs(t, url, mustCreds(t, creds, "alice"))
	h = join()
	defer h.Close()
	if _, err := e.SetPolicy(actor, engine.Policy{Subject: "module:m"}, rev); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	v, _ = op.Load(ctx, true)
	if v.Duplicates() != 0 {
		t.Errorf("%d duplicate events after a rejoin", v.Duplicates())
	}
	if after := streamMsgs(t, url, mustCreds(t, creds, "alice")); after > before+1 {
		t.Errorf("the rejoin republished: %d messages before, %d after", before, after)
	}
	// The heartbeat says who and how far.
	waitFor(t, "a heartbeat", 8*time.Second, func() bool {
		hs, err := op.Hosts(ctx, v)
		return err == nil && len(hs) == 1 && hs[0].Up && hs[0].Heartbeat != nil && hs[0].Heartbeat.Head > last[0].Seq && hs[0].Key == h.PublicKey()
	})
}

// streamMsgs is how many messages the fleet's stream holds, read over a
// connection of its own (as an operator's creds may).
func streamMsgs(t *testing.T, url string, c fleet.Creds) uint64 {
	t.Helper()
	nc, err := fleet.Connect(url, c, "test stream count", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := c.NewJetStream(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(context.Background(), fleet.StreamName)
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
	waitFor(t, "the server to stop", 5*time.Second, func() bool { return pidGone(pid) })

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
	admin, err := fleet.Dial(url, mustCreds(t, creds, "admin"), "admin", fleet.RoleOperator)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.Init(t.Context(), fleet.InitOptions{MaxBytes: 64 << 20}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the backlog's checkpoint at seq 100", 20*time.Second, func() bool {
		v, err := admin.Load(t.Context(), true)
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

// TestSubjectPermissions: the identity a host trusts is the fleet
// server's subject permissions (scripts/nats-test's config, the README's
// minimal config): a host publishes only under its own name and hears
// only its own decisions; a viewer cannot send an operator's decision.
func TestSubjectPermissions(t *testing.T) {
	url, creds := testNats(t)
	as := func(user string) (*nats.Conn, chan error) {
		errs := make(chan error, 8)
		c := mustCreds(t, creds, user)
		nc, err := fleet.Connect(url, c, "test "+user, false, func(err error) { errs <- err })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc, errs
	}
	refused := func(what string, errs chan error) {
		t.Helper()
		select {
		case err := <-errs:
			if !strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
				t.Errorf("%s: %v", what, err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("%s: the server let it through", what)
		}
	}
	hostb, hostbErrs := as("hostb")
	errs := hostbErrs
	hostb.Publish(fleet.EventSubject("hostc", fleet.KindRequest), []byte(`{}`))
	hostb.Flush()
	refused("hostb publishing as hostc", errs)
	hostb.Subscribe(fleet.DecideSubject("hostc", fleet.RoleOperator, "alice"), func(*nats.Msg) {})
	hostb.Flush()
	refused("hostb listening to hostc's decisions", errs)
	bob, errs := as("bob")
	bob.Publish(fleet.DecideSubject("hostb", fleet.RoleOperator, "bob"), []byte(`{}`))
	bob.Flush()
	refused("viewer bob sending an operator's decision", errs)
	bob.Publish(fleet.DecideSubject("hostb", fleet.RoleOperator, "alice"), []byte(`{}`))
	bob.Flush()
	refused("viewer bob sending alice's decision", errs)
	alice, errs := as("alice")
	alice.Publish(fleet.DecideSubject("hostb", fleet.RoleOperator, "carol"), []byte(`{}`))
	alice.Flush()
	refused("alice sending carol's decision", errs)
	// Pinned keys are the admin's: an operator cannot replace a host's,
	// nor a host another host's.
	alice.Publish("$KV."+fleet.KeysBucket+".hostb", []byte("forged"))
	alice.Flush()
	refused("alice replacing hostb's pinned key", errs)
	hostb.Publish("$KV."+fleet.KeysBucket+".hostc", []byte("forged"))
	hostb.Flush()
	refused("hostb replacing hostc's pinned key", hostbErrs)
	// What is allowed is allowed: alice's own decision subject.
	got := make(chan string, 1)
	hostb.Subscribe(fleet.DecideSubject("hostb", "*", "*"), func(m *nats.Msg) { got <- m.Subject })
	hostb.Flush()
	alice.Publish(fleet.DecideSubject("hostb", fleet.RoleOperator, "alice"), []byte(`{}`))
	select {
	case s := <-got:
		if s != fleet.DecideSubject("hostb", fleet.RoleOperator, "alice") {
			t.Errorf("hostb heard %s", s)
		}
	case <-time.After(5 * time.Second):
		t.Error("alice's own decision subject did not reach hostb")
	}
}

// TestNkeyCreds: an nkey seed file logs in as the server's nkey user, and
// a seed the server does not know is refused as bad credentials.
func TestNkeyCreds(t *testing.T) {
	testNats(t) // installs nats-server (or fails under CI / skips)
	server, err := exec.LookPath("nats-server")
	if err != nil {
		server = "/usr/sbin/nats-server"
	}
	dir := t.TempDir()
	user, _ := nkeys.CreateUser()
	pub, _ := user.PublicKey()
	seed, _ := user.Seed()
	other, _ := nkeys.CreateUser()
	otherSeed, _ := other.Seed()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	conf := fmt.Sprintf("listen: 127.0.0.1:%d\nauthorization: { users: [ { nkey: %q } ] }\n", port, pub)
	os.WriteFile(filepath.Join(dir, "nats.conf"), []byte(conf), 0o600)
	srv := exec.Command(server, "-c", filepath.Join(dir, "nats.conf"))
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	good := filepath.Join(dir, "good.nk")
	os.WriteFile(good, append(seed, '\n'), 0o600)
	os.WriteFile(filepath.Join(dir, "bad.nk"), append(otherSeed, '\n'), 0o600)
	var c *fleet.Client
	waitFor(t, "the nkey login", 10*time.Second, func() bool {
		c, err = fleet.Dial(url, mustCreds(t, dir, "good.nk"), "web1", fleet.RoleOperator)
		return err == nil
	})
	c.Close()
	if _, err := fleet.Dial(url, mustCreds(t, dir, "bad.nk"), "web1", fleet.RoleOperator); err == nil || !strings.Contains(err.Error(), "refused these credentials") {
		t.Errorf("an unknown nkey: %v", err)
	}
}

// TestPrivateCA: a fleet server with a certificate from a private CA is
// trusted with Creds.CA (--fleet-ca), and not without it; a password
// then crosses only TLS.
func TestPrivateCA(t *testing.T) {
	testNats(t) // installs nats-server (or fails under CI / skips)
	server, err := exec.LookPath("nats-server")
	if err != nil {
		server = "/usr/sbin/nats-server"
	}
	dir := t.TempDir()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "warden test CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	srvKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	srvTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(srvKey)
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
		return p
	}
	caFile := write("ca.pem", "CERTIFICATE", caDER)
	certFile := write("server.pem", "CERTIFICATE", srvDER)
	keyFile := write("server-key.pem", "EC PRIVATE KEY", keyDER)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	conf := fmt.Sprintf("listen: 127.0.0.1:%d\ntls: { cert_file: %q, key_file: %q }\nauthorization: { users: [ { user: web1, password: s3cret } ] }\n", port, certFile, keyFile)
	os.WriteFile(filepath.Join(dir, "nats.conf"), []byte(conf), 0o600)
	srv := exec.Command(server, "-c", filepath.Join(dir, "nats.conf"))
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	os.WriteFile(filepath.Join(dir, "web1.creds"), []byte("web1:s3cret\n"), 0o600)
	creds := mustCreds(t, dir, "web1.creds")
	creds.CA = caFile
	url := fmt.Sprintf("tls://127.0.0.1:%d", port)
	var c *fleet.Client
	waitFor(t, "a TLS login trusting the private CA", 10*time.Second, func() bool {
		c, err = fleet.Dial(url, creds, "web1", fleet.RoleOperator)
		return err == nil
	})
	if !c.Conn().TLSRequired() {
		t.Error("the connection is not TLS")
	}
	c.Close()
	creds.CA = ""
	if _, err := fleet.Dial(url, creds, "web1", fleet.RoleOperator); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("without the CA: %v", err)
	}
	creds.CA = filepath.Join(dir, "missing.pem")
	if _, err := fleet.Dial(url, creds, "web1", fleet.RoleOperator); err == nil || !strings.Contains(err.Error(), "fleet CA") {
		t.Errorf("a missing CA file: %v", err)
	}
}

// TestHugeRequestDoesNotBlock: a request too large for the stream is
// published without its content instead of blocking the backlog.
func TestHugeRequestDoesNotBlock(t *testing.T) {
	url, creds := testNats(t)
	admin, err := fleet.Dial(url, mustCreds(t, creds, "admin"), "admin", fleet.RoleOperator)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.Init(t.Context(), fleet.InitOptions{MaxBytes: 64 << 20}); err != nil {
		t.Fatal(err)
	}
	nc, err := fleet.Connect(url, mustCreds(t, creds, "hosta"), "test", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	h := &Host{nc: nc, js: js, o: HostOptions{Name: "hosta"}, ctx: t.Context()}
	now := time.Now().UTC()
	big := `{"data":"` + strings.Repeat("x", 2<<20) + `"}`
	r := storage.RequestRecord{ID: 1, Subject: "module:m", Operation: "hands.write", Content: json.RawMessage(big), Created: now, Expires: now.Add(time.Hour)}
	if err := h.publish(fleet.KindRequest, "hosta.1.req", fleet.Envelope{Host: "hosta", Seq: 1, At: now, Request: &r}); err != nil {
		t.Fatalf("publishing a 2 MiB request: %v", err)
	}
	v, err := admin.Load(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := v.Request("hosta", 1)
	if !ok || !strings.Contains(string(got.Request.Content), `"truncated":true`) {
		t.Errorf("the fleet has %+v", got.Request)
	}
}

// pidGone: the process is gone, or a zombie its reaper has not got to
// yet (it holds no port or file any more). A server started in the
// background by scripts/nats-test is reparented, and its new parent may
// reap it late.
func pidGone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndex(s, ") ") // the command name may hold ") " itself
	return i >= 0 && strings.HasPrefix(s[i+2:], "Z")
}

// stopPID stops a test's nats-server and waits (at most 10 s) until it
// is gone.
func stopPID(pid int) {
	syscall.Kill(pid, syscall.SIGTERM)
	for i := 0; i < 200 && !pidGone(pid); i++ {
		time.Sleep(50 * time.Millisecond)
	}
	syscall.Kill(pid, syscall.SIGKILL)
}

// TestCountCheckpointsLandOnTheHundreds: the count rule, apart from any
// clock: a timed checkpoint between two hundreds does not move the next
// count checkpoint, and a missing seq moves it to the next one present.
func TestCountCheckpointsLandOnTheHundreds(t *testing.T) {
	for _, c := range []struct {
		seq, lastCP uint64
		due         bool
	}{
		{99, 0, false},
		{100, 0, true},
		{100, 37, true}, // a timed checkpoint at 37 came first
		{99, 37, false},
		{137, 100, false},
		{101, 0, true}, // seq 100 was not there
		{101, 100, false},
		{200, 100, true},
		{250, 199, true},
		{299, 200, false},
	} {
		if got := countCheckpointDue(c.seq, c.lastCP); got != c.due {
			t.Errorf("seq %d after a checkpoint at %d: due %v, want %v", c.seq, c.lastCP, got, c.due)
		}
	}
}
