package engine

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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
// whoever sent the request: a ticket serves one call only, of that tool
// with exactly the arguments that were gated.

// mcpTicketTTL is how long a ticket waits for its call: the relay uses it
// at once, so a minute only covers a loaded machine.
const mcpTicketTTL = time.Minute

// maxMCPTickets bounds the tickets outstanding. A relay that gates and
// never calls would otherwise grow the map; past the bound the oldest
// give way (their calls are refused and can be gated again).
const maxMCPTickets = 1024

// errMCPTicket is a call that claims an MCP client without a valid
// ticket from GateMCP.
var errMCPTicket = errors.New("an MCP client's call needs the ticket GateMCP gave for it (unknown, used, expired, or for another call or other arguments): gate the call again")

// MCPToolName is the MCP tool of a module's hook: "<module>__<hook>".
// Module ids ([a-z0-9-]) and hook names ([a-z][a-z0-9_-]) hold only
// characters MCP tool names allow, and a module id holds no "_", so the
// name splits back at its first "__".
func MCPToolName(module, hook string) string { return module + "__" + hook }

// mcpTicket is what GateMCP let through: one call, with its arguments.
type mcpTicket struct {
	subject, session, tool string
	args                   string // argsDigest of the call's arguments
	via                    string // what let it through
	expires                time.Time
}

// argsDigest names a call's arguments, the same whichever way they came:
// the JSON the client sent (GateMCP, MCPHands) or the inputs decoded from
// it (RunRequest.Inputs). Both are taken through map[string]any, whose
// encoding sorts keys, so equal arguments give equal digests.
func argsDigest(args map[string]any) string {
	if args == nil {
		args = map[string]any{}
	}
	b, err := json.Marshal(args)
	if err != nil {
		return "unencodable" // matches no ticket's: json.RawMessage arguments always encode
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// rawArgsDigest is argsDigest of arguments as the client sent them.
func rawArgsDigest(raw json.RawMessage) string {
	var m map[string]any
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &m); err != nil {
			return "not an object" // matches no ticket's
		}
	}
	return argsDigest(m)
}

// mcpTickets holds the tickets not yet used. Invariants: every ticket in
// byID is in order, oldest first; order may also hold used ones, and is
// compacted when it grows past twice the bound; byID holds at most
// maxMCPTickets.
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
		if ok && len(ts.byID) < maxMCPTickets && now.Before(old.expires) {
			break
		}
		delete(ts.byID, ts.order[0])
		ts.order = ts.order[1:]
	}
	if len(ts.order) >= 2*maxMCPTickets {
		kept := make([]string, 0, len(ts.byID)+1)
		for _, o := range ts.order {
			if _, ok := ts.byID[o]; ok {
				kept = append(kept, o)
			}
		}
		ts.order = kept
	}
	ts.byID[id] = t
	ts.order = append(ts.order, id)
	return id
}

// redeem uses ticket id for one call of tool, with arguments of digest
// args, by subject's session, and returns what let it through. A ticket
// is good once.
func (ts *mcpTickets) redeem(id, subject, session, tool, args string) (string, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t, ok := ts.byID[id]
	if !ok || t.subject != subject || t.session != session || t.tool != tool || t.args != args || !time.Now().Before(t.expires) {
		return "", errMCPTicket
	}
	delete(ts.byID, id)
	return t.via, nil
}
