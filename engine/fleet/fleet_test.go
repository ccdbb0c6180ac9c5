package fleet

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wardenhq/warden/storage"
)

func TestCheckpointSignature(t *testing.T) {
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	otherPub, _, _ := ed25519.GenerateKey(rand.Reader)
	cp := Checkpoint{At: time.Now().UTC(), Hash: strings.Repeat("ab", 32), Host: "web1", Seq: 100}
	sc := Sign(cp, key)
	if !sc.Verify(pub) {
		t.Fatal("a checkpoint does not verify with its own key")
	}
	if sc.Verify(otherPub) {
		t.Error("a checkpoint verifies with another host's key")
	}
	for name, mut := range map[string]func(*SignedCheckpoint){
		"seq":  func(s *SignedCheckpoint) { s.Seq++ },
		"hash": func(s *SignedCheckpoint) { s.Hash = strings.Repeat("cd", 32) },
		"host": func(s *SignedCheckpoint) { s.Host = "web2" },
		"at":   func(s *SignedCheckpoint) { s.At = s.At.Add(time.Second) },
		"sig":  func(s *SignedCheckpoint) { s.Sig = "AAAA" },
	} {
		c := sc
		mut(&c)
		if c.Verify(pub) {
			t.Errorf("a checkpoint with its %s changed still verifies", name)
		}
	}
	// The wire form round-trips and still verifies.
	b, _ := json.Marshal(sc)
	var back SignedCheckpoint
	if err := json.Unmarshal(b, &back); err != nil || !back.Verify(pub) {
		t.Errorf("round trip: %v %s", err, b)
	}
}

func env(t *testing.T, e Envelope) []byte {
	t.Helper()
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestViewFolds(t *testing.T) {
	now := time.Now().UTC()
	req := storage.RequestRecord{ID: 7, Subject: "module:m", Operation: "operator.confirm", Content: json.RawMessage(`{"message":"ok?"}`),
		Created: now, Expires: now.Add(time.Hour)}
	decided := req
	decided.Decision = &storage.Decision{Verdict: storage.ApproveOnce, By: "fleet:alice", At: now}
	v := NewView()
	// The decision (seq 12) arrives before the opening (seq 10): the
	// newer state stays.
	v.Add(EventSubject("web1", KindRequest), env(t, Envelope{Host: "web1", Seq: 12, Request: &decided}))
	v.Add(EventSubject("web1", KindRequest), env(t, Envelope{Host: "web1", Seq: 10, Request: &req}))
	got, ok := v.Request("web1", 7)
	if !ok || got.Request.Decision == nil || got.Seq != 12 {
		t.Fatalf("out-of-order fold: %+v", got)
	}
	// A second delivery is counted and changes nothing.
	v.Add(EventSubject("web1", KindRequest), env(t, Envelope{Host: "web1", Seq: 12, Request: &decided}))
	if v.Duplicates() != 1 {
		t.Errorf("duplicates %d, want 1", v.Duplicates())
	}
	// The same request id on another host is another request.
	v.Add(EventSubject("web2", KindRequest), env(t, Envelope{Host: "web2", Seq: 3, Request: &req}))
	if rs := v.Requests(false, now); len(rs) != 1 || rs[0].Host != "web2" {
		t.Errorf("pending: %+v", rs)
	}
	if rs := v.Requests(true, now); len(rs) != 2 {
		t.Errorf("all: %+v", rs)
	}
	// A payload claiming another host than its subject is not believed.
	spoof := req
	spoof.ID = 99
	v.Add(EventSubject("web2", KindRequest), env(t, Envelope{Host: "web1", Seq: 50, Request: &spoof}))
	if _, ok := v.Request("web1", 99); ok {
		t.Error("a host published a request under another host's name")
	}
	if _, ok := v.Request("web2", 99); ok {
		t.Error("a mislabelled event was folded")
	}
	// Checkpoints come back in seq order; the newest is the last.
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	for _, seq := range []uint64{200, 100} {
		sc := Sign(Checkpoint{At: now, Hash: strings.Repeat("0", 64), Host: "web1", Seq: seq}, key)
		v.Add(EventSubject("web1", KindCheckpoint), env(t, Envelope{Host: "web1", Seq: seq, Checkpoint: &sc}))
	}
	if cps := v.Checkpoints("web1"); len(cps) != 2 || cps[0].Seq != 100 || v.LastCheckpoint("web1").Seq != 200 {
		t.Errorf("checkpoints %+v", cps)
	}
}

func TestVerifyRefusesUnpinnedOrForeignSignatures(t *testing.T) {
	pub, key, _ := ed25519.GenerateKey(rand.Reader)
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	c := &Client{}
	cps := []SignedCheckpoint{Sign(Checkpoint{At: time.Now(), Hash: strings.Repeat("0", 64), Host: "web1", Seq: 1}, key),
		Sign(Checkpoint{At: time.Now(), Hash: strings.Repeat("1", 64), Host: "web1", Seq: 2}, other)}
	pinned := encodeKey(pub)
	if v := c.verifyHost(t.Context(), "web1", pinned, cps, nil); v.Status != "key-refused" || v.BadSeq != 2 {
		t.Errorf("a checkpoint signed by another key: %+v", v)
	}
	if v := c.verifyHost(t.Context(), "web1", "", cps[:1], nil); v.Status != "key-refused" {
		t.Errorf("no pinned key: %+v", v)
	}
	if v := c.verifyHost(t.Context(), "web1", pinned, nil, nil); v.Status != "unverified" {
		t.Errorf("no checkpoints: %+v", v)
	}
}

func TestLoadCreds(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(text), mode)
		os.Chmod(p, mode)
		return p
	}
	c, err := LoadCreds(write("up", "hostb:s3cret:with:colons\n", 0o600))
	if err != nil || c.User != "hostb" || c.password != "s3cret:with:colons" {
		t.Errorf("user:password: %+v %v", c, err)
	}
	if _, err := LoadCreds(write("open", "hostb:x\n", 0o640)); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("group-readable: %v", err)
	}
	if _, err := LoadCreds(write("junk", "just words\n", 0o600)); err == nil || !strings.Contains(err.Error(), "not a NATS creds file") {
		t.Errorf("junk: %v", err)
	}
	if c, err := LoadCreds(write("seed", "SUAIBDPBAUTWCWBKIO6XHQNINK5FWJW4OHLXC3HQ2KFE4PEJUA44CNHTC4\n", 0o600)); err != nil || c.seed == nil {
		t.Errorf("nkey seed: %+v %v", c, err)
	}
	if _, err := LoadCreds(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "--fleet-creds") {
		t.Errorf("missing: %v", err)
	}
	for url, ok := range map[string]bool{"nats://127.0.0.1:4222": true, "nats://localhost:4222": true, "tls://nats.example:4222": true,
		"nats://nats.example:4222": false, "nats://127.0.0.1:4222,nats://10.0.0.2:4222": false} {
		if err := plainOK(url); (err == nil) != ok {
			t.Errorf("plainOK(%s) = %v", url, err)
		}
	}
}

func TestValidName(t *testing.T) {
	for s, ok := range map[string]bool{"web1": true, "web-1_a": true, "": false, "a.b": false, "a*": false, "a>": false, "a b": false,
		strings.Repeat("a", 64): true, strings.Repeat("a", 65): false, "é": false} {
		if ValidName(s) != ok {
			t.Errorf("ValidName(%q) != %v", s, ok)
		}
	}
}

func FuzzDecodeDecision(f *testing.F) {
	for _, s := range []string{`{"request":1,"verdict":"approve-once"}`, `{"request":2,"verdict":"deny","reason":"no"}`,
		`{"request":0,"verdict":"deny"}`, `{"request":1,"verdict":"maybe"}`, `{"request":1,"verdict":"deny","by":"alice"}`, `[]`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := DecodeDecision(b)
		if err != nil {
			return
		}
		if d.Request == 0 || (d.Verdict != storage.ApproveOnce && d.Verdict != storage.ApproveAlways && d.Verdict != storage.Deny) {
			t.Fatalf("accepted %q as %+v", b, d)
		}
	})
}

func FuzzViewAdd(f *testing.F) {
	f.Add("warden.host.web1.evt.req", []byte(`{"host":"web1","seq":1,"request":{"id":1}}`))
	f.Add("warden.host.web1.evt.cp", []byte(`{"host":"web1","seq":1,"checkpoint":{"seq":1,"hash":"x","host":"web1","sig":"AA=="}}`))
	f.Add("warden.host.web1.evt.run", []byte(`{"host":"web1","seq":2,"run":{"id":"r"}}`))
	f.Add("warden.host.web1.evt.req", []byte(`{"host":"web2","seq":1}`))
	f.Fuzz(func(t *testing.T, subject string, data []byte) {
		v := NewView()
		v.Add(subject, data)
		v.Add(subject, data)
		for _, h := range v.HostNames() {
			if !ValidName(h) {
				t.Fatalf("host name %q from subject %q", h, subject)
			}
			v.Checkpoints(h)
			v.PendingOn(h, time.Now())
		}
		v.Requests(true, time.Now())
		v.Runs(0)
	})
}

// TestViewBounded: a live view keeps each host's newest checkpoint only,
// and Prune forgets what ended before the cutoff but never a pending
// request.
func TestViewBounded(t *testing.T) {
	now := time.Now().UTC()
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	v := NewLiveView()
	for _, seq := range []uint64{100, 300, 200} {
		sc := Sign(Checkpoint{At: now, Hash: strings.Repeat("0", 64), Host: "web1", Seq: seq}, key)
		v.Add(EventSubject("web1", KindCheckpoint), env(t, Envelope{Host: "web1", Seq: seq, At: now, Checkpoint: &sc}))
	}
	if cps := v.Checkpoints("web1"); len(cps) != 1 || cps[0].Seq != 300 {
		t.Errorf("live view checkpoints: %+v", cps)
	}
	old := now.Add(-48 * time.Hour)
	mk := func(id uint64, created time.Time, decided bool) storage.RequestRecord {
		r := storage.RequestRecord{ID: id, Subject: "module:m", Operation: "operator.confirm", Content: json.RawMessage(`{}`),
			Created: created, Expires: created.Add(time.Hour)}
		if decided {
			r.Decision = &storage.Decision{Verdict: storage.Deny, By: "engine", At: created.Add(time.Minute)}
		}
		return r
	}
	for i, r := range []storage.RequestRecord{mk(1, old, true), mk(2, now, true), mk(3, now, false), mk(4, old, false)} {
		v.Add(EventSubject("web1", KindRequest), env(t, Envelope{Host: "web1", Seq: uint64(10 + i), At: r.Created, Request: &r}))
	}
	v.Prune(now.Add(-24 * time.Hour))
	for id, kept := range map[uint64]bool{1: false, 2: true, 3: true, 4: false} { // 4 expired 47 h ago
		if _, ok := v.Request("web1", id); ok != kept {
			t.Errorf("request %d kept=%v after the prune", id, ok)
		}
	}
	// A redelivery of a pruned event is folded again, not miscounted.
	r1 := mk(1, old, true)
	v.Add(EventSubject("web1", KindRequest), env(t, Envelope{Host: "web1", Seq: 10, At: old, Request: &r1}))
	if v.Duplicates() != 0 {
		t.Errorf("duplicates %d", v.Duplicates())
	}
}

func encodeKey(pub ed25519.PublicKey) string { return base64.StdEncoding.EncodeToString(pub) }
