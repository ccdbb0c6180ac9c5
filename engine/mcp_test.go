package engine

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/wardenhq/warden/engine/perms"
	"github.com/wardenhq/warden/storage"
)

// TestGateMCPNeedsAConsole: a standing attachment (`serve --ssh` with no
// session open) does not count as an operator for an MCP call, which is
// refused at once; a console's attachment does, and the call waits.
func TestGateMCPNeedsAConsole(t *testing.T) {
	e := openEngine(t, Options{})
	call := MCPCall{Client: "Agent X", Session: "s", Tool: "m__h", Arguments: json.RawMessage(`{"a":1}`), TTL: time.Minute}
	standing := e.AttachStandingOperator()
	defer standing()
	g, err := e.GateMCP(context.Background(), "local:test", call)
	if err != nil || g.Allowed || g.Outcome != MCPNoOperator || !strings.Contains(g.Message, "no operator is attached to answer") {
		t.Fatalf("with only a standing operator: %+v %v", g, err)
	}
	detach := e.AttachOperator()
	defer detach()
	done := make(chan MCPGate, 1)
	go func() {
		g, _ := e.GateMCP(context.Background(), "local:test", call)
		done <- g
	}()
	var id uint64
	for id == 0 {
		rs, _ := e.Requests(RequestFilter{})
		for _, r := range rs {
			if r.Subject == "mcp:agent-x" {
				id = r.ID
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := e.Deny("local:test", id, "no thanks"); err != nil {
		t.Fatal(err)
	}
	if g := <-done; g.Outcome != MCPDenied || g.Message != "denied by local:test: no thanks (request "+itoa(id)+")" {
		t.Errorf("denied: %+v", g)
	}
}

func itoa(n uint64) string { b, _ := json.Marshal(n); return string(b) }

func TestShortTTL(t *testing.T) {
	for d, want := range map[time.Duration]string{5 * time.Minute: "5m", time.Second: "1s", 90 * time.Second: "1m30s", time.Hour: "1h", 2*time.Hour + 5*time.Minute: "2h5m"} {
		if got := shortTTL(d); got != want {
			t.Errorf("%s: %q, want %q", d, got, want)
		}
	}
}

// TestMCPDecisionBeforeTheWaiter: a request decided between being stored
// and its waiter registering (a console or CLI that saw it at once) woke
// nobody; the call must take the stored decision, not wait for its
// expiry or report that no operator is attached.
func TestMCPDecisionBeforeTheWaiter(t *testing.T) {
	e := openEngine(t, Options{})
	call := MCPCall{Client: "Agent X", Session: "s", Tool: "m__h", Arguments: json.RawMessage(`{"a":1}`), TTL: time.Minute}
	op, err := perms.NewOp(MCPSubject(call.Client), perms.OpMCPCall, map[string]any{"tool": call.Tool, "arguments": call.Arguments})
	if err != nil {
		t.Fatal(err)
	}
	var req Request
	pa := perms.Ask{Op: op, Requester: storage.Requester{Module: op.Subject, Hook: call.Tool, Client: op.Subject, Session: call.Session},
		TTL: time.Minute, Actor: op.Subject}
	if _, err := e.store.Update(func(tx *storage.Tx) (err error) {
		req, err = perms.Open(tx, pa, time.Now())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	detach := e.AttachOperator()
	if _, err := e.Approve("local:test", req.ID, ""); err != nil {
		t.Fatal(err)
	}
	detach() // nobody left to answer: only the stored decision can
	ans, again := e.gate.await(context.Background(), mcpAsk(pa), req, askWords{})
	g := mcpGate(ans, time.Minute)
	if again || !g.Allowed || g.Outcome != MCPAllowed || !strings.Contains(g.Via, "by local:test") {
		t.Fatalf("an early approval: %+v (again %v)", g, again)
	}
}

// TestMCPRunsNeedTheGatesTicket: a run or hands call that claims an MCP
// client must bring the ticket GateMCP gave for that very call; what let
// it through is the ticket's, not the relay's word, and a ticket is good
// once. Without one, nothing runs.
func TestMCPRunsNeedTheGatesTicket(t *testing.T) {
	e := setupScripts(t, Options{}, map[string]string{"ok.sh": "#!/bin/sh\nexit 0\n"},
		map[string]string{"ok": "    run: [./ok.sh]\n", "other": "    run: [./ok.sh]\n"})
	subject := MCPSubject("Agent")
	rule, err := MCPToolRule(MCPToolName("testmod", "ok"))
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := e.Policy(subject)
	if err != nil {
		t.Fatal(err)
	}
	p.Rules = append(p.Rules, rule)
	if _, err := e.SetPolicy(testActor, p, p.Revision); err != nil {
		t.Fatal(err)
	}
	run := func(req RunRequest) (RunRecord, error) {
		req.Module, req.Jail = "testmod", JailOff
		if req.Hook == "" {
			req.Hook = "ok"
		}
		h, err := e.StartRun(testActor, req)
		if err != nil {
			return RunRecord{}, err
		}
		return h.Wait().Run, nil
	}
	for name, req := range map[string]RunRequest{
		"no ticket":      {Client: "Agent", Session: "s1"},
		"made-up ticket": {Client: "Agent", Session: "s1", Ticket: "0123456789abcdef0123456789abcdef"},
		"session only":   {Session: "s1"},
	} {
		if _, err := run(req); err == nil || !strings.Contains(err.Error(), "needs the ticket GateMCP gave") {
			t.Errorf("%s: %v, want the run refused for want of a ticket", name, err)
		}
	}

	gate := func() MCPGate {
		g, err := e.GateMCP(context.Background(), testActor, MCPCall{Client: "Agent", Session: "s1", Tool: MCPToolName("testmod", "ok"), TTL: time.Minute})
		if err != nil || !g.Allowed || g.Ticket == "" {
			t.Fatalf("gate by the rule: %+v, %v", g, err)
		}
		return g
	}
	// A ticket is for its client, session and tool only.
	g := gate()
	for name, req := range map[string]RunRequest{
		"another client":  {Client: "Other", Session: "s1", Ticket: g.Ticket},
		"another session": {Client: "Agent", Session: "s2", Ticket: g.Ticket},
		"another hook":    {Client: "Agent", Session: "s1", Ticket: g.Ticket, Hook: "other"},
	} {
		if _, err := run(req); err == nil {
			t.Errorf("%s: the ticket was taken", name)
		}
	}
	rec, err := run(RunRequest{Client: "Agent", Session: "s1", Ticket: g.Ticket})
	if err != nil || rec.Actor != subject || rec.Status != "succeeded" {
		t.Fatalf("the gated run: %+v, %v", rec, err)
	}
	if _, err := run(RunRequest{Client: "Agent", Session: "s1", Ticket: g.Ticket}); err == nil {
		t.Error("a ticket was good twice")
	}
	// The run's receipt says what let it through, from the ticket.
	rs, err := e.Receipts(ReceiptFilter{Kind: storage.KindHookStart})
	if err != nil || len(rs) != 1 {
		t.Fatalf("hook.start receipts: %d, %v", len(rs), err)
	}
	var details struct{ Gate, Via string }
	json.Unmarshal(rs[0].Details, &details)
	if details.Gate != g.Via || !strings.HasPrefix(g.Via, "policy mcp:agent") || details.Via != string(testActor) {
		t.Errorf("hook.start details %s: want gate %q and via %s", rs[0].Details, g.Via, testActor)
	}

	// A hands call without its ticket is refused before anything is done.
	if _, err := e.MCPHands(context.Background(), testActor, MCPCall{Client: "Agent", Session: "s1", Tool: "hands_read",
		Arguments: json.RawMessage(`{"root":"x","path":"/etc/hostname"}`)}); err == nil || !strings.Contains(err.Error(), "needs the ticket") {
		t.Errorf("hands call without a ticket: %v", err)
	}
}
