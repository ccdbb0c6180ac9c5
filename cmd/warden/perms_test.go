package main

import (
	"strings"
	"testing"
	"time"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/engine/perms"
	"github.com/wardenhq/warden/storage"
)

// seedRequests opens requests straight in the store, as a run would have.
func seedRequests(t *testing.T, c *cli, ops ...perms.Op) {
	t.Helper()
	s, err := storage.Open(storage.Options{Dir: c.dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, op := range ops {
		if _, err := s.Update(func(tx *storage.Tx) error {
			_, err := perms.Open(tx, perms.Ask{Op: op, Requester: storage.Requester{Run: "20261129-000000-abcd", Module: "hello", Hook: "greet"}}, time.Now())
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestPermsRequestVerbs(t *testing.T) {
	c := newCLI(t)
	const subj = "hands:/srv/hands/a"
	op := func(operation string, content any) perms.Op {
		o, err := perms.NewOp(subj, operation, content)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	if r := c.ok("perms", "list"); !strings.Contains(r.stdout, "no pending permission requests") {
		t.Fatalf("empty list: %s", r)
	}
	seedRequests(t, c, op(perms.OpExec, []string{"make", "test"}), op(perms.OpWrite, map[string]string{"path": "a.txt"}),
		op(perms.OpRead, "notes.md"), op(perms.OpExec, []string{"rm", "-rf", "build"}))

	r := c.ok("perms", "list")
	for _, want := range []string{"ID", "EXPIRES IN", "pending", subj, "hello/greet", `hands.exec ["make","test"]`, "59m", "warden perms approve"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("perms list lacks %q:\n%s", want, r.stdout)
		}
	}
	r = c.ok("perms", "show", "1")
	for _, want := range []string{"request    1", "digest     " + op(perms.OpExec, []string{"make", "test"}).Digest, "revision   0", "pending", `"make"`} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("perms show lacks %q:\n%s", want, r.stdout)
		}
	}

	// approve-once with no call waiting: one retry claim opens.
	if r := c.ok("perms", "approve", "1", "--reason", "tests only"); !strings.Contains(r.stdout, "request 1 approved once") {
		t.Errorf("approve: %s", r)
	}
	if r := c.ok("perms", "show", "1"); !strings.Contains(r.stdout, "approve-once by local:") || !strings.Contains(r.stdout, "tests only") ||
		!strings.Contains(r.stdout, "claim      open") {
		t.Errorf("show after approve: %s", r)
	}
	// approve-always prints the rule and the new revision.
	r = c.ok("perms", "approve-always", "2")
	if !strings.Contains(r.stdout, "rule added to "+subj+": allow hands.write") || !strings.Contains(r.stdout, "revision 0") {
		t.Errorf("approve-always: %s", r)
	}
	var pol struct {
		Policy engine.Policy `json:"policy"`
	}
	c.json(0, &pol, "perms", "policy", "show", subj)
	if len(pol.Policy.Rules) != 1 || pol.Policy.Rules[0].Operation != perms.OpWrite {
		t.Errorf("policy after approve-always: %+v", pol.Policy)
	}
	// The policy changed since request 3 was made: refused, with what to do.
	r = c.run("perms", "deny", "3", "--reason", "no")
	if r.code != 1 || !strings.Contains(r.stderr, "the policy changed; review again") || !strings.Contains(r.stderr, "warden perms policy show") {
		t.Errorf("stale deny: %s", r)
	}
	// Said once: not "already decided (...): request already decided".
	if r := c.run("perms", "approve", "1"); r.code != 1 || strings.Count(r.stderr, "decided") != 1 || !strings.Contains(r.stderr, "request 1 was already decided (approve-once by local:") {
		t.Errorf("approving twice: %s", r)
	}
	if r := c.run("perms", "approve", "99"); r.code != 1 || !strings.Contains(r.stderr, "no request 99") || !strings.Contains(r.stderr, "warden perms list") || strings.Contains(r.stderr, "not found") {
		t.Errorf("unknown id: %s", r)
	}
	if r := c.run("perms", "deny", "x"); r.code != 2 {
		t.Errorf("bad id: %s", r)
	}

	var all []engine.Request
	c.json(0, &all, "perms", "list", "--all")
	if len(all) != 4 {
		t.Fatalf("list --all: %d requests", len(all))
	}
	// Request 4 was made before the rule too: it is still listed pending
	// first, and its decision is refused as stale.
	if all[0].ID != 4 || all[0].Decision != nil {
		t.Errorf("pending first: %+v", all[0])
	}
	var pending []engine.Request
	c.json(0, &pending, "perms", "list")
	if len(pending) != 1 {
		t.Errorf("pending: %+v", pending)
	}
	r = c.ok("receipts", "list", "--kind", "request.")
	for _, want := range []string{"request.open", "request.decide", "request.refused"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("receipts lack %s:\n%s", want, r.stdout)
		}
	}
	if r := c.ok("receipts", "list", "--kind", "policy.rule"); !strings.Contains(r.stdout, "policy.rule") {
		t.Errorf("no policy.rule receipt:\n%s", r.stdout)
	}
}
