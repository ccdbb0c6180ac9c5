package engine

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"time"
)

// MCP tickets: GateMCP's word, kept in the engine, that one call of one
// tool by one client session was let through, and by what. The relay
// (`warden mcp serve`, a control-socket client) hands the ticket back
// with the call's effect (RunRequest.Ticket, MCPCall.Ticket), and the
// engine takes the client, session and "what let it through" from the
// ticket, never from the relay's words. So a receipt that says a run was
// an MCP client's, let through by a rule or an operator's answer, is true
// whoever sent the request, and a ticket serves one call only.

// mcpTicketTTL is how long a ticket waits for its call: the relay uses it
// at once, so a minute only covers a loaded machine.
const mcpTicketTTL = time.Minute

// maxMCPTickets bounds the tickets outstanding. A relay that gates and
// never calls would otherwise grow the map; past the bound the oldest
// give way (their calls are refused and can be gated again).
const maxMCPTickets = 1024

// errMCPTicket is a call that claims an MCP client without a valid
// ticket from GateMCP.
var errMCPTicket = errors.New("an MCP client's call needs the ticket GateMCP gave for it (unknown, used, expired or for another call): gate the call again")

// MCPToolName is the MCP tool of a module's hook: "<module>__<hook>".
// Module ids ([a-z0-9-]) and hook names ([a-z][a-z0-9_-]) hold only
// characters MCP tool names allow, and a module id holds no "_", so the
// name splits back at its first "__".
func MCPToolName(module, hook string) string { return module + "__" + hook }

// mcpTicket is what GateMCP let through.
type mcpTicket struct {
	subject, session, tool string
	via                    string // what let it through
	expires                time.Time
}

// mcpTickets holds the tickets not yet used. Invariants: every ticket in
// byID is in order, oldest first (order may also hold used ones, skipped
// when they reach its front), and order holds at most maxMCPTickets.
type mcpTickets struct {
	mu    sync.Mutex
	byID  map[string]mcpTicket
	order []string
}

// issue records t and returns its id.
func (ts *mcpTickets) issue(t mcpTicket) string {
	var b [16]byte
	rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.byID == nil {
		ts.byID = map[string]mcpTicket{}
	}
	now := time.Now()
	for len(ts.order) > 0 {
		old, ok := ts.byID[ts.order[0]]
		if ok && len(ts.order) < maxMCPTickets && now.Before(old.expires) {
			break
		}
		delete(ts.byID, ts.order[0])
		ts.order = ts.order[1:]
	}
	ts.byID[id] = t
	ts.order = append(ts.order, id)
	return id
}

// redeem uses ticket id for one call of tool by subject's session and
// returns what let it through. A ticket is good once.
func (ts *mcpTickets) redeem(id, subject, session, tool string) (string, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t, ok := ts.byID[id]
	if !ok || t.subject != subject || t.session != session || t.tool != tool || !time.Now().Before(t.expires) {
		return "", errMCPTicket
	}
	delete(ts.byID, id)
	return t.via, nil
}
