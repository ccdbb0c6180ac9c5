package perms

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wardenhq/warden/storage"
)

const subject = "hands:/srv/hands/a"

func openStore(t *testing.T) *storage.Store {
	t.Helper()
	s, err := storage.Open(storage.Options{Dir: filepath.Join(t.TempDir(), "data"), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func mustOp(t *testing.T, subj, operation string, content any) Op {
	t.Helper()
	op, err := NewOp(subj, operation, content)
	if err != nil {
		t.Fatal(err)
	}
	return op
}

var requester = storage.Requester{Run: "run1", Module: "m", Hook: "h"}

// update runs fn in a write transaction; a *Refusal is committed (its
// receipt) and returned.
func update(t *testing.T, s *storage.Store, fn func(tx *storage.Tx) error) error {
	t.Helper()
	var refused *Refusal
	_, err := s.Update(func(tx *storage.Tx) error {
		refused = nil
		err := fn(tx)
		if errors.As(err, &refused) {
			return nil
		}
		return err
	})
	if err != nil {
		return err
	}
	if refused != nil {
		return refused
	}
	return nil
}

func open(t *testing.T, s *storage.Store, op Op, now time.Time) (storage.RequestRecord, error) {
	t.Helper()
	var req storage.RequestRecord
	err := update(t, s, func(tx *storage.Tx) error {
		var err error
		req, err = Open(tx, Ask{Op: op, Requester: requester}, now)
		return err
	})
	return req, err
}

func decide(t *testing.T, s *storage.Store, id uint64, verdict string, now time.Time, consumer string) (Decided, error) {
	t.Helper()
	var d Decided
	err := update(t, s, func(tx *storage.Tx) error {
		var err error
		d, err = Decide(tx, id, verdict, "local:op", "because", now, consumer)
		return err
	})
	return d, err
}

func check(t *testing.T, s *storage.Store, op Op, run string) (bool, string) {
	t.Helper()
	var ok bool
	var via string
	if err := update(t, s, func(tx *storage.Tx) error {
		var err error
		ok, via, err = Check(tx, op, run, time.Now())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return ok, via
}

func receipts(t *testing.T, s *storage.Store, kind string) []storage.Receipt {
	t.Helper()
	var rs []storage.Receipt
	s.View(func(tx *storage.Tx) error {
		var err error
		rs, err = tx.Receipts(storage.ReceiptFilter{Kind: kind})
		return err
	})
	return rs
}

func setPolicy(t *testing.T, s *storage.Store, p storage.PolicyRecord, expected uint64) (storage.PolicyRecord, error) {
	t.Helper()
	var out storage.PolicyRecord
	err := update(t, s, func(tx *storage.Tx) error {
		var err error
		out, err = SetPolicy(tx, "local:op", p, expected, time.Now())
		return err
	})
	return out, err
}

func TestDigestIsCanonical(t *testing.T) {
	a := mustOp(t, subject, OpExec, map[string]any{"root": "/w", "argv": []string{"ls", "-l"}})
	b := mustOp(t, subject, OpExec, json.RawMessage(`{ "argv" : ["ls","-l"], "root":"/w" }`))
	if a.Digest != b.Digest || string(a.Content) != string(b.Content) {
		t.Fatalf("same operation, different digests: %s %s / %s %s", a.Digest, a.Content, b.Digest, b.Content)
	}
	c := mustOp(t, subject, OpExec, map[string]any{"root": "/w", "argv": []string{"ls", "-la"}})
	d := mustOp(t, subject, OpRead, map[string]any{"root": "/w", "argv": []string{"ls", "-l"}})
	if c.Digest == a.Digest || d.Digest == a.Digest {
		t.Fatal("different operations share a digest")
	}
	if len(a.Digest) != 64 {
		t.Fatalf("digest %q", a.Digest)
	}
	if _, err := NewOp("nobody", OpExec, 1); err == nil {
		t.Fatal("a bad subject was accepted")
	}
}

func TestEvaluate(t *testing.T) {
	for _, tc := range []struct {
		op  string
		set func(*storage.PolicyRecord)
	}{
		{OpRead, func(p *storage.PolicyRecord) { p.Workspace.Read = true }},
		{OpWrite, func(p *storage.PolicyRecord) { p.Workspace.Write = true }},
		{OpExec, func(p *storage.PolicyRecord) { p.Execute = true }},
		{OpNetwork, func(p *storage.PolicyRecord) { p.Network = true }},
	} {
		op := mustOp(t, subject, tc.op, "x")
		p := storage.PolicyRecord{Subject: subject}
		if ok, via := Evaluate(p, op); ok {
			t.Errorf("%s allowed by an empty policy (%s)", tc.op, via)
		}
		tc.set(&p)
		if ok, via := Evaluate(p, op); !ok || via == "" {
			t.Errorf("%s not allowed by its switch", tc.op)
		}
		// Only its own switch: every other operation stays denied.
		for _, other := range []string{OpRead, OpWrite, OpExec, OpNetwork} {
			if other != tc.op {
				if ok, _ := Evaluate(p, mustOp(t, subject, other, "x")); ok {
					t.Errorf("the %s switch allows %s", tc.op, other)
				}
			}
		}
	}
	op := mustOp(t, subject, OpExec, []string{"make"})
	p := storage.PolicyRecord{Subject: subject, Rules: []storage.Rule{{Operation: OpExec, Digest: op.Digest}}}
	if ok, via := Evaluate(p, op); !ok || !strings.Contains(via, "rule") {
		t.Errorf("exact rule: %v %s", ok, via)
	}
	if ok, _ := Evaluate(p, mustOp(t, subject, OpExec, []string{"make", "install"})); ok {
		t.Error("a rule allowed a different command")
	}
	if ok, _ := Evaluate(p, mustOp(t, subject, OpRead, []string{"make"})); ok {
		t.Error("a rule allowed a different operation")
	}
	if ok, _ := Evaluate(p, mustOp(t, "hands:/other", OpExec, []string{"make"})); ok {
		t.Error("a policy allowed another subject's operation")
	}
	if ok, _ := Evaluate(storage.PolicyRecord{Subject: "module:m", Network: true, Execute: true}, mustOp(t, "module:m", OpConfirm, "q")); ok {
		t.Error("a policy allowed an operator question")
	}
}

func TestApproveOnceClaimOnlyIdenticalOnce(t *testing.T) {
	s := openStore(t)
	op := mustOp(t, subject, OpExec, []string{"rm", "-rf", "build"})
	req, err := open(t, s, op, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// No call waits: the decision leaves one claim open.
	d, err := decide(t, s, req.ID, storage.ApproveOnce, time.Now(), "")
	if err != nil {
		t.Fatal(err)
	}
	if d.Request.Claim == nil || d.Request.Claim.Used {
		t.Fatalf("claim after approve-once: %+v", d.Request.Claim)
	}
	// Neither a different command, nor the same one of another subject.
	if ok, _ := check(t, s, mustOp(t, subject, OpExec, []string{"rm", "-rf", "/"}), "run2"); ok {
		t.Fatal("a different operation consumed the claim")
	}
	if ok, _ := check(t, s, mustOp(t, "hands:/other", OpExec, []string{"rm", "-rf", "build"}), "run2"); ok {
		t.Fatal("another subject consumed the claim")
	}
	ok, via := check(t, s, op, "run2")
	if !ok || !strings.Contains(via, fmt.Sprint(req.ID)) {
		t.Fatalf("the identical retry: %v %q", ok, via)
	}
	if ok, _ := check(t, s, op, "run3"); ok {
		t.Fatal("the claim was consumed twice")
	}
	var got storage.RequestRecord
	s.View(func(tx *storage.Tx) error { got, err = tx.Request(req.ID); return err })
	if got.Claim == nil || !got.Claim.Used || got.Claim.By != "run2" {
		t.Fatalf("stored claim %+v", got.Claim)
	}
	if len(receipts(t, s, "request.claim")) != 1 {
		t.Fatal("consuming the claim left no receipt")
	}

	// With a waiting call, the claim goes to it in the decision itself.
	req2, _ := open(t, s, op, time.Now())
	d, err = decide(t, s, req2.ID, storage.ApproveOnce, time.Now(), "run4")
	if err != nil || d.Request.Claim == nil || !d.Request.Claim.Used || d.Request.Claim.By != "run4" {
		t.Fatalf("claim of a waited-on decision: %+v %v", d.Request.Claim, err)
	}
	if ok, _ := check(t, s, op, "run5"); ok {
		t.Fatal("a claim consumed by the waiting call was consumed again")
	}
	if _, err := decide(t, s, req2.ID, storage.Deny, time.Now(), ""); !errors.Is(err, ErrAlreadyDecided) {
		t.Fatalf("deciding twice: %v", err)
	}
}

func TestApproveAlwaysAddsExactRule(t *testing.T) {
	s := openStore(t)
	if _, err := setPolicy(t, s, storage.PolicyRecord{Subject: subject, Workspace: storage.Workspace{Read: true}}, 0); err != nil {
		t.Fatal(err)
	}
	op := mustOp(t, subject, OpWrite, map[string]string{"path": "a.txt", "content": "x"})
	req, _ := open(t, s, op, time.Now())
	d, err := decide(t, s, req.ID, storage.ApproveAlways, time.Now(), "")
	if err != nil {
		t.Fatal(err)
	}
	if d.Rule == nil || d.Rule.Digest != op.Digest || d.Policy.Revision != 1 || len(d.Policy.Rules) != 1 {
		t.Fatalf("approve-always: rule %+v policy %+v", d.Rule, d.Policy)
	}
	if d.Request.Claim != nil {
		t.Fatal("approve-always issued a claim")
	}
	for i := 0; i < 3; i++ {
		if ok, via := check(t, s, op, "r"); !ok || !strings.Contains(via, "rule") {
			t.Fatalf("identical call %d after approve-always: %v %s", i, ok, via)
		}
	}
	if ok, _ := check(t, s, mustOp(t, subject, OpWrite, map[string]string{"path": "a.txt", "content": "y"}), "r"); ok {
		t.Fatal("approve-always let a different content through")
	}
	if rs := receipts(t, s, "policy.rule"); len(rs) != 1 {
		t.Fatalf("policy.rule receipts: %d", len(rs))
	}
	// Operator questions take no rules.
	q, _ := open(t, s, mustOp(t, "module:m", OpConfirm, map[string]string{"message": "ok?"}), time.Now())
	if _, err := decide(t, s, q.ID, storage.ApproveAlways, time.Now(), ""); err == nil {
		t.Fatal("approve-always of a question was accepted")
	}
}

func TestPendingLimit(t *testing.T) {
	s := openStore(t)
	now := time.Now()
	for i := 0; i < MaxPending; i++ {
		if _, err := open(t, s, mustOp(t, subject, OpExec, []int{i}), now); err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
	}
	// Another subject is not affected.
	if _, err := open(t, s, mustOp(t, "hands:/other", OpExec, 0), now); err != nil {
		t.Fatal(err)
	}
	_, err := open(t, s, mustOp(t, subject, OpExec, 99), now)
	var r *Refusal
	if !errors.As(err, &r) || r.Reason != RefusedLimit || !strings.Contains(err.Error(), "32") || !strings.Contains(err.Error(), "warden perms list") {
		t.Fatalf("33rd request: %v", err)
	}
	rs := receipts(t, s, "request.refused")
	if len(rs) != 1 || !strings.Contains(string(rs[0].Details), `"reason":"limit"`) {
		t.Fatalf("refusal receipts: %+v", rs)
	}
	var n int
	s.View(func(tx *storage.Tx) error { all, _ := tx.Requests(0); n = len(all); return nil })
	if n != MaxPending+1 {
		t.Fatalf("%d requests stored, want %d", n, MaxPending+1)
	}
	// Deciding one makes room.
	if _, err := decide(t, s, 1, storage.Deny, now, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := open(t, s, mustOp(t, subject, OpExec, 99), now); err != nil {
		t.Fatalf("after a decision: %v", err)
	}
	// Expired requests do not count: they are decided "expired".
	later := now.Add(2 * DefaultTTL)
	if _, err := open(t, s, mustOp(t, subject, OpExec, 100), later); err != nil {
		t.Fatalf("after expiry: %v", err)
	}
	var exp storage.RequestRecord
	s.View(func(tx *storage.Tx) error { exp, _ = tx.Request(2); return nil })
	if d := exp.Decision; d == nil || d.Verdict != storage.Deny || d.By != EngineActor || d.Reason != "expired" {
		t.Fatalf("expired request: %+v", exp.Decision)
	}
}

func TestExpiryBoundAndExpiredDecision(t *testing.T) {
	s := openStore(t)
	now := time.Now()
	var req storage.RequestRecord
	update(t, s, func(tx *storage.Tx) error {
		var err error
		req, err = Open(tx, Ask{Op: mustOp(t, subject, OpRead, "f"), Requester: requester, Deadline: now.Add(time.Minute)}, now)
		return err
	})
	if !req.Expires.Equal(now.Add(time.Minute).UTC()) {
		t.Fatalf("expires %s, want the run's deadline %s", req.Expires, now.Add(time.Minute))
	}
	update(t, s, func(tx *storage.Tx) error {
		var err error
		req, err = Open(tx, Ask{Op: mustOp(t, subject, OpRead, "g"), Requester: requester, Deadline: now.Add(3 * time.Hour)}, now)
		return err
	})
	if !req.Expires.Equal(now.Add(DefaultTTL).UTC()) {
		t.Fatalf("expires %s, want created + 1h", req.Expires)
	}
	_, err := decide(t, s, req.ID, storage.ApproveOnce, now.Add(DefaultTTL+time.Second), "")
	var r *Refusal
	if !errors.As(err, &r) || r.Reason != RefusedExpired {
		t.Fatalf("deciding an expired request: %v", err)
	}
	var got storage.RequestRecord
	s.View(func(tx *storage.Tx) error { got, _ = tx.Request(req.ID); return nil })
	if got.Decision == nil || got.Decision.Verdict != storage.Deny || got.Decision.Reason != "expired" {
		t.Fatalf("stored: %+v", got.Decision)
	}
}

func TestStaleRevisionRefused(t *testing.T) {
	s := openStore(t)
	p, err := setPolicy(t, s, storage.PolicyRecord{Subject: subject}, 0)
	if err != nil {
		t.Fatal(err)
	}
	op := mustOp(t, subject, OpExec, []string{"make"})
	req, _ := open(t, s, op, time.Now())
	if req.Revision != p.Revision {
		t.Fatalf("request revision %d, policy %d", req.Revision, p.Revision)
	}
	p.Workspace.Read = true
	if _, err := setPolicy(t, s, p, p.Revision); err != nil {
		t.Fatal(err)
	}
	_, err = decide(t, s, req.ID, storage.ApproveAlways, time.Now(), "")
	var r *Refusal
	if !errors.As(err, &r) || r.Reason != RefusedStale || !strings.Contains(err.Error(), "the policy changed; review again") {
		t.Fatalf("stale decision: %v", err)
	}
	if rs := receipts(t, s, "request.refused"); len(rs) != 1 {
		t.Fatalf("stale refusal receipts: %d", len(rs))
	}
	// Nothing was added to the policy, and the request is closed.
	var cur storage.PolicyRecord
	var got storage.RequestRecord
	s.View(func(tx *storage.Tx) error {
		cur, _, _ = tx.Policy(subject)
		got, _ = tx.Request(req.ID)
		return nil
	})
	if len(cur.Rules) != 0 || cur.Revision != 1 {
		t.Fatalf("policy after a refused decision: %+v", cur)
	}
	if got.Decision == nil || got.Decision.By != EngineActor || !strings.Contains(got.Decision.Reason, "superseded") {
		t.Fatalf("stale request: %+v", got.Decision)
	}

	// A request made before a subject's first policy is stale too, even
	// though the first policy is at revision 0 like no policy at all.
	other := "hands:/fresh"
	req, _ = open(t, s, mustOp(t, other, OpRead, "x"), time.Now())
	if _, err := setPolicy(t, s, storage.PolicyRecord{Subject: other}, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := decide(t, s, req.ID, storage.ApproveOnce, time.Now(), ""); !errors.As(err, &r) || r.Reason != RefusedStale {
		t.Fatalf("decision after the first policy: %v", err)
	}
}

func TestPolicyCASConflict(t *testing.T) {
	s := openStore(t)
	p, err := setPolicy(t, s, storage.PolicyRecord{Subject: subject}, 0)
	if err != nil {
		t.Fatal(err)
	}
	a, b := p, p
	a.Execute, b.Network = true, true
	if _, err := setPolicy(t, s, a, p.Revision); err != nil {
		t.Fatal(err)
	}
	_, err = setPolicy(t, s, b, p.Revision)
	var ce *storage.ConflictError
	if !errors.As(err, &ce) || ce.Expected != 0 || ce.Actual != 1 || !strings.Contains(err.Error(), "revision 0") || !strings.Contains(err.Error(), "revision 1") {
		t.Fatalf("second writer: %v", err)
	}
	var cur storage.PolicyRecord
	s.View(func(tx *storage.Tx) error { cur, _, _ = tx.Policy(subject); return nil })
	if !cur.Execute || cur.Network {
		t.Fatalf("the losing write landed: %+v", cur)
	}
	if rs := receipts(t, s, "policy.set"); len(rs) != 2 {
		t.Fatalf("policy.set receipts: %d", len(rs))
	}
}

func TestRequestImmutable(t *testing.T) {
	s := openStore(t)
	req, _ := open(t, s, mustOp(t, subject, OpRead, "x"), time.Now())
	req.Content = json.RawMessage(`"y"`)
	_, err := s.Update(func(tx *storage.Tx) error { return tx.PutRequest(req) })
	if err == nil || !strings.Contains(err.Error(), "immutable") {
		t.Fatalf("rewriting a request's content: %v", err)
	}
}
