// Package perms is the logic of policies and permission requests
// (docs/operating.md): operation digests, policy evaluation, and the transitions of
// a request (open, decide, expire, claim) inside one storage transaction.
// It does no I/O of its own beyond the storage.Tx it is handed, and every
// request, decision, refusal and policy change it makes appends its
// receipt to that same transaction.
//
// Functions that refuse by the rules (the pending limit, a stale revision,
// an expired request) return a *Refusal after recording it in the
// transaction: the caller must still commit the transaction, then report
// the refusal.
package perms

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/wardenhq/warden/storage"
)

// Operations. The first four are governed by a policy; operator.confirm is
// a question for the operator, never allowed by a policy.
const (
	OpRead    = "hands.read"
	OpWrite   = "hands.write"
	OpExec    = "hands.exec"
	OpNetwork = "network"
	OpConfirm = "operator.confirm"
	// OpMCPCall is an MCP client's tool call; its content is
	// {"tool": NAME, "arguments": {...}}. A policy allows it only by a
	// rule: for exactly these arguments (the request's digest), or for the
	// tool whatever its arguments (ToolDigest).
	OpMCPCall = "mcp.call"
)

// Limits.
const (
	// MaxPending is how many undecided requests one subject may have.
	MaxPending = 32
	// DefaultTTL is how long a request waits for a decision, at most.
	DefaultTTL = time.Hour
)

// Actor of the decisions the engine makes itself (expiry, no operator).
const EngineActor = "engine"

// Errors callers may test for.
var (
	ErrAlreadyDecided = errors.New("request already decided")
)

// Governed reports whether a policy decides the operation (and so whether
// a decision must be made against the policy's current revision).
func Governed(operation string) bool {
	switch operation {
	case OpRead, OpWrite, OpExec, OpNetwork, OpMCPCall, OpConnect:
		return true
	}
	return false
}

// Op is one operation of one subject, with its canonical content and
// digest: the same digest means the identical operation.
type Op struct {
	Subject   string          `json:"subject"`
	Operation string          `json:"operation"`
	Content   json.RawMessage `json:"content"`
	Digest    string          `json:"digest"`
}

// NewOp canonicalizes content (any JSON-marshalable value, or a
// json.RawMessage) and computes the digest.
func NewOp(subject, operation string, content any) (Op, error) {
	if !storage.ValidSubject(subject) {
		return Op{}, fmt.Errorf("bad policy subject %q: want module:ID, hands:/ABS/ROOT, mcp:CLIENT or profile:NAME", subject)
	}
	if operation == "" || strings.ContainsFunc(operation, func(c rune) bool { return c <= 0x20 || c == 0x7f }) {
		return Op{}, fmt.Errorf("bad operation name %q", operation)
	}
	raw, err := json.Marshal(content)
	if err != nil {
		return Op{}, fmt.Errorf("operation content: %w", err)
	}
	if raw, err = storage.CanonicalJSON(raw); err != nil {
		return Op{}, fmt.Errorf("operation content: %w", err)
	}
	return Op{Subject: subject, Operation: operation, Content: raw, Digest: Digest(operation, raw)}, nil
}

// Digest is SHA-256 over the operation name, a NUL, and the canonical
// content, in hex.
func Digest(operation string, canonical []byte) string {
	h := sha256.New()
	h.Write([]byte(operation))
	h.Write([]byte{0})
	h.Write(canonical)
	return hex.EncodeToString(h.Sum(nil))
}

// Summary is a one-line description of an operation for lists and
// prompts, at most about 100 characters.
func Summary(operation string, content json.RawMessage) string {
	c := string(content)
	if len(c) > 80 {
		c = c[:77] + "..."
	}
	return operation + " " + c
}

// Evaluate says whether policy p allows op: by the policy's switch for the
// operation (workspace.read for hands.read, workspace.write for
// hands.write, execute for hands.exec, network for network), or by an
// exact approve-always rule with the same operation and digest. via names
// what allowed it, or why not.
func Evaluate(p storage.PolicyRecord, op Op) (allowed bool, via string) {
	if p.Subject != "" && p.Subject != op.Subject {
		return false, fmt.Sprintf("the policy is %s's, not %s's", p.Subject, op.Subject)
	}
	var sw string
	var on bool
	switch op.Operation {
	case OpRead:
		sw, on = "workspace.read", p.Workspace.Read
	case OpWrite:
		sw, on = "workspace.write", p.Workspace.Write
	case OpExec:
		sw, on = "execute", p.Execute
	case OpNetwork:
		sw, on = "network", p.Network
	case OpMCPCall:
		tool := ToolDigest(op.Content)
		for _, r := range p.Rules {
			if r.Operation == op.Operation && (r.Digest == op.Digest || (tool != "" && r.Digest == tool)) {
				return true, fmt.Sprintf("policy %s revision %d: rule %s", op.Subject, p.Revision, r.Summary)
			}
		}
		return false, fmt.Sprintf("policy %s revision %d: no rule lets this tool run without asking", op.Subject, p.Revision)
	case OpConnect:
		return evaluateConnect(p, op)
	default:
		return false, op.Operation + " is not decided by a policy"
	}
	if on {
		return true, fmt.Sprintf("policy %s revision %d: %s", op.Subject, p.Revision, sw)
	}
	for _, r := range p.Rules {
		if r.Operation == op.Operation && r.Digest == op.Digest {
			return true, fmt.Sprintf("policy %s revision %d: rule %s %s", op.Subject, p.Revision, r.Operation, r.Digest[:12])
		}
	}
	return false, fmt.Sprintf("policy %s revision %d: %s is off and no rule matches", op.Subject, p.Revision, sw)
}

// ToolContent is the content of a rule that lets an MCP tool run whatever
// its arguments.
func ToolContent(tool string) map[string]string { return map[string]string{"tool": tool} }

// ToolRule is the rule that lets an MCP tool run whatever its arguments.
func ToolRule(tool string) (storage.Rule, error) {
	raw, err := json.Marshal(ToolContent(tool))
	if err != nil {
		return storage.Rule{}, err
	}
	if raw, err = storage.CanonicalJSON(raw); err != nil {
		return storage.Rule{}, err
	}
	return storage.Rule{Operation: OpMCPCall, Digest: Digest(OpMCPCall, raw), Summary: Summary(OpMCPCall, raw) + " (any arguments)"}, nil
}

// ToolDigest is the digest of the tool-wide rule for an mcp.call whose
// canonical content is content, or "" when content names no tool.
func ToolDigest(content json.RawMessage) string {
	var c struct {
		Tool string `json:"tool"`
	}
	if json.Unmarshal(content, &c) != nil || c.Tool == "" {
		return ""
	}
	raw, err := json.Marshal(ToolContent(c.Tool))
	if err != nil {
		return ""
	}
	if raw, err = storage.CanonicalJSON(raw); err != nil {
		return ""
	}
	return Digest(OpMCPCall, raw)
}

// Refusal is a request or decision refused by the rules. It is already
// recorded (a "request.refused" receipt) in the transaction that returned
// it.
type Refusal struct {
	Reason  string // "limit", "stale" or "expired"
	Request uint64 // the request concerned; 0 for a request never opened
	Message string
}

func (r *Refusal) Error() string { return r.Message }

// Refusal reasons.
const (
	RefusedLimit   = "limit"
	RefusedStale   = "stale"
	RefusedExpired = "expired"
)

// ReasonExpired is the reason of the deny the engine records on a
// request whose time ran out.
const ReasonExpired = "expired"

// Policy reads a subject's policy. A subject without one gets the default:
// everything denied, no rules, revision 0, and exists false.
func Policy(tx *storage.Tx, subject string) (p storage.PolicyRecord, exists bool, err error) {
	if !storage.ValidSubject(subject) {
		return p, false, fmt.Errorf("bad policy subject %q: want module:ID, hands:/ABS/ROOT, mcp:CLIENT or profile:NAME", subject)
	}
	p, exists, err = tx.Policy(subject)
	if err == nil && !exists {
		p = storage.PolicyRecord{Subject: subject, Rules: []storage.Rule{}}
	}
	return p, exists, err
}

// SetPolicy replaces a subject's policy if its revision is still expected
// (compare-and-swap); a lost swap is a *storage.ConflictError naming both
// revisions. The change is receipted.
func SetPolicy(tx *storage.Tx, actor string, p storage.PolicyRecord, expected uint64, now time.Time) (storage.PolicyRecord, error) {
	if !storage.ValidSubject(p.Subject) {
		return p, fmt.Errorf("bad policy subject %q: want module:ID, hands:/ABS/ROOT, mcp:CLIENT or profile:NAME", p.Subject)
	}
	list, err := CheckNetworkList(p.NetworkAllow)
	if err != nil {
		return p, err
	}
	p.NetworkAllow = list
	p.Updated, p.By = now.UTC(), actor
	out, err := tx.SwapPolicy(p, expected)
	if err != nil {
		return out, err
	}
	_, err = tx.AppendReceipt(storage.Draft{Kind: storage.KindPolicySet, Actor: actor, Subject: p.Subject,
		Summary: fmt.Sprintf("policy %s set to revision %d: workspace read=%v write=%v, execute=%v, network=%s, %d rules",
			p.Subject, out.Revision, p.Workspace.Read, p.Workspace.Write, p.Execute, NetworkSummary(p), len(out.Rules)),
		Details: map[string]any{"revision": out.Revision, "expected": expected, "network": p.Network, "networkAllow": p.NetworkAllow, "execute": p.Execute,
			"workspace": p.Workspace, "rules": len(out.Rules)}})
	return out, err
}

// Check is the first step of a capability's effect: it evaluates the
// subject's policy and, when that does not allow op, consumes an unused
// retry claim for exactly op (receipted), if there is one. allowed false
// means a request is needed; revision is the policy's current revision.
func Check(tx *storage.Tx, op Op, run string, now time.Time) (allowed bool, via string, err error) {
	p, _, err := Policy(tx, op.Subject)
	if err != nil {
		return false, "", err
	}
	if ok, via := Evaluate(p, op); ok || !Governed(op.Operation) {
		return ok, via, nil
	}
	claim, ok, err := tx.OpenClaim(op.Subject, op.Operation, op.Digest)
	if err != nil || !ok {
		return false, "", err
	}
	if err := consume(tx, &claim, run, now); err != nil {
		return false, "", err
	}
	return true, fmt.Sprintf("the retry claim of request %d (approve-once by %s)", claim.ID, claim.Decision.By), nil
}

func consume(tx *storage.Tx, req *storage.RequestRecord, run string, now time.Time) error {
	at := now.UTC()
	req.Claim = &storage.Claim{Used: true, By: run, At: &at}
	if err := tx.PutRequest(*req); err != nil {
		return err
	}
	_, err := tx.AppendReceipt(storage.Draft{Kind: storage.KindRequestClaim, Actor: "run:" + run, Subject: req.Subject,
		Summary: fmt.Sprintf("request %d: its approve-once claim was consumed by run %s (%s)", req.ID, run, req.Operation),
		Details: map[string]any{"request": req.ID, "operation": req.Operation, "digest": req.Digest, "run": run}})
	return err
}

// Ask describes a request to open.
type Ask struct {
	Op        Op
	Requester storage.Requester
	// Deadline is the waiting run's deadline: the request never outlives
	// it. Zero for none.
	Deadline time.Time
	// TTL is how long the request waits at most; 0 means DefaultTTL.
	TTL time.Duration
	// Actor is who the receipts name as asking; "" means the run
	// ("run:<Requester.Run>").
	Actor string
	// Undeclared, for a network.connect, says how the host is not one
	// the run declared ("" when it is): it leads the request's warning,
	// so that no one approves it as if it were.
	Undeclared string
}

// Open records a new request against the subject's current policy
// revision, with its receipt. Requests of the subject that have expired
// are first decided as such. When the subject already has MaxPending
// undecided requests, nothing is opened: the refusal is receipted and a
// *Refusal returned.
func Open(tx *storage.Tx, a Ask, now time.Time) (storage.RequestRecord, error) {
	op := a.Op
	actor := "run:" + a.Requester.Run
	if a.Actor != "" {
		actor = a.Actor
	}
	if _, err := Expire(tx, op.Subject, now); err != nil {
		return storage.RequestRecord{}, err
	}
	pending, err := tx.UndecidedRequests(op.Subject)
	if err != nil {
		return storage.RequestRecord{}, err
	}
	if len(pending) >= MaxPending {
		msg := fmt.Sprintf("permission request refused: %s already has %d pending requests, the limit (%d); decide some first: `warden perms list`, then `warden perms approve|deny ID`",
			op.Subject, len(pending), MaxPending)
		if _, err := tx.AppendReceipt(storage.Draft{Kind: storage.KindRequestRefused, Actor: actor, Subject: op.Subject,
			Summary: fmt.Sprintf("%s by %s/%s refused: %d pending requests (limit %d)", op.Operation, a.Requester.Module, a.Requester.Hook, len(pending), MaxPending),
			Details: map[string]any{"reason": RefusedLimit, "operation": op.Operation, "digest": op.Digest, "run": a.Requester.Run,
				"pending": len(pending), "limit": MaxPending}}); err != nil {
			return storage.RequestRecord{}, err
		}
		return storage.RequestRecord{}, &Refusal{Reason: RefusedLimit, Message: msg}
	}
	p, _, err := Policy(tx, op.Subject)
	if err != nil {
		return storage.RequestRecord{}, err
	}
	ttl := a.TTL
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	now = now.UTC()
	expires := now.Add(ttl)
	if !a.Deadline.IsZero() && a.Deadline.Before(expires) {
		expires = a.Deadline.UTC()
	}
	if !expires.After(now) {
		expires = now.Add(time.Millisecond)
	}
	id, err := tx.NextRequestID()
	if err != nil {
		return storage.RequestRecord{}, err
	}
	req := storage.RequestRecord{ID: id, Subject: op.Subject, Requester: a.Requester, Operation: op.Operation,
		Content: op.Content, Warning: joinWarnings(a.Undeclared, Warning(op)), Digest: op.Digest, Revision: p.Revision, Created: now, Expires: expires}
	if err := tx.PutRequest(req); err != nil {
		return req, err
	}
	_, err = tx.AppendReceipt(storage.Draft{Kind: storage.KindRequestOpen, Actor: actor, Subject: op.Subject,
		Summary: fmt.Sprintf("request %d: %s by %s/%s", id, Summary(op.Operation, op.Content), a.Requester.Module, a.Requester.Hook),
		Details: map[string]any{"request": id, "operation": op.Operation, "run": a.Requester.Run, "digest": op.Digest,
			"revision": p.Revision, "expires": expires.Format(time.RFC3339Nano)}})
	return req, err
}

// Expire decides every undecided request of subject (of all subjects
// when "") whose time is up: deny, by the engine, reason "expired". It
// returns those requests as decided.
func Expire(tx *storage.Tx, subject string, now time.Time) ([]storage.RequestRecord, error) {
	rs, err := tx.UndecidedRequests(subject)
	if err != nil {
		return nil, err
	}
	var out []storage.RequestRecord
	for _, r := range rs {
		if r.Pending(now) {
			continue
		}
		if err := record(tx, &r, storage.Deny, EngineActor, ReasonExpired, now, nil); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// Decided is the outcome of Decide.
type Decided struct {
	Request storage.RequestRecord
	// Rule and Policy are set by approve-always: the rule added and the
	// policy at its new revision.
	Rule   *storage.Rule
	Policy *storage.PolicyRecord
}

// Decide records verdict on request id by actor. consumer, when not "",
// is the run whose call is waiting on the request right now: an
// approve-once claim is then consumed by it in the same transaction, so
// no other call can take it.
//
// Refused by the rules (each receipted, each a *Refusal): a request whose
// time is up (it is decided "expired" instead); a decision on a governed
// operation after the subject's policy changed since the request was made
// (the request is closed as superseded, so the waiting call asks again
// under the new policy).
func Decide(tx *storage.Tx, id uint64, verdict, actor, reason string, now time.Time, consumer string) (Decided, error) {
	return DecideScoped(tx, id, verdict, actor, reason, now, consumer, false)
}

// DecideScoped is Decide; with wholeTool, an approve-always of an
// mcp.call request adds a rule for the tool whatever its arguments
// (ToolDigest) instead of one for exactly these arguments.
func DecideScoped(tx *storage.Tx, id uint64, verdict, actor, reason string, now time.Time, consumer string, wholeTool bool) (Decided, error) {
	if verdict != storage.ApproveOnce && verdict != storage.ApproveAlways && verdict != storage.Deny {
		return Decided{}, fmt.Errorf("unknown verdict %q (want %s, %s or %s)", verdict, storage.ApproveOnce, storage.ApproveAlways, storage.Deny)
	}
	req, err := tx.Request(id)
	if err != nil {
		if errors.Is(err, storage.ErrNotFound) {
			return Decided{}, storage.Mark(storage.ErrNotFound, "no request %d (see `warden perms list --all`)", id)
		}
		return Decided{}, err
	}
	if d := req.Decision; d != nil {
		why := ""
		if d.Reason != "" {
			why = ": " + d.Reason
		}
		return Decided{Request: req}, storage.Mark(ErrAlreadyDecided, "request %d was already decided (%s by %s at %s%s)", id, d.Verdict, d.By,
			d.At.Local().Format("2006-01-02 15:04:05"), why)
	}
	refuse := func(why string, r *Refusal) (Decided, error) {
		r.Request = id
		if _, err := tx.AppendReceipt(storage.Draft{Kind: storage.KindRequestRefused, Actor: actor, Subject: req.Subject,
			Summary: fmt.Sprintf("%s of request %d (%s) refused: %s", verdict, id, req.Operation, why),
			Details: map[string]any{"reason": r.Reason, "request": id, "verdict": verdict}}); err != nil {
			return Decided{}, err
		}
		return Decided{Request: req}, r
	}
	if !req.Pending(now) {
		if err := record(tx, &req, storage.Deny, EngineActor, ReasonExpired, now, nil); err != nil {
			return Decided{}, err
		}
		if actor == EngineActor && verdict == storage.Deny {
			// The engine closing an expired request (its waiter woke a
			// moment past the expiry): that deny is the expiry, one
			// receipt, not a refused decision besides it.
			return Decided{Request: req}, nil
		}
		return refuse("it expired", &Refusal{Reason: RefusedExpired,
			Message: fmt.Sprintf("request %d expired at %s without a decision, so it was denied; the hook has to ask again", id, req.Expires.Local().Format("15:04:05"))})
	}
	p, _, err := Policy(tx, req.Subject)
	if err != nil {
		return Decided{}, err
	}
	if Governed(req.Operation) && (p.Revision != req.Revision || p.Updated.After(req.Created)) {
		closing := fmt.Sprintf("superseded: the policy changed (revision %d to %d) before a decision", req.Revision, p.Revision)
		if err := record(tx, &req, storage.Deny, EngineActor, closing, now, nil); err != nil {
			return Decided{}, err
		}
		return refuse("the policy changed", &Refusal{Reason: RefusedStale, Message: fmt.Sprintf(
			"the policy changed; review again: request %d was made against revision %d of %s, which is now at revision %d "+
				"(see `warden perms policy show %s`); a call still waiting asks again under the new policy (see `warden perms list`)",
			id, req.Revision, req.Subject, p.Revision, req.Subject)})
	}
	if verdict == storage.ApproveAlways && !Governed(req.Operation) {
		return Decided{}, fmt.Errorf("request %d (%s) is a question, not an operation a policy rule can allow: approve or deny it", id, req.Operation)
	}
	if wholeTool && (verdict != storage.ApproveAlways || req.Operation != OpMCPCall) {
		return Decided{}, fmt.Errorf("request %d (%s): only an MCP tool call's approve-always can cover the whole tool", id, req.Operation)
	}
	var out Decided
	if verdict == storage.ApproveAlways {
		rule := storage.Rule{Operation: req.Operation, Digest: req.Digest, Summary: Summary(req.Operation, req.Content)}
		if wholeTool {
			tr, err := ToolRule(req.Requester.Hook)
			if err != nil {
				return Decided{}, err
			}
			if d := ToolDigest(req.Content); d == "" || d != tr.Digest {
				return Decided{}, fmt.Errorf("request %d names no tool a rule can cover", id)
			}
			rule = tr
		}
		np := p
		if req.Operation == OpConnect {
			if np, rule, err = alwaysConnect(p, req); err != nil {
				return Decided{}, err
			}
		} else {
			np.Rules = append(append([]storage.Rule{}, p.Rules...), rule)
		}
		saved, err := tx.SwapPolicy(withUpdate(np, actor, now), p.Revision)
		if err != nil {
			return Decided{}, err
		}
		if _, err := tx.AppendReceipt(storage.Draft{Kind: storage.KindPolicyRule, Actor: actor, Subject: req.Subject,
			Summary: fmt.Sprintf("policy %s at revision %d: rule added by approve-always of request %d: allow %s", req.Subject, saved.Revision, id, rule.Summary),
			Details: map[string]any{"revision": saved.Revision, "request": id, "operation": rule.Operation, "digest": rule.Digest, "rules": len(saved.Rules)}}); err != nil {
			return Decided{}, err
		}
		out.Rule, out.Policy = &rule, &saved
	}
	var claim *storage.Claim
	if verdict == storage.ApproveOnce && Governed(req.Operation) {
		claim = &storage.Claim{}
		if consumer != "" {
			at := now.UTC()
			claim = &storage.Claim{Used: true, By: consumer, At: &at}
		}
	}
	if err := record(tx, &req, verdict, actor, reason, now, claim); err != nil {
		return Decided{}, err
	}
	out.Request = req
	return out, nil
}

func withUpdate(p storage.PolicyRecord, actor string, now time.Time) storage.PolicyRecord {
	p.Updated, p.By = now.UTC(), actor
	return p
}

// record writes a decision and its receipt.
func record(tx *storage.Tx, req *storage.RequestRecord, verdict, actor, reason string, now time.Time, claim *storage.Claim) error {
	req.Decision = &storage.Decision{Verdict: verdict, By: actor, At: now.UTC(), Reason: reason}
	req.Claim = claim
	if err := tx.PutRequest(*req); err != nil {
		return err
	}
	details := map[string]any{"request": req.ID, "verdict": verdict, "reason": reason, "operation": req.Operation, "digest": req.Digest}
	summary := fmt.Sprintf("request %d (%s): %s by %s", req.ID, req.Operation, verdict, actor)
	if reason != "" {
		summary += ": " + reason
	}
	if claim != nil {
		if claim.Used {
			details["claim"] = "consumed by run " + claim.By
			summary += "; its retry claim went to the waiting call of run " + claim.By
		} else {
			details["claim"] = "open"
			summary += "; one retry claim is open for the identical operation"
		}
	}
	_, err := tx.AppendReceipt(storage.Draft{Kind: storage.KindRequestDecide, Actor: actor, Subject: req.Subject, Summary: summary, Details: details})
	return err
}

// joinWarnings joins the non-empty warnings with "; ".
func joinWarnings(ws ...string) string {
	var out []string
	for _, w := range ws {
		if w != "" {
			out = append(out, w)
		}
	}
	return strings.Join(out, "; ")
}
