package tui

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/wardenhq/warden/engine"
)

// TestRequestsMCPCall: an MCP client's call shows in the Requests pane
// with the client and the tool; approve-always offers the whole tool (t),
// which lets the call through and adds a tool-wide rule; the header
// counts the connected MCP client while its session lasts.
func TestRequestsMCPCall(t *testing.T) {
	e := newEngine(t)
	c := startConsole(t, e)
	c.wait("no runs yet")
	sctx, hangUp := context.WithCancel(context.Background())
	held := make(chan error, 1)
	go func() {
		held <- e.HoldMCPSession(sctx, "local:test", engine.MCPSession{ID: "mcp-s1", Name: "Claude Code"})
	}()
	c.wait("1 mcp")
	gated := make(chan engine.MCPGate, 1)
	go func() {
		g, err := e.GateMCP(context.Background(), "local:test", engine.MCPCall{Client: "Claude Code", Session: "mcp-s1",
			Tool: "echo__say", Arguments: json.RawMessage(`{"word":"hi"}`)})
		if err != nil {
			t.Error(err)
		}
		gated <- g
	}()
	c.wait("request 1 · press 2 to answer · mcp:claude-code/echo__say")
	c.keys("2")
	c.wait("MCP client mcp:claude-code, tool echo__say, session mcp-s1")
	c.keys("a")
	c.wait("t: this tool, any arguments")
	c.keys("t")
	g := <-gated
	if !g.Allowed {
		t.Fatalf("gate: %+v", g)
	}
	p, _, _ := e.Policy("mcp:claude-code")
	if len(p.Rules) != 1 || !strings.Contains(p.Rules[0].Summary, "any arguments") {
		t.Errorf("rules: %+v", p.Rules)
	}
	hangUp()
	<-held
	// The header re-counts on the mcp.disconnect receipt's event, which
	// reaches the console on its own; the Receipts pane shows it in the
	// same update (the frame before it may still count the client).
	c.keys("3")
	c.wait("mcp.disconnect")
	if v := c.final(); strings.Contains(v, "1 mcp") {
		t.Errorf("the header still counts the MCP client:\n%s", v)
	}
}
