package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/wardenhq/warden/engine/perms"
	"github.com/wardenhq/warden/storage"
)

// An MCP client's refused calls cannot fill the receipt log: 5,000
// invalid calls, 1,000 with no operator attached and 500 past the
// pending cap write mcpRefusalBurst receipts one by one and one grouped
// receipt, at the session's end, that counts the rest. Every refusal
// still reaches the client, and no call with nobody to answer it opens
// a request. (Before: one receipt per call, and for each call with no
// operator a request opened and decided, three receipts.)
func TestMCPRefusalsAreBounded(t *testing.T) {
	e := openEngine(t, Options{})
	ctx, end := context.WithCancel(context.Background())
	held := make(chan error, 1)
	go func() {
		held <- e.HoldMCPSession(ctx, "local:test", MCPSession{ID: "mcp-s1", Name: "Flooder"})
	}()
	count := func(kind string) int {
		rs, err := e.Receipts(ReceiptFilter{Kind: kind})
		if err != nil {
			t.Fatal(err)
		}
		return len(rs)
	}
	call := MCPCall{Client: "Flooder", Session: "mcp-s1", Tool: "m__h", Arguments: json.RawMessage(`{"a":1}`), TTL: time.Minute}

	for i := range 5000 {
		if err := e.RefuseMCP("local:test", call, fmt.Sprintf("argument a: want a string (call %d)", i)); err != nil {
			t.Fatal(err)
		}
	}
	for range 1000 {
		g, err := e.GateMCP(context.Background(), "local:test", call)
		if err != nil || g.Outcome != MCPNoOperator || g.Allowed {
			t.Fatalf("with no operator: %+v %v", g, err)
		}
	}
	if n := count(storage.KindRequestOpen); n != 0 {
		t.Errorf("%d requests opened for calls nobody could answer", n)
	}

	// Past the pending cap: MaxPending calls wait on an operator, the
	// rest are refused at once.
	detach := e.AttachOperator()
	defer detach()
	waitCtx, stopWaiting := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range perms.MaxPending {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := call
			c.Arguments = json.RawMessage(fmt.Sprintf(`{"a":%d}`, i))
			e.GateMCP(waitCtx, "local:test", c)
		}()
	}
	for deadline := time.Now().Add(20 * time.Second); count(storage.KindRequestOpen) < perms.MaxPending; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d requests opened", count(storage.KindRequestOpen), perms.MaxPending)
		}
	}
	for range 500 {
		g, err := e.GateMCP(context.Background(), "local:test", call)
		if err != nil || g.Outcome != MCPRefused {
			t.Fatalf("past the pending cap: %+v %v", g, err)
		}
	}
	stopWaiting()
	wg.Wait()

	gates := count(storage.KindMCPGate)
	// mcpRefusalBurst one by one, plus the 32 withdrawn calls' own
	// receipts (each had a request: an operator saw it).
	if want := mcpRefusalBurst + perms.MaxPending; gates != want {
		t.Errorf("%d mcp.gate receipts for 6,532 calls, want %d", gates, want)
	}

	end()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	rs, _ := e.Receipts(ReceiptFilter{Kind: storage.KindMCPGate})
	last := rs[len(rs)-1]
	want := 5000 + 1000 + 500 - mcpRefusalBurst
	if gateDetail(t, last, "outcome") != "grouped" || gateDetail(t, last, "count") != fmt.Sprint(want) {
		t.Fatalf("the session's end: last mcp.gate receipt %q %s, want a grouped one counting %d", last.Summary, last.Details, want)
	}
	t.Logf("grouped: %s", last.Summary)
	e.mcpRefusals.mu.Lock()
	left := len(e.mcpRefusals.m)
	e.mcpRefusals.mu.Unlock()
	if left != 0 {
		t.Errorf("%d sessions' budgets outlived them", left)
	}
}

// A new window receipts again, after one receipt for what the last one
// counted.
func TestMCPRefusalWindowRollsOver(t *testing.T) {
	e := openEngine(t, Options{})
	saved := mcpRefusalWindow
	mcpRefusalWindow = 200 * time.Millisecond
	t.Cleanup(func() { mcpRefusalWindow = saved })
	call := MCPCall{Client: "Flooder", Session: "mcp-s2", Tool: "m__h"}
	for range mcpRefusalBurst + 7 {
		e.RefuseMCP("local:test", call, "bad")
	}
	time.Sleep(250 * time.Millisecond)
	e.RefuseMCP("local:test", call, "bad again")
	rs, _ := e.Receipts(ReceiptFilter{Kind: storage.KindMCPGate})
	if len(rs) != mcpRefusalBurst+2 {
		t.Fatalf("%d receipts, want %d one by one, one grouped, one in the new window", len(rs), mcpRefusalBurst+2)
	}
	g, next := rs[len(rs)-2], rs[len(rs)-1]
	if gateDetail(t, g, "outcome") != "grouped" || gateDetail(t, g, "count") != "7" || gateDetail(t, next, "message") != "bad again" {
		t.Errorf("rollover: %q %s then %q", g.Summary, g.Details, next.Summary)
	}
}

// gateDetail is one of r's details, as text.
func gateDetail(t *testing.T, r Receipt, key string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Details, &m); err != nil {
		t.Fatalf("receipt %d details: %v", r.Seq, err)
	}
	return fmt.Sprint(m[key])
}
