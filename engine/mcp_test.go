package engine

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
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
