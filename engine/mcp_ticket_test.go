package engine

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// TestMCPTicketIsForItsArguments: the operator approves one call with
// arguments A; the ticket it yields starts the same tool with arguments B,
// and the run's receipt says the operator's approval let it through.
func TestMCPTicketIsForItsArguments(t *testing.T) {
	e := setupScripts(t, Options{}, map[string]string{"ok.sh": "#!/bin/sh\nexit 0\n"},
		map[string]string{"ok": "    run: [./ok.sh]\n    inputs: {path: string}\n"})
	detach := e.AttachOperator()
	defer detach()
	call := MCPCall{Client: "Agent", Session: "s1", Tool: MCPToolName("testmod", "ok"),
		Arguments: json.RawMessage(`{"path":"/tmp/harmless"}`), TTL: time.Minute}
	done := make(chan MCPGate, 1)
	go func() {
		g, err := e.GateMCP(context.Background(), testActor, call)
		if err != nil {
			t.Error(err)
		}
		done <- g
	}()
	var id uint64
	for id == 0 {
		rs, _ := e.Requests(RequestFilter{})
		for _, r := range rs {
			if r.Subject == "mcp:agent" {
				id = r.ID
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := e.Approve("local:test", id, ""); err != nil {
		t.Fatal(err)
	}
	g := <-done
	if !g.Allowed || g.Ticket == "" {
		t.Fatalf("gate: %+v", g)
	}
	h, err := e.StartRun(testActor, RunRequest{Module: "testmod", Hook: "ok", Jail: JailOff,
		Inputs: map[string]any{"path": "/etc/shadow"}, Client: "Agent", Session: "s1", Ticket: g.Ticket})
	if err == nil {
		rec := h.Wait().Run
		t.Errorf("a ticket for %s started the hook with other inputs (path=/etc/shadow): run %s %s, gate %q",
			call.Arguments, rec.ID, rec.Status, g.Via)
	}
	h, err = e.StartRun(testActor, RunRequest{Module: "testmod", Hook: "ok", Jail: JailOff,
		Inputs: map[string]any{"path": "/tmp/harmless"}, Client: "Agent", Session: "s1", Ticket: g.Ticket})
	if err != nil {
		t.Fatalf("the ticket did not start the call it was given for: %v", err)
	}
	if rec := h.Wait().Run; rec.Status != "succeeded" {
		t.Errorf("the approved call: %s", rec.Status)
	}
}

// TestMCPTicketOutstandingIsKept: a ticket still unused is evicted once
// maxMCPTickets other gates were made and redeemed after it, though it is
// the only one outstanding.
func TestMCPTicketOutstandingIsKept(t *testing.T) {
	var ts mcpTickets
	tk := mcpTicket{subject: "mcp:a", session: "s", tool: "m__h", args: "d", via: "rule", expires: time.Now().Add(time.Minute)}
	first := ts.issue(tk)
	for range maxMCPTickets {
		id := ts.issue(tk)
		if _, err := ts.redeem(id, "mcp:a", "s", "m__h", "d"); err != nil {
			t.Fatal(err)
		}
	}
	if len(ts.byID) > 2 {
		t.Fatalf("outstanding: %d", len(ts.byID))
	}
	if _, err := ts.redeem(first, "mcp:a", "s", "m__h", "d"); err != nil {
		t.Errorf("the one outstanding ticket was evicted (byID holds %d, order %d): %v", len(ts.byID), len(ts.order), err)
	}
}
