package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/wardenhq/warden/storage"
)

// MCP hands tools: hands_exec, hands_read and hands_write act on a
// registered hands root through the hands capabilities a hook would call,
// so the root's own policy applies on top of the MCP client's gate: an
// effect it does not allow is a permission request (subject hands:<root>)
// like a hook's.

// MCPHandsTools are the hands tools and their arguments, in capability
// argument order.
var MCPHandsTools = map[string][]string{
	"hands_exec":  {"root", "argv"},
	"hands_read":  {"root", "path"},
	"hands_write": {"root", "path", "content"},
}

var mcpHandsSeq atomic.Uint64

// MCPHands performs a hands tool call that GateMCP has let through, and
// returns the capability's JSON result. A refusal by the root's policy or
// a bad argument is an error whose message the client is shown. The
// outcome is receipted ("mcp.hands").
func (e *Engine) MCPHands(ctx context.Context, actor Actor, c MCPCall) (json.RawMessage, error) {
	if err := e.authorize(actor, "act for MCP client "+MCPSubject(c.Client)); err != nil {
		return nil, err
	}
	names, ok := MCPHandsTools[c.Tool]
	if !ok {
		return nil, fmt.Errorf("%q is not a hands tool (hands_exec, hands_read, hands_write)", c.Tool)
	}
	var given map[string]json.RawMessage
	if err := json.Unmarshal(c.Arguments, &given); err != nil {
		return nil, fmt.Errorf("%s: the arguments are not a JSON object: %v", c.Tool, err)
	}
	args := make([]json.RawMessage, len(names))
	for i, n := range names {
		if args[i] = given[n]; args[i] == nil {
			return nil, fmt.Errorf("%s: argument %q missing", c.Tool, n)
		}
	}
	subject := MCPSubject(c.Client)
	via, err := e.gate.tickets.redeem(c.Ticket, subject, c.Session, c.Tool, rawArgsDigest(c.Arguments))
	if err != nil {
		return nil, err
	}
	ttl := c.TTL
	if ttl <= 0 {
		ttl = DefaultMCPRequestTTL
	}
	// The capability sees a run that is this call: its requests name the
	// client and the tool, and never outlive the call's wait.
	now := time.Now().UTC()
	id := fmt.Sprintf("%s-%d", c.Session, mcpHandsSeq.Add(1))
	r := &activeRun{e: e, rec: RunRecord{ID: id, Module: subject, Hook: c.Tool, Actor: subject, Started: now, Deadline: now.Add(ttl)},
		actor: subject, session: c.Session, started: time.Now()}
	fn := e.capabilities["hands"][strings.TrimPrefix(c.Tool, "hands_")]
	out, perr := fn(ctx, r, args)
	details := map[string]any{"session": c.Session, "tool": c.Tool, "call": id, "gate": via}
	var root string
	json.Unmarshal(args[0], &root)
	summary := fmt.Sprintf("%s %s on %s", subject, c.Tool, root)
	if perr != nil {
		details["error"] = perr.Message
		details["code"] = perr.Code
		summary += " refused: " + perr.Message
	} else {
		summary += " done"
	}
	e.store.AppendReceipt(storage.Draft{Kind: storage.KindMCPHands, Actor: subject, Subject: "hands:" + root, Summary: summary, Details: details})
	if perr != nil {
		return nil, fmt.Errorf("%s: %s", c.Tool, perr.Message)
	}
	return out, nil
}
