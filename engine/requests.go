package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"warden/storage"
)

// Request is a permission request or an operator question.
type Request = storage.RequestRecord

// Verdicts.
const (
	ApproveOnce   = storage.ApproveOnce
	ApproveAlways = storage.ApproveAlways
	Deny          = storage.Deny
)

// DefaultRequestTTL is how long a request waits for a decision, at most.
const DefaultRequestTTL = time.Hour

// waiter is a run goroutine blocked on a request's decision.
type waiter struct {
	done     chan storage.Decision
	revision uint64
}

// openRequest stores a new request (immutable from here on but for its
// decision) and its receipt, then publishes it.
func (e *Engine) openRequest(r *activeRun, subject, operation string, content any, revision uint64) (Request, error) {
	raw, err := json.Marshal(content)
	if err != nil {
		return Request{}, err
	}
	if raw, err = storage.CanonicalJSON(raw); err != nil {
		return Request{}, err
	}
	sum := sha256.Sum256(append([]byte(operation+"\x00"), raw...))
	now := time.Now().UTC()
	expires := now.Add(DefaultRequestTTL)
	if r.rec.Deadline.Before(expires) {
		expires = r.rec.Deadline
	}
	req := Request{Subject: subject, Requester: storage.Requester{Run: r.rec.ID, Module: r.rec.Module, Hook: r.rec.Hook},
		Operation: operation, Content: raw, Digest: hex.EncodeToString(sum[:]), Revision: revision, Created: now, Expires: expires}
	_, err = e.store.Update(func(tx *storage.Tx) error {
		id, err := tx.NextRequestID()
		if err != nil {
			return err
		}
		req.ID = id
		if err := tx.PutRequest(req); err != nil {
			return err
		}
		_, err = tx.AppendReceipt(storage.Draft{Kind: "request.open", Actor: r.actor, Subject: subject,
			Summary: fmt.Sprintf("request %d: %s by %s/%s", id, operation, r.rec.Module, r.rec.Hook),
			Details: map[string]any{"request": id, "operation": operation, "run": r.rec.ID, "digest": req.Digest}})
		return err
	})
	if err != nil {
		return Request{}, err
	}
	e.bus.publish(Event{Kind: EventRequest, Request: &req})
	return req, nil
}

// confirm runs operator.confirm for a run.
func (e *Engine) confirm(ctx context.Context, r *activeRun, message string) (bool, error) {
	req, err := e.openRequest(r, "module:"+r.rec.Module, "operator.confirm", map[string]any{"message": message}, 0)
	if err != nil {
		return false, err
	}
	if p := r.proc.Load(); p != nil {
		resume := p.PauseIdle()
		defer resume()
	}
	w := &waiter{done: make(chan storage.Decision, 1)}
	e.reqMu.Lock()
	e.waiting[req.ID] = w
	e.reqMu.Unlock()
	defer func() {
		e.reqMu.Lock()
		delete(e.waiting, req.ID)
		e.reqMu.Unlock()
	}()

	ctx, stop := context.WithDeadline(ctx, req.Expires)
	defer stop()
	if r.confirm != nil {
		// The inline prompt answers, unless the console or another CLI
		// decides first; whichever comes first wins.
		go func() {
			ok, err := r.confirm(ctx, message)
			if err != nil || ctx.Err() != nil {
				return
			}
			v := Deny
			if ok {
				v = ApproveOnce
			}
			e.DecideRequest(Actor(r.rec.Actor), req.ID, v, "answered at the terminal")
		}()
	} else if e.operators.Load() == 0 {
		r.streamLine(storage.LevelWarn, fmt.Sprintf("operator.confirm %q: no operator attached (no terminal, no console), so the answer is no", message))
		e.DecideRequest("engine", req.ID, Deny, "no operator attached")
	}
	select {
	case d := <-w.done:
		return d.Verdict == ApproveOnce || d.Verdict == ApproveAlways, nil
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			e.DecideRequest("engine", req.ID, Deny, "expired without a decision")
			r.streamLine(storage.LevelWarn, fmt.Sprintf("request %d expired without a decision: answering no", req.ID))
			return false, nil
		}
		e.DecideRequest("engine", req.ID, Deny, "the run ended before a decision")
		return false, errors.New("the run ended while waiting for the operator")
	}
}

// AttachOperator says an operator is watching (a console); requests then
// wait for a decision instead of being answered "no" at once.
func (e *Engine) AttachOperator() (detach func()) {
	e.operators.Add(1)
	var once bool
	return func() {
		if !once {
			once = true
			e.operators.Add(-1)
		}
	}
}

// ErrAlreadyDecided is returned when a request already has a decision.
var ErrAlreadyDecided = errors.New("request already decided")

// DecideRequest records a decision and wakes the waiting call.
func (e *Engine) DecideRequest(actor Actor, id uint64, verdict, reason string) (Request, error) {
	if verdict != ApproveOnce && verdict != ApproveAlways && verdict != Deny {
		return Request{}, fmt.Errorf("unknown verdict %q (want %s, %s or %s)", verdict, ApproveOnce, ApproveAlways, Deny)
	}
	var req Request
	_, err := e.store.Update(func(tx *storage.Tx) error {
		var err error
		if req, err = tx.Request(id); err != nil {
			if errors.Is(err, storage.ErrNotFound) {
				return fmt.Errorf("no request %d (see `warden perms list`): %w", id, ErrNotFound)
			}
			return err
		}
		if req.Decision != nil {
			return fmt.Errorf("request %d was already decided (%s by %s): %w", id, req.Decision.Verdict, req.Decision.By, ErrAlreadyDecided)
		}
		req.Decision = &storage.Decision{Verdict: verdict, By: string(actor), At: time.Now().UTC(), Reason: reason}
		if err := tx.PutRequest(req); err != nil {
			return err
		}
		_, err = tx.AppendReceipt(storage.Draft{Kind: "request.decide", Actor: string(actor), Subject: req.Subject,
			Summary: fmt.Sprintf("request %d (%s): %s", id, req.Operation, verdict),
			Details: map[string]any{"request": id, "verdict": verdict, "reason": reason}})
		return err
	})
	if err != nil {
		return Request{}, err
	}
	e.reqMu.Lock()
	w := e.waiting[id]
	e.reqMu.Unlock()
	if w != nil {
		select {
		case w.done <- *req.Decision:
		default:
		}
	}
	e.bus.publish(Event{Kind: EventRequest, Request: &req})
	return req, nil
}

// Requests lists requests, newest first (limit 0 for all).
func (e *Engine) Requests(limit int) (rs []Request, err error) {
	err = e.store.View(func(tx *storage.Tx) error {
		rs, err = tx.Requests(limit)
		return err
	})
	return rs, err
}
