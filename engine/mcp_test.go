package engine

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"warden/engine/perms"
	"warden/storage"
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
	if _, err := e.store.Update(func(tx *storage.Tx) (err error) {
		req, err = perms.Open(tx, perms.Ask{Op: op, Requester: storage.Requester{Module: op.Subject, Hook: call.Tool, Client: op.Subject, Session: call.Session},
			TTL: time.Minute, Actor: op.Subject}, time.Now())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	detach := e.AttachOperator()
	if _, err := e.Approve("local:test", req.ID, ""); err != nil {
		t.Fatal(err)
	}
	detach() // nobody left to answer: only the stored decision can
	g, again := e.awaitMCP(context.Background(), req, "mcp:s", time.Minute)
	if again || !g.Allowed || g.Outcome != MCPAllowed || !strings.Contains(g.Via, "by local:test") {
		t.Fatalf("an early approval: %+v (again %v)", g, again)
	}
}
