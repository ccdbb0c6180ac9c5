package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/wardenhq/warden/engine/perms"
	"github.com/wardenhq/warden/storage"
)

// OpMCPCall is the operation of a permission request for an MCP tool
// call (its content: the tool and its arguments).
const OpMCPCall = perms.OpMCPCall

// MCP clients (docs/operating.md, "MCP clients"): an AI agent's MCP client reaches warden
// through `warden mcp serve`, which calls the engine on the client's
// behalf. The client is an actor, "mcp:<name>", in every receipt, with the
// serve's session id; its policy (subject "mcp:<name>") holds the rules
// that let a tool run without asking, and every other call is a
// permission request an operator answers.

// DefaultMCPRequestTTL is how long an MCP tool call waits for the
// operator's decision, at most.
const DefaultMCPRequestTTL = 5 * time.Minute

// Outcomes of an MCP gate, as receipts and results name them.
const (
	MCPAllowed    = "allowed"     // by a rule, or approved by an operator
	MCPDenied     = "denied"      // an operator denied it
	MCPExpired    = "expired"     // nobody decided in time
	MCPNoOperator = "no-operator" // nobody is attached to ask
	MCPRefused    = "refused"     // the pending limit, or the call went away
)

// MCPSubject is the policy subject of an MCP client: "mcp:" and its
// clientInfo.name folded to lower case [a-z0-9._-] (anything else becomes
// '-', at most 63 characters). The name is the client's own claim: it
// picks a policy, never a privilege.
func MCPSubject(client string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(client) {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
			b.WriteRune(c)
		default:
			b.WriteByte('-')
		}
		if b.Len() >= 63 {
			break
		}
	}
	s := strings.TrimLeft(b.String(), "._-")
	if s == "" {
		s = "unnamed"
	}
	return "mcp:" + s
}

// MCPToolRule is the policy rule that lets an MCP client run tool
// without asking, whatever the arguments.
func MCPToolRule(tool string) (Rule, error) { return perms.ToolRule(tool) }

// MCPCall is one MCP tool call to gate.
type MCPCall struct {
	Client    string          `json:"client"`  // clientInfo.name, as the client sent it
	Session   string          `json:"session"` // the serve's session id
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	// Ticket is the one GateMCP gave for this call (MCPGate.Ticket), for
	// MCPHands: what let the call through is taken from it.
	Ticket string `json:"ticket,omitempty"`
	// TTL is how long the call waits for a decision (0: DefaultMCPRequestTTL).
	TTL time.Duration `json:"ttl"`
}

// MCPGate is the answer to an MCP tool call: allowed or not, and, when
// not, which refusal (Outcome) and the message the client is shown.
type MCPGate struct {
	Allowed bool   `json:"allowed"`
	Outcome string `json:"outcome"`
	Via     string `json:"via,omitempty"`     // what allowed it
	Request uint64 `json:"request,omitempty"` // the request asked, if any
	Message string `json:"message,omitempty"` // why not, for the client
	// Ticket, when allowed, is handed back with the call's effect
	// (RunRequest.Ticket, MCPCall.Ticket): good for that one call, for a
	// minute (see mcp_ticket.go).
	Ticket string `json:"ticket,omitempty"`
}

// GateMCP decides whether an MCP client's tool call may run: allowed by a
// rule in the client's policy, or else a permission request (subject
// mcp:<client>) showing the exact tool and arguments, which the call waits
// on up to its expiry (ctx ending withdraws it). Fail-closed: with no
// operator attached it is refused at once. The outcome is receipted
// ("mcp.gate") with the client as actor and its session, and the same
// distinction as the result: allowed (through a request or a retry
// claim), denied (by whom, why), expired, no-operator, refused. A call a
// policy rule allows outright writes nothing here: the effect's own
// receipt says what let it through, from the ticket.
func (e *Engine) GateMCP(ctx context.Context, actor Actor, c MCPCall) (MCPGate, error) {
	if err := e.authorize(actor, "act for MCP client "+MCPSubject(c.Client)); err != nil {
		return MCPGate{}, err
	}
	subject := MCPSubject(c.Client)
	args := c.Arguments
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	op, err := perms.NewOp(subject, perms.OpMCPCall, map[string]any{"tool": c.Tool, "arguments": args})
	if err != nil {
		return MCPGate{}, err
	}
	ttl := c.TTL
	if ttl <= 0 {
		ttl = DefaultMCPRequestTTL
	}
	pa := perms.Ask{Op: op, Requester: storage.Requester{Module: subject, Hook: c.Tool, Client: subject, Session: c.Session},
		TTL: ttl, Actor: subject}
	// The common case, a tool the policy lets run, costs a read and no
	// commit: the run's own receipts say what let it through (RunRequest.Gate).
	var ruled bool
	var ruledVia string
	if err := e.store.View(func(tx *storage.Tx) error {
		p, _, err := perms.Policy(tx, subject)
		if err == nil {
			ruled, ruledVia = perms.Evaluate(p, op)
		}
		return err
	}); err != nil {
		return MCPGate{}, err
	}
	if ruled {
		return e.ticketed(subject, c, MCPGate{Allowed: true, Outcome: MCPAllowed, Via: ruledVia}), nil
	}
	ans, err := e.gate.ask(ctx, mcpAsk(pa))
	if err != nil {
		return MCPGate{}, err
	}
	g := mcpGate(ans, ttl)
	e.receiptMCPGate(c, subject, g)
	if g.Allowed {
		g = e.ticketed(subject, c, g)
	}
	return g, nil
}

// mcpAsk is the gate's ask for an MCP call: its consumer is the serve's
// session, and only an open console counts as someone to ask.
func mcpAsk(a perms.Ask) ask {
	return ask{Ask: a, consumer: "mcp:" + a.Requester.Session, consoleOnly: true, withdrawn: "the MCP client withdrew the call"}
}

// noOperatorMessage is what an MCP client is told when no console is
// there to answer its call.
const noOperatorMessage = "refused: no operator is attached to answer; open the warden console, or let the tool run without asking (approve-always)"

// ticketed gives an allowed gate its ticket.
func (e *Engine) ticketed(subject string, c MCPCall, g MCPGate) MCPGate {
	g.Ticket = e.gate.tickets.issue(mcpTicket{subject: subject, session: c.Session, tool: c.Tool, args: rawArgsDigest(c.Arguments),
		via: g.Via, expires: time.Now().Add(mcpTicketTTL)})
	return g
}

// mcpGate is what the gate's answer means for the MCP call.
func mcpGate(ans answer, ttl time.Duration) MCPGate {
	req, d := ans.req, ans.decision
	g := MCPGate{Request: req.ID}
	switch {
	case ans.refusal != nil:
		return MCPGate{Outcome: MCPRefused, Message: ans.refusal.Message}
	case ans.approved() && req.ID == 0:
		return MCPGate{Allowed: true, Outcome: MCPAllowed, Via: ans.via}
	case ans.outcome == outcomeNoOperator && req.ID == 0:
		return MCPGate{Outcome: MCPNoOperator, Message: noOperatorMessage}
	case ans.outcome == outcomeNoOperator:
		g.Outcome, g.Message = MCPNoOperator, fmt.Sprintf("%s (request %d)", noOperatorMessage, req.ID)
	case d.Verdict == ApproveOnce || d.Verdict == ApproveAlways:
		// Approved, even when the approval raced the client's withdrawal.
		g.Allowed, g.Outcome, g.Via = true, MCPAllowed, fmt.Sprintf("request %d: %s by %s", req.ID, d.Verdict, d.By)
	case ans.outcome == outcomeExpired:
		g.Outcome, g.Message = MCPExpired, fmt.Sprintf("refused: the request expired after %s without a decision (request %d)", shortTTL(ttl), req.ID)
	case ans.outcome == outcomeRefused, ans.outcome == outcomeRunEnded:
		g.Outcome, g.Message = MCPRefused, fmt.Sprintf("refused: %s (request %d)", d.Reason, req.ID)
	default:
		why := d.Reason
		if why == "" {
			why = "no reason given"
		}
		g.Outcome, g.Message = MCPDenied, fmt.Sprintf("denied by %s: %s (request %d)", d.By, why, req.ID)
	}
	return g
}

// shortTTL writes a duration as operators do: 5m, 90s, 1h30m.
func shortTTL(d time.Duration) string {
	s := d.Round(time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func (e *Engine) receiptMCPGate(c MCPCall, subject string, g MCPGate) {
	details := map[string]any{"session": c.Session, "tool": c.Tool, "outcome": g.Outcome}
	if g.Request != 0 {
		details["request"] = g.Request
	}
	if g.Via != "" {
		details["via"] = g.Via
	}
	summary := fmt.Sprintf("%s call of %s: %s", subject, c.Tool, g.Outcome)
	if g.Message != "" {
		details["message"] = g.Message
		summary += ": " + g.Message
	} else if g.Via != "" {
		summary += " (" + g.Via + ")"
	}
	d := storage.Draft{Kind: storage.KindMCPGate, Actor: subject, Subject: c.Tool, Summary: summary, Details: details}
	if g.Request == 0 && !g.Allowed {
		// Refused before anyone was asked (the pending cap, no
		// operator): bounded per session.
		e.receiptMCPRefusal(c.Session, g.Outcome, d)
		return
	}
	e.store.AppendReceipt(d)
}

// RefuseMCP receipts an MCP tool call refused before it was gated (its
// arguments did not match the tool's schema): nothing ran, nobody was
// asked.
func (e *Engine) RefuseMCP(actor Actor, c MCPCall, why string) error {
	if err := e.authorize(actor, "act for MCP client "+MCPSubject(c.Client)); err != nil {
		return err
	}
	subject := MCPSubject(c.Client)
	if len(why) > 1024 { // the client's arguments may be quoted in it
		why = why[:1024] + "…"
	}
	e.receiptMCPRefusal(c.Session, "invalid", storage.Draft{Kind: storage.KindMCPGate, Actor: subject, Subject: c.Tool,
		Summary: fmt.Sprintf("%s call of %s: invalid arguments, nothing ran: %s", subject, c.Tool, why),
		Details: map[string]any{"session": c.Session, "tool": c.Tool, "outcome": "invalid", "message": why}})
	return nil
}

// ApproveAlwaysTool decides an MCP tool call's request approve-always
// with a rule for the tool whatever its arguments (ApproveAlways adds one
// for exactly these arguments).
func (e *Engine) ApproveAlwaysTool(actor Actor, id uint64, reason string) (Request, Rule, Policy, error) {
	if err := e.authorize(actor, fmt.Sprintf("approve-always (whole tool) request %d", id)); err != nil {
		return Request{}, Rule{}, Policy{}, err
	}
	// The same path as every other decision (decideWith), so the call
	// waiting on it is woken, never lost.
	d, err := e.gate.decideWith(id, func(tx *storage.Tx, consumer string) (perms.Decided, error) {
		return perms.DecideScoped(tx, id, ApproveAlways, string(actor), reason, time.Now(), consumer, true)
	})
	if err != nil {
		return d.Request, Rule{}, Policy{}, err
	}
	var rule Rule
	var p Policy
	if d.Rule != nil {
		rule, p = *d.Rule, *d.Policy
	}
	return d.Request, rule, p, nil
}

// AttachStandingOperator is AttachOperator for a process that serves
// consoles none of which may be open (`warden serve --ssh`): a hook's
// request waits for someone to connect, but an MCP call, which has its
// own client waiting, is refused at once unless a console is there.
func (e *Engine) AttachStandingOperator() (detach func()) { return e.gate.attachStanding() }

// MCPSession is an MCP client connected through `warden mcp serve`.
type MCPSession struct {
	ID      string    `json:"id"`
	Client  string    `json:"client"` // mcp:<name>
	Name    string    `json:"name"`   // clientInfo.name as sent (hostile: escape before showing)
	Version string    `json:"version,omitempty"`
	Since   time.Time `json:"since"`
	PID     int       `json:"pid,omitempty"` // the serving `warden mcp serve`
}

type mcpSessions struct {
	mu sync.Mutex
	m  map[string]MCPSession
}

// HoldMCPSession records an MCP client as connected until ctx ends (the
// serve's client went away, or the serve itself: over the control socket
// the call ends when its process hangs up). Its start and end are
// receipted ("mcp.connect", "mcp.disconnect").
func (e *Engine) HoldMCPSession(ctx context.Context, actor Actor, s MCPSession) error {
	if err := e.authorize(actor, "connect MCP client "+MCPSubject(s.Name)); err != nil {
		return err
	}
	s.Client, s.Since = MCPSubject(s.Name), time.Now().UTC()
	if len(s.Name) > 256 {
		s.Name = s.Name[:256]
	}
	e.mcp.mu.Lock()
	if e.mcp.m == nil {
		e.mcp.m = map[string]MCPSession{}
	}
	if _, dup := e.mcp.m[s.ID]; dup || s.ID == "" {
		e.mcp.mu.Unlock()
		return fmt.Errorf("MCP session id %q is empty or already connected", s.ID)
	}
	e.mcp.m[s.ID] = s
	e.mcp.mu.Unlock()
	details := map[string]any{"session": s.ID, "name": s.Name, "version": s.Version, "pid": s.PID, "via": string(actor)}
	e.store.AppendReceipt(storage.Draft{Kind: storage.KindMCPConnect, Actor: s.Client, Subject: s.ID,
		Summary: fmt.Sprintf("MCP client %s connected (session %s, via %s)", s.Client, s.ID, actor), Details: details})
	select {
	case <-ctx.Done():
	case <-e.life.Done():
	}
	e.mcp.mu.Lock()
	delete(e.mcp.m, s.ID)
	e.mcp.mu.Unlock()
	e.flushMCPRefusals(s.ID)
	e.store.AppendReceipt(storage.Draft{Kind: storage.KindMCPDisconnect, Actor: s.Client, Subject: s.ID,
		Summary: fmt.Sprintf("MCP client %s disconnected (session %s)", s.Client, s.ID), Details: map[string]any{"session": s.ID}})
	return nil
}

// MCPSessions lists the connected MCP clients, oldest first.
func (e *Engine) MCPSessions() ([]MCPSession, error) {
	e.mcp.mu.Lock()
	out := make([]MCPSession, 0, len(e.mcp.m))
	for _, s := range e.mcp.m {
		out = append(out, s)
	}
	e.mcp.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Since.Before(out[j].Since) })
	return out, nil
}
