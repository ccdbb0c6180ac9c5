package engine

// The ask gate's outcomes, each reached through a real engine (its
// store, bus and decisions): the test is the operator, deciding through
// the facade as a console does, and the asking call is a run of the kind
// MCPHands makes (a record, no process), or an MCP call.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wardenhq/warden/engine/perms"
	"github.com/wardenhq/warden/storage"
)

// gateRun is a run that asks, without a process: its stream lines stay
// in streamLater, where the test reads them.
func gateRun(e *Engine) *activeRun {
	now := time.Now().UTC()
	return &activeRun{e: e, rec: RunRecord{ID: "gate-run", Module: "testmod", Hook: "h", Actor: string(testActor), Started: now,
		Deadline: now.Add(time.Hour)}, actor: string(testActor), started: now}
}

func gateOp(t *testing.T, content string) perms.Op {
	t.Helper()
	op, err := perms.NewOp(permsSubject, perms.OpExec, content)
	if err != nil {
		t.Fatal(err)
	}
	return op
}

// asking runs a in the background; the answer comes on the channel.
func asking(ctx context.Context, e *Engine, a ask) <-chan answer {
	out := make(chan answer, 1)
	go func() {
		ans, err := e.gate.ask(ctx, a)
		if err != nil {
			ans = answer{decision: storage.Decision{Reason: "store error: " + err.Error()}}
		}
		out <- ans
	}()
	return out
}

func lines(r *activeRun) string {
	var b strings.Builder
	for _, l := range r.streamLater {
		b.WriteString(l.Text + "\n")
	}
	return b.String()
}

func runGateAsk(e *Engine, r *activeRun, op perms.Op) ask {
	return e.runAsk(r, op, func(req Request) askWords {
		return askWords{prompt: "allow?", noOperator: "NOBODY to decide request " + fmt.Sprint(req.ID)}
	})
}

// TestGateApprovedThenByRule: an operator's approve-always lets the
// waiting call through (approved, with its request), and adds the rule
// that lets the identical call through at once, no request asked.
func TestGateApprovedThenByRule(t *testing.T) {
	e := openEngine(t, Options{})
	defer e.AttachOperator()()
	sub := e.Subscribe()
	defer sub.Close()
	r := gateRun(e)
	got := asking(t.Context(), e, runGateAsk(e, r, gateOp(t, "make all")))
	req := nextPending(t, sub)
	if _, _, _, err := e.ApproveAlways(testActor, req.ID, "fine"); err != nil {
		t.Fatal(err)
	}
	ans := <-got
	if ans.outcome != outcomeApproved || ans.req.ID != req.ID || ans.decision.Verdict != ApproveAlways {
		t.Fatalf("approve-always: %v %+v", ans.outcome, ans)
	}
	if !strings.Contains(lines(r), "approve-always by "+string(testActor)+": fine") {
		t.Fatalf("the stream does not say who approved:\n%s", lines(r))
	}
	ans, err := e.gate.ask(t.Context(), runGateAsk(e, r, gateOp(t, "make all")))
	if err != nil || ans.outcome != outcomeApproved || ans.req.ID != 0 || ans.via == "" {
		t.Fatalf("the identical call after the rule: %v %+v %v", ans.outcome, ans, err)
	}
}

// TestGateDenied: an operator's deny is denied, with who and why.
func TestGateDenied(t *testing.T) {
	e := openEngine(t, Options{})
	defer e.AttachOperator()()
	sub := e.Subscribe()
	defer sub.Close()
	r := gateRun(e)
	got := asking(t.Context(), e, runGateAsk(e, r, gateOp(t, "rm -rf /")))
	req := nextPending(t, sub)
	if _, err := e.Deny(testActor, req.ID, "not today"); err != nil {
		t.Fatal(err)
	}
	ans := <-got
	if ans.outcome != outcomeDenied || ans.decision.By != string(testActor) || ans.decision.Reason != "not today" {
		t.Fatalf("deny: %v %+v", ans.outcome, ans)
	}
}

// TestGateExpired: nobody decides before the request's expiry; the
// engine denies it as expired, and the call is told so.
func TestGateExpired(t *testing.T) {
	e := openEngine(t, Options{})
	defer e.AttachOperator()()
	a := mcpAsk(perms.Ask{Op: gateOp(t, "slow"), Requester: storage.Requester{Module: permsSubject, Hook: "t", Session: "s"},
		TTL: 50 * time.Millisecond, Actor: "mcp:x"})
	ans, err := e.gate.ask(t.Context(), a)
	if err != nil || ans.outcome != outcomeExpired || ans.req.ID == 0 {
		t.Fatalf("expiry: %v %+v %v", ans.outcome, ans, err)
	}
	stored, err := e.Request(ans.req.ID)
	if err != nil || stored.Decision == nil || stored.Decision.By != perms.EngineActor || stored.Decision.Reason != reasonExpired {
		t.Fatalf("the stored request: %+v %v", stored, err)
	}
}

// TestGateNoOperator: with nobody attached, a run's request is opened
// and denied at once, and its stream says why (no decision line on top);
// an MCP call with only a standing operator (a serve nobody has opened a
// console on) opens no request at all.
func TestGateNoOperator(t *testing.T) {
	e := openEngine(t, Options{})
	r := gateRun(e)
	ans, err := e.gate.ask(t.Context(), runGateAsk(e, r, gateOp(t, "make all")))
	if err != nil || ans.outcome != outcomeNoOperator || ans.req.ID == 0 {
		t.Fatalf("a run without an operator: %v %+v %v", ans.outcome, ans, err)
	}
	if s := lines(r); s != "NOBODY to decide request "+fmt.Sprint(ans.req.ID)+"\n" {
		t.Fatalf("the stream says:\n%s", s)
	}

	defer e.AttachStandingOperator()()
	a := mcpAsk(perms.Ask{Op: gateOp(t, "other"), Requester: storage.Requester{Module: permsSubject, Hook: "t", Session: "s"}, Actor: "mcp:x"})
	ans, err = e.gate.ask(t.Context(), a)
	if err != nil || ans.outcome != outcomeNoOperator || ans.req.ID != 0 {
		t.Fatalf("an MCP call with only a standing operator: %v %+v %v", ans.outcome, ans, err)
	}
	if g := mcpGate(ans, time.Minute); g.Outcome != MCPNoOperator || g.Request != 0 {
		t.Fatalf("the MCP client is told: %+v", g)
	}
}

// TestGateRefusedAtThePendingLimit: a subject with MaxPendingRequests
// undecided requests gets no more; the call is refused with the rule's
// message, and nobody is asked.
func TestGateRefusedAtThePendingLimit(t *testing.T) {
	e := openEngine(t, Options{})
	defer e.AttachOperator()()
	r := gateRun(e)
	if _, err := e.store.Update(func(tx *storage.Tx) error {
		for i := 0; i < MaxPendingRequests; i++ {
			if _, err := perms.Open(tx, e.runAsk(r, gateOp(t, fmt.Sprint("fill-", i)), nil).Ask, time.Now()); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ans, err := e.gate.ask(t.Context(), runGateAsk(e, r, gateOp(t, "one more")))
	if err != nil || ans.outcome != outcomeRefused || ans.refusal == nil || ans.refusal.Reason != perms.RefusedLimit || ans.req.ID != 0 {
		t.Fatalf("past the pending limit: %v %+v %v", ans.outcome, ans, err)
	}
}

// TestGateRunEnded: the caller's wait ends before a decision; the
// request is closed with the caller's reason, and the outcome says the
// run ended, not that anyone denied it.
func TestGateRunEnded(t *testing.T) {
	e := openEngine(t, Options{})
	defer e.AttachOperator()()
	sub := e.Subscribe()
	defer sub.Close()
	ctx, cancel := context.WithCancel(t.Context())
	got := asking(ctx, e, runGateAsk(e, gateRun(e), gateOp(t, "make all")))
	req := nextPending(t, sub)
	cancel()
	ans := <-got
	if ans.outcome != outcomeRunEnded || ans.req.ID != req.ID || ans.decision.By != perms.EngineActor ||
		ans.decision.Reason != "the run ended before a decision" {
		t.Fatalf("the run ended: %v %+v", ans.outcome, ans)
	}
	if _, err := e.Approve(testActor, req.ID, ""); err == nil {
		t.Fatal("a request whose run ended can still be approved")
	}
}

// TestGateAsksAgainWhenSuperseded: the policy changes while a call
// waits; the operator's decision on the old request is refused (stale),
// the gate asks again under the new policy, and the new request's
// approval lets the call through.
func TestGateAsksAgainWhenSuperseded(t *testing.T) {
	e := openEngine(t, Options{})
	defer e.AttachOperator()()
	sub := e.Subscribe()
	defer sub.Close()
	got := asking(t.Context(), e, runGateAsk(e, gateRun(e), gateOp(t, "make all")))
	first := nextPending(t, sub)
	p, _, err := e.Policy(permsSubject)
	if err != nil {
		t.Fatal(err)
	}
	other := gateOp(t, "something else")
	p.Rules = append(p.Rules, Rule{Operation: other.Operation, Digest: other.Digest, Summary: "something else"})
	if _, err := e.SetPolicy(testActor, p, p.Revision); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Approve(testActor, first.ID, ""); err == nil {
		t.Fatal("an approval against the old policy went through")
	}
	second := nextPending(t, sub)
	if second.ID == first.ID {
		t.Fatalf("asked again with the same request %d", first.ID)
	}
	if _, err := e.Approve(testActor, second.ID, ""); err != nil {
		t.Fatal(err)
	}
	if ans := <-got; ans.outcome != outcomeApproved || ans.req.ID != second.ID {
		t.Fatalf("after asking again: %v %+v", ans.outcome, ans)
	}
}
