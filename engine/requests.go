package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/wardenhq/warden/engine/perms"
	"github.com/wardenhq/warden/engine/sdk/protocol"
	"github.com/wardenhq/warden/storage"
)

// Request is a permission request or an operator question.
type Request = storage.RequestRecord

// Requester is who asked: a hook's run, or an MCP client's tool call.
type Requester = storage.Requester

// Rule is an exact operation a policy allows (added by approve-always).
type Rule = storage.Rule

// Verdicts.
const (
	ApproveOnce   = storage.ApproveOnce
	ApproveAlways = storage.ApproveAlways
	Deny          = storage.Deny
)

// DefaultRequestTTL is how long a request waits for a decision, at most.
const DefaultRequestTTL = perms.DefaultTTL

// MaxPendingRequests is how many undecided requests one subject may have.
const MaxPendingRequests = perms.MaxPending

// ErrAlreadyDecided is returned when a request already has a decision.
var ErrAlreadyDecided = perms.ErrAlreadyDecided

// Refusal is a request or decision refused by the rules (the pending
// limit, a changed policy, an expired request); it is receipted.
type Refusal = perms.Refusal

// RequestSummary is a one-line description of what a request asks.
func RequestSummary(r Request) string { return perms.Summary(r.Operation, r.Content) }

// runAsk is the gate's ask for a run's call on op. Its request expires
// answerMargin before the run's deadline at the latest, so that a hook
// whose request nobody answered hears "expired" (and can say so, or go
// on without) instead of being stopped by its timeout mid-question.
func (e *Engine) runAsk(r *activeRun, op perms.Op, opened func(Request) askWords) ask {
	return ask{Ask: perms.Ask{Op: op, Requester: storage.Requester{Run: r.rec.ID, Module: r.rec.Module, Hook: r.rec.Hook},
		Deadline: r.rec.Deadline.Add(-answerMargin(r.rec.Deadline.Sub(r.rec.Started))), TTL: r.e.requestTTL},
		consumer: r.rec.ID, run: r, withdrawn: "the run ended before a decision", opened: opened}
}

// answerMargin is how long before its deadline a run's requests expire:
// a tenth of its timeout, between 2 and 30 seconds (time enough for a
// loaded host to tell the hook, and the hook to say so and end).
func answerMargin(timeout time.Duration) time.Duration {
	return min(30*time.Second, max(2*time.Second, timeout/10))
}

// RequestPermission is what a capability calls before an effect: it
// evaluates the subject's policy for operation with content. Allowed (by
// the policy, an exact rule, or an unused retry claim of the identical
// operation, which it consumes) returns nil at once. Otherwise it opens a
// request and the call waits for the decision, the request's expiry or
// the end of the run, with the idle clock paused: approve-once lets this
// call through (it consumes the claim the decision issues, so a later
// identical call is asked again), approve-always adds an exact rule, deny
// and expiry return permission_denied with the reason. A request refused
// by the pending limit is permission_denied at once.
func (e *Engine) RequestPermission(ctx context.Context, r *activeRun, subject, operation string, content any) error {
	op, err := perms.NewOp(subject, operation, content)
	if err != nil {
		return &protocol.Error{Code: protocol.CodeBadFrame, Message: err.Error()}
	}
	sum := perms.Summary(op.Operation, op.Content)
	ans, err := e.gate.ask(ctx, e.runAsk(r, op, func(req Request) askWords {
		r.say(storage.LevelWarn, fmt.Sprintf("request %d: %s needs a decision (`warden perms show %d`)", req.ID, sum, req.ID))
		return askWords{
			prompt: fmt.Sprintf("Allow %s for %s/%s (request %d)?", sum, r.rec.Module, r.rec.Hook, req.ID),
			noOperator: fmt.Sprintf("%s is not allowed by the policy of %s, and no operator is attached (no terminal, no console) to decide request %d, so it is denied (allow it with `warden perms policy set %s ...`)",
				sum, subject, req.ID, subject)}
	}))
	switch {
	case err != nil:
		return err
	case ans.refusal != nil:
		return &protocol.Error{Code: protocol.CodePermissionDenied, Message: ans.refusal.Message}
	case ans.outcome == outcomeRunEnded:
		return &protocol.Error{Code: protocol.CodeRunEnded, Message: operation + ": " + runEndedWaiting}
	case ans.approved():
		return nil
	}
	d := ans.decision
	msg := fmt.Sprintf("%s denied by %s (request %d)", sum, d.By, ans.req.ID)
	if d.Reason != "" {
		msg += ": " + d.Reason
	}
	return &protocol.Error{Code: protocol.CodePermissionDenied, Message: msg}
}

// confirm runs operator.confirm for a run: a question, not governed by a
// policy.
func (e *Engine) confirm(ctx context.Context, r *activeRun, message string) (bool, error) {
	op, err := perms.NewOp("module:"+r.rec.Module, perms.OpConfirm, map[string]any{"message": message})
	if err != nil {
		return false, err
	}
	a := e.runAsk(r, op, func(Request) askWords {
		return askWords{prompt: message,
			noOperator: fmt.Sprintf("operator.confirm %q: no operator attached (no terminal, no console), so the answer is no", message)}
	})
	a.question = true
	ans, err := e.gate.ask(ctx, a)
	switch {
	case err != nil:
		return false, err
	case ans.refusal != nil:
		r.say(storage.LevelWarn, fmt.Sprintf("operator.confirm %q: %s; so the answer is no", message, ans.refusal.Message))
		return false, nil
	case ans.outcome == outcomeRunEnded:
		return false, errors.New(runEndedWaiting)
	case ans.outcome == outcomeExpired:
		r.say(storage.LevelWarn, fmt.Sprintf("request %d expired without a decision: answering no", ans.req.ID))
	}
	return ans.approved(), nil
}

// AttachOperator says an operator is watching (a console); requests then
// wait for a decision instead of being answered "no" at once.
func (e *Engine) AttachOperator() (detach func()) { return e.gate.attach() }

// Approve decides a request approve-once: the waiting call goes through,
// or, with no call waiting any more, one retry claim opens that only the
// identical operation consumes.
func (e *Engine) Approve(actor Actor, id uint64, reason string) (Request, error) {
	if err := e.authorize(actor, fmt.Sprintf("approve request %d", id)); err != nil {
		return Request{}, err
	}
	d, err := e.gate.decide(actor, id, ApproveOnce, reason)
	return d.Request, err
}

// ApproveAlways decides a request approve-always: an exact rule for the
// operation is added to the subject's policy, at a new revision.
func (e *Engine) ApproveAlways(actor Actor, id uint64, reason string) (Request, Rule, Policy, error) {
	if err := e.authorize(actor, fmt.Sprintf("approve-always request %d", id)); err != nil {
		return Request{}, Rule{}, Policy{}, err
	}
	d, err := e.gate.decide(actor, id, ApproveAlways, reason)
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

// Deny decides a request deny; the reason reaches the hook.
func (e *Engine) Deny(actor Actor, id uint64, reason string) (Request, error) {
	if err := e.authorize(actor, fmt.Sprintf("deny request %d", id)); err != nil {
		return Request{}, err
	}
	d, err := e.gate.decide(actor, id, Deny, reason)
	return d.Request, err
}

// RequestFilter selects requests to list.
type RequestFilter struct {
	// All lists decided requests too (newest first, after the pending).
	All bool
	// Limit caps the list; 0 for no cap.
	Limit int
	// Before pages through the decided requests: only those with a lower
	// id, and no pending ones (they were on the first page).
	Before uint64
}

// Requests lists requests: the pending ones first, oldest first (the
// nearest expiry first), then with All the decided ones, newest first.
// Requests whose time is up are first decided as expired.
func (e *Engine) Requests(f RequestFilter) ([]Request, error) {
	if err := e.expireRequests(); err != nil {
		return nil, err
	}
	var out []Request
	err := e.store.View(func(tx *storage.Tx) error {
		out = out[:0]
		if f.Before == 0 {
			pending, err := tx.UndecidedRequests("")
			if err != nil {
				return err
			}
			sort.SliceStable(pending, func(i, j int) bool { return pending[i].Created.Before(pending[j].Created) })
			out = append(out, pending...)
		}
		if !f.All || (f.Limit > 0 && len(out) >= f.Limit) {
			return nil
		}
		// The decided ones, newest first, by key range: only the page
		// asked for is read.
		limit := 0
		if f.Limit > 0 {
			limit = f.Limit - len(out)
		}
		decided, err := tx.RequestsBefore(f.Before, limit, func(r *storage.RequestRecord) bool { return r.Decision != nil })
		out = append(out, decided...)
		return err
	})
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, err
}

// expireRequests decides every request whose time is up (deny, by the
// engine, "expired"), waking any waiter.
func (e *Engine) expireRequests() error {
	now := time.Now()
	var any bool
	if err := e.store.View(func(tx *storage.Tx) error {
		rs, err := tx.UndecidedRequests("")
		for _, r := range rs {
			any = any || !r.Pending(now)
		}
		return err
	}); err != nil || !any {
		return err
	}
	var expired []Request
	if _, err := e.store.Update(func(tx *storage.Tx) error {
		var err error
		expired, err = perms.Expire(tx, "", time.Now())
		return err
	}); err != nil {
		return err
	}
	e.gate.wakeExpired(expired)
	return nil
}

// Request reads one request.
func (e *Engine) Request(id uint64) (Request, error) {
	var r Request
	err := e.store.View(func(tx *storage.Tx) error {
		var err error
		r, err = tx.Request(id)
		return err
	})
	if errors.Is(err, storage.ErrNotFound) {
		return r, storage.Mark(ErrNotFound, "no request %d (see `warden perms list --all`)", id)
	}
	return r, err
}

// networkFor decides, before spawn, whether a jailed hook that declares
// network gets it: by its module's policy (network, or an approve-always
// rule for exactly this hook's network), a retry claim, or else a
// permission request the operator answers (approve-once: this run;
// approve-always: a rule, so every later run of the hook; deny: the run
// goes on without network). The stream says what was decided and why.
func (e *Engine) networkFor(r *activeRun) (granted bool, details map[string]any) {
	module, hook := r.rec.Module, r.rec.Hook
	subject := "module:" + module
	fix := fmt.Sprintf("grant it with `warden perms policy set %s --network true --revision N` (see `warden perms policy show %s`)", subject, subject)
	// The content is the module alone: approve-always grants network to
	// the module (docs/operating.md: approve-always for this module); the request's
	// requester still names the hook that asked.
	op, err := perms.NewOp(subject, perms.OpNetwork, map[string]string{"module": module})
	if err != nil {
		r.say(storage.LevelWarn, fmt.Sprintf("this hook asks for network, but its request could not be made (%v): it runs without network; %s", err, fix))
		return false, map[string]any{"networkError": err.Error()}
	}
	ans, err := e.gate.ask(e.life, e.runAsk(r, op, func(req Request) askWords {
		return askWords{prompt: fmt.Sprintf("Allow network for %s/%s?", module, hook),
			noOperator: fmt.Sprintf("this hook asks for network, but module %s has no network grant and no operator is attached (no terminal, no console) to decide request %d: it runs without network; %s, or run it from a terminal to be asked",
				module, req.ID, fix)}
	}))
	if err == nil && ans.refusal != nil {
		err = ans.refusal
	}
	if err != nil {
		r.say(storage.LevelWarn, fmt.Sprintf("this hook asks for network, but module %s has no network grant and %v: it runs without network; %s", module, err, fix))
		return false, map[string]any{"networkError": err.Error()}
	}
	req, d := ans.req, ans.decision
	if req.ID == 0 { // allowed without asking
		return true, map[string]any{"networkVia": ans.via}
	}
	details = map[string]any{"networkRequest": req.ID}
	switch {
	case ans.outcome == outcomeRunEnded:
		r.say(storage.LevelWarn, fmt.Sprintf("network request %d: %s: the hook runs without network", req.ID, runEndedWaiting))
		return false, details
	case d.Verdict == ApproveAlways:
		r.say(storage.LevelInfo, fmt.Sprintf("network granted by %s (request %d, approve-always): a rule in the policy of %s now lets every hook of module %s have it", d.By, req.ID, subject, module))
		return true, details
	case d.Verdict == ApproveOnce:
		r.say(storage.LevelInfo, fmt.Sprintf("network granted for this run by %s (request %d, approve-once)", d.By, req.ID))
		return true, details
	}
	why := d.Reason
	if why == "" {
		why = "no reason given"
	}
	if ans.outcome != outcomeNoOperator {
		r.say(storage.LevelWarn, fmt.Sprintf("network denied by %s (request %d): %s: this hook runs without network; %s", d.By, req.ID, why, fix))
	}
	return false, details
}

// decisionLine is the stream line of a decision on a run's request:
// "request 3 (operator.confirm "Reboot?"): approve-once by local:root:
// looks fine".
func decisionLine(req Request, d storage.Decision) string {
	line := fmt.Sprintf("request %d (%s): %s by %s", req.ID, RequestSummary(req), d.Verdict, d.By)
	if d.Reason != "" {
		line += ": " + d.Reason
	}
	return line
}

func decisionLevel(d storage.Decision) storage.Level {
	if d.Verdict == Deny {
		return storage.LevelWarn
	}
	return storage.LevelInfo
}
