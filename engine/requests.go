package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync/atomic"
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

// waiter is a call blocked on a request's decision.
type waiter struct {
	done chan wake
	run  string
}

// wake is what a waiter is woken with: the decision, and whether the
// request was superseded (the policy changed before a decision, so the
// call asks again under the new policy).
type wake struct {
	decision   storage.Decision
	superseded bool
}

// asked is how a request ended for the call that waited on it.
type asked struct {
	req        Request
	decision   storage.Decision
	superseded bool
}

// approved reports whether the decision lets the operation through.
func (a asked) approved() bool {
	return a.decision.Verdict == ApproveOnce || a.decision.Verdict == ApproveAlways
}

// openRequest records a request for op (not yet published: the waiter
// registers first, so no decision can slip by unseen). A refusal by the
// pending limit is receipted and returned as a *Refusal.
func (e *Engine) openRequest(r *activeRun, op perms.Op) (Request, error) {
	var req Request
	var refused *perms.Refusal
	_, err := e.store.Update(func(tx *storage.Tx) error {
		refused = nil
		var err error
		req, err = perms.Open(tx, e.askFor(r, op), time.Now())
		if errors.As(err, &refused) {
			return nil // commit the refusal's receipt
		}
		return err
	})
	if err != nil {
		return Request{}, err
	}
	if refused != nil {
		return Request{}, refused
	}
	return req, nil
}

func (e *Engine) askFor(r *activeRun, op perms.Op) perms.Ask {
	return perms.Ask{Op: op, Requester: storage.Requester{Run: r.rec.ID, Module: r.rec.Module, Hook: r.rec.Hook},
		Deadline: r.rec.Deadline, TTL: r.e.requestTTL}
}

// checkOrOpen evaluates op against its subject's policy, consumes a
// matching retry claim, or else opens a request, all in one transaction.
func (e *Engine) checkOrOpen(r *activeRun, op perms.Op) (allowed bool, via string, req Request, err error) {
	var refused *perms.Refusal
	_, err = e.store.Update(func(tx *storage.Tx) error {
		refused, req = nil, Request{}
		var err error
		now := time.Now()
		if allowed, via, err = perms.Check(tx, op, r.rec.ID, now); err != nil || allowed {
			return err
		}
		req, err = perms.Open(tx, e.askFor(r, op), now)
		if errors.As(err, &refused) {
			return nil
		}
		return err
	})
	if err == nil && refused != nil {
		err = refused
	}
	return allowed, via, req, err
}

// await waits for the decision on req (opened by this call). The idle
// clock pauses meanwhile. An inline prompt (RunRequest.Confirm) is asked
// prompt; with no prompt and no operator attached, the request is denied
// at once and noOperator is said in the stream. It returns an error only
// when the run ended first.
func (e *Engine) await(ctx context.Context, r *activeRun, req Request, prompt, noOperator string) (asked, error) {
	w := &waiter{done: make(chan wake, 1), run: r.rec.ID}
	e.reqMu.Lock()
	e.waiting[req.ID] = w
	e.reqMu.Unlock()
	defer func() {
		e.reqMu.Lock()
		delete(e.waiting, req.ID)
		e.reqMu.Unlock()
	}()
	e.bus.publish(Event{Kind: EventRequest, Request: &req})
	// The request was stored before the waiter registered: a decision
	// made in between (a CLI that listed it at once) woke nobody. Take it
	// from the store; an approve-once claim it opened is this call's.
	if early, ok := e.decidedEarly(r, req); ok {
		return early, nil
	}
	if p := r.proc.Load(); p != nil {
		resume := p.PauseIdle()
		defer resume()
	}

	ctx, stop := context.WithDeadline(ctx, req.Expires)
	defer stop()
	if r.confirm != nil {
		// The inline prompt answers, unless the console decides first;
		// whichever comes first wins.
		actor := Actor(r.rec.Actor)
		go func() {
			ok, err := r.confirm(ctx, prompt)
			if err != nil || ctx.Err() != nil {
				return
			}
			v := Deny
			if ok {
				v = ApproveOnce
			}
			// The run's starter answering its own terminal prompt (it was
			// authorized at StartRun): not through the facade's check.
			e.decide(actor, req.ID, v, "answered at the terminal")
		}()
	} else if e.operators.Load() == 0 {
		r.say(storage.LevelWarn, noOperator)
		e.decide(internalActor, req.ID, Deny, "no operator attached")
	}
	select {
	case wk := <-w.done:
		if !wk.superseded && wk.decision.Reason != "no operator attached" {
			// The run's stream says who decided what, and why: an
			// approval as much as a denial (the refusal without an
			// operator has its own line above).
			r.say(decisionLevel(wk.decision), decisionLine(req, wk.decision))
		}
		return asked{req: req, decision: wk.decision, superseded: wk.superseded}, nil
	case <-ctx.Done():
	}
	expired := errors.Is(ctx.Err(), context.DeadlineExceeded)
	why := "the run ended before a decision"
	if expired {
		why = "expired"
	} else if c := context.Cause(ctx); c != nil && c != context.Canceled {
		why = c.Error() // the caller said why it stopped waiting
	}
	e.decide(internalActor, req.ID, Deny, why)
	// Whoever decided (this deny, or a decision that raced it), the
	// stored decision stands; its wake is in w.done unless it is still
	// on its way, and then the store has it.
	res := asked{req: req}
	select {
	case wk := <-w.done:
		res.decision, res.superseded = wk.decision, wk.superseded
	default:
		got, err := e.Request(req.ID)
		if err != nil || got.Decision == nil {
			res.decision = storage.Decision{Verdict: Deny, By: perms.EngineActor, At: time.Now().UTC(), Reason: why}
		} else {
			res.decision = *got.Decision
		}
	}
	if !expired {
		return res, errors.New("the run ended while waiting for the operator")
	}
	return res, nil
}

// decidedEarly returns the stored decision of req if it already has one,
// consuming the retry claim an approve-once left open for it.
func (e *Engine) decidedEarly(r *activeRun, req Request) (asked, bool) {
	got, ok := e.earlyDecision(req.ID, r.rec.ID)
	if !ok {
		return asked{}, false
	}
	return asked{req: got, decision: *got.Decision}, true
}

// earlyDecision returns request id as stored if it is already decided,
// consuming for consumer the retry claim an approve-once left open: a
// waiter registers after its request is stored, so a decision made in
// between (a console or CLI that saw it at once) woke nobody.
func (e *Engine) earlyDecision(id uint64, consumer string) (Request, bool) {
	got, err := e.Request(id)
	if err != nil || got.Decision == nil {
		return Request{}, false
	}
	if got.Decision.Verdict == ApproveOnce && got.Claim != nil && !got.Claim.Used {
		op := perms.Op{Subject: got.Subject, Operation: got.Operation, Content: got.Content, Digest: got.Digest}
		e.store.Update(func(tx *storage.Tx) error {
			_, _, err := perms.Check(tx, op, consumer, time.Now())
			return err
		})
	}
	return got, true
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
	for attempt := 0; ; attempt++ {
		allowed, _, req, err := e.checkOrOpen(r, op)
		var refused *perms.Refusal
		switch {
		case errors.As(err, &refused):
			return &protocol.Error{Code: protocol.CodePermissionDenied, Message: refused.Message}
		case err != nil:
			return err
		case allowed:
			return nil
		}
		r.say(storage.LevelWarn, fmt.Sprintf("request %d: %s needs a decision (`warden perms show %d`)", req.ID, sum, req.ID))
		res, err := e.await(ctx, r, req,
			fmt.Sprintf("Allow %s for %s/%s (request %d)?", sum, r.rec.Module, r.rec.Hook, req.ID),
			fmt.Sprintf("%s is not allowed by the policy of %s, and no operator is attached (no terminal, no console) to decide request %d, so it is denied (allow it with `warden perms policy set %s ...`)",
				sum, subject, req.ID, subject))
		if err != nil {
			return &protocol.Error{Code: protocol.CodeRunEnded, Message: operation + ": " + err.Error()}
		}
		if res.superseded && attempt < 8 {
			continue // the policy changed: evaluate again, ask again
		}
		if res.approved() {
			return nil
		}
		d := res.decision
		msg := fmt.Sprintf("%s denied by %s (request %d)", sum, d.By, req.ID)
		if d.Reason != "" {
			msg += ": " + d.Reason
		}
		return &protocol.Error{Code: protocol.CodePermissionDenied, Message: msg}
	}
}

// confirm runs operator.confirm for a run: a question, not governed by a
// policy.
func (e *Engine) confirm(ctx context.Context, r *activeRun, message string) (bool, error) {
	op, err := perms.NewOp("module:"+r.rec.Module, perms.OpConfirm, map[string]any{"message": message})
	if err != nil {
		return false, err
	}
	req, err := e.openRequest(r, op)
	var refused *perms.Refusal
	if errors.As(err, &refused) {
		r.say(storage.LevelWarn, fmt.Sprintf("operator.confirm %q: %s; so the answer is no", message, refused.Message))
		return false, nil
	}
	if err != nil {
		return false, err
	}
	res, err := e.await(ctx, r, req, message,
		fmt.Sprintf("operator.confirm %q: no operator attached (no terminal, no console), so the answer is no", message))
	if err != nil {
		return false, err
	}
	if res.decision.By == perms.EngineActor && res.decision.Reason == "expired" {
		r.say(storage.LevelWarn, fmt.Sprintf("request %d expired without a decision: answering no", req.ID))
	}
	return res.approved(), nil
}

// AttachOperator says an operator is watching (a console); requests then
// wait for a decision instead of being answered "no" at once.
func (e *Engine) AttachOperator() (detach func()) {
	e.operators.Add(1)
	var once atomic.Bool
	return func() {
		if once.CompareAndSwap(false, true) {
			e.operators.Add(-1)
		}
	}
}

// DecideRequest records a decision and wakes the waiting call. A decision
// the rules refuse (the request expired; the policy changed since it was
// made) is receipted and returned as a *Refusal.
func (e *Engine) DecideRequest(actor Actor, id uint64, verdict, reason string) (Request, error) {
	if err := e.authorize(actor, fmt.Sprintf("decide request %d (%s)", id, verdict)); err != nil {
		return Request{}, err
	}
	d, err := e.decide(actor, id, verdict, reason)
	return d.Request, err
}

func (e *Engine) decide(actor Actor, id uint64, verdict, reason string) (perms.Decided, error) {
	return e.decideWith(id, func(tx *storage.Tx, consumer string) (perms.Decided, error) {
		return perms.Decide(tx, id, verdict, string(actor), reason, time.Now(), consumer)
	})
}

// decideWith records a decision on request id (decideIn, given the
// waiting call's consumer), then wakes that call and tells the
// subscribers. Every decision goes through here. reqMu is held from the
// waiter lookup to the wake: a waiter that registers meanwhile then finds
// the decision in the store (earlyDecision), so no decision is lost
// between the two.
func (e *Engine) decideWith(id uint64, decideIn func(tx *storage.Tx, consumer string) (perms.Decided, error)) (perms.Decided, error) {
	e.reqMu.Lock()
	defer e.reqMu.Unlock()
	w := e.waiting[id]
	consumer := ""
	if w != nil {
		consumer = w.run
	}
	var d perms.Decided
	var refused *perms.Refusal
	_, err := e.store.Update(func(tx *storage.Tx) error {
		refused = nil
		var err error
		d, err = decideIn(tx, consumer)
		if errors.As(err, &refused) {
			return nil // commit the refusal and the request's closing
		}
		return err
	})
	if err != nil {
		return d, err
	}
	// The request is decided now (by this verdict, or closed by the
	// refusal): wake its waiter and tell the subscribers.
	if req := d.Request; req.Decision != nil {
		if w != nil {
			select {
			case w.done <- wake{decision: *req.Decision, superseded: refused != nil && refused.Reason == perms.RefusedStale}:
			default:
			}
		}
		e.bus.publish(Event{Kind: EventRequest, Request: &req})
	}
	if refused != nil {
		return d, refused
	}
	return d, nil
}

// Approve decides a request approve-once: the waiting call goes through,
// or, with no call waiting any more, one retry claim opens that only the
// identical operation consumes.
func (e *Engine) Approve(actor Actor, id uint64, reason string) (Request, error) {
	if err := e.authorize(actor, fmt.Sprintf("approve request %d", id)); err != nil {
		return Request{}, err
	}
	d, err := e.decide(actor, id, ApproveOnce, reason)
	return d.Request, err
}

// ApproveAlways decides a request approve-always: an exact rule for the
// operation is added to the subject's policy, at a new revision.
func (e *Engine) ApproveAlways(actor Actor, id uint64, reason string) (Request, Rule, Policy, error) {
	if err := e.authorize(actor, fmt.Sprintf("approve-always request %d", id)); err != nil {
		return Request{}, Rule{}, Policy{}, err
	}
	d, err := e.decide(actor, id, ApproveAlways, reason)
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
	d, err := e.decide(actor, id, Deny, reason)
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
	for i := range expired {
		req := expired[i]
		e.reqMu.Lock()
		w := e.waiting[req.ID]
		e.reqMu.Unlock()
		if w != nil {
			select {
			case w.done <- wake{decision: *req.Decision}:
			default:
			}
		}
		e.bus.publish(Event{Kind: EventRequest, Request: &req})
	}
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
	for attempt := 0; ; attempt++ {
		allowed, via, req, err := e.checkOrOpen(r, op)
		if err != nil {
			r.say(storage.LevelWarn, fmt.Sprintf("this hook asks for network, but module %s has no network grant and %v: it runs without network; %s", module, err, fix))
			return false, map[string]any{"networkError": err.Error()}
		}
		if allowed {
			return true, map[string]any{"networkVia": via}
		}
		res, err := e.await(e.life, r, req, fmt.Sprintf("Allow network for %s/%s?", module, hook),
			fmt.Sprintf("this hook asks for network, but module %s has no network grant and no operator is attached (no terminal, no console) to decide request %d: it runs without network; %s, or run it from a terminal to be asked",
				module, req.ID, fix))
		if err == nil && res.superseded && attempt < 8 {
			continue
		}
		details = map[string]any{"networkRequest": req.ID}
		d := res.decision
		switch {
		case err != nil:
			r.say(storage.LevelWarn, fmt.Sprintf("network request %d: %v: the hook runs without network", req.ID, err))
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
		if d.By != perms.EngineActor || d.Reason != "no operator attached" {
			r.say(storage.LevelWarn, fmt.Sprintf("network denied by %s (request %d): %s: this hook runs without network; %s", d.By, req.ID, why, fix))
		}
		return false, details
	}
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
