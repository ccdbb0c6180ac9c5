package engine

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/wardenhq/warden/engine/broker"
	"github.com/wardenhq/warden/engine/hooks"
	"github.com/wardenhq/warden/engine/jail"
	"github.com/wardenhq/warden/storage"
)

// finish decides the verdict, ends the broker, revokes the token and
// writes the run's end receipt.
func (r *activeRun) finish(h *RunHandle, exit hooks.Exit) {
	e := r.e
	r.egress.close() // every connection is receipted, and said, before the verdict
	if hooks.IsResourceLimit(exit.Limit) {
		// Never silent: the stream says why the hook was stopped.
		r.streamLine(storage.LevelError, "warden: the run was stopped: "+exit.Reason)
	}
	r.ingest.close() // every output line is durable before the verdict
	r.brk.End()
	ended := time.Now().UTC()
	rec := r.rec
	rec.Ended = &ended
	code := exit.Code
	rec.Exit = &code

	r.mu.Lock()
	outputs, resultErr, hookErr, cancelWhy := r.outputs, r.resultErr, r.hookErr, r.cancelWhy
	r.mu.Unlock()
	jailErr := r.explainExit(exit)
	lost, streamErr := r.ingest.failure()
	switch {
	case streamErr != nil:
		// Whatever else happened, the run's record is incomplete: that
		// is its verdict (the hook was stopped for it, see streamFailed).
		rec.Status = storage.RunFailed
		rec.Error = streamFailure(streamErr, lost)
	case exit.Limit == hooks.LimitCancelled || (cancelWhy != "" && exit.Limit == ""):
		rec.Status = storage.RunCancelled
		rec.Error = cancelWhy
	case exit.Limit != "":
		rec.Status = storage.RunFailed
		rec.Error = exit.Describe()
	case exit.Err != nil:
		rec.Status = storage.RunFailed
		rec.Error = exit.Reason
	case hookErr != nil:
		rec.Status = storage.RunFailed
		rec.Error = "the hook reported an error: " + hookErr.Name + ": " + hookErr.Message
	case exit.Code != 0 && jailErr != "":
		// The jail's own failure (bwrap's raw "setting up uid map:
		// Permission denied" says nothing of what to do): the run fails
		// with why, and the fix.
		rec.Status = storage.RunFailed
		rec.Error = jailErr
	case exit.Code != 0:
		rec.Status = storage.RunFailed
		rec.Error = exit.Describe()
	case len(r.hook.Outputs) > 0 && outputs == nil:
		rec.Status = storage.RunFailed
		if resultErr != "" {
			rec.Error = "result refused: " + resultErr
		} else {
			rec.Error = "exited 0 without a result, but the hook declares outputs (" + namesOrNone(slices.Sorted(maps.Keys(r.hook.Outputs))) + ")"
		}
	default:
		rec.Status = storage.RunSucceeded
	}
	if outputs != nil {
		rec.Outputs, _ = json.Marshal(outputs)
	}
	dur := ended.Sub(r.rec.Started)
	details := map[string]any{"run": rec.ID, "verdict": rec.Status, "exit": code, "durationMs": dur.Milliseconds(), "jail": rec.JailMode}
	if r.session != "" {
		details["session"] = r.session
	}
	if r.limits != "" {
		details["limits"] = r.limits
	}
	if exit.Signal != "" {
		details["signal"] = exit.Signal
	}
	if exit.Limit != "" && streamErr == nil {
		details["limit"] = exit.Limit
	}
	if streamErr != nil {
		details["linesLost"] = lost
	}
	if rec.Error != "" {
		details["error"] = rec.Error
	}
	if n := r.tokenRefusedUnrecorded(); len(n) > 0 {
		details["tokenRefusedUnrecorded"] = n
	}
	if r.egress != nil {
		details["destinations"] = r.egress.destinations()
		if refused := r.egress.refusedDestinations(); len(refused) > 0 {
			details["refused"] = refused
		}
		if n := r.egress.unrecorded(); n > 0 {
			details["egressRefusedUnrecorded"] = n
		}
	}
	summary := fmt.Sprintf("run %s of %s/%s %s in %s (%s)", rec.ID, rec.Module, rec.Hook, rec.Status, dur.Round(time.Millisecond), RunNote(rec.JailMode, r.limits))
	if rec.Status == storage.RunFailed {
		// Why, where every receipt list and the console's Receipts pane
		// show it (a full disk leaves no stream line to say so).
		summary += ": " + rec.Error
	}
	// The verdict lands even on a full disk: it may use the store's reserve.
	if _, err := e.store.UpdateReserved(func(tx *storage.Tx) error {
		if err := tx.PutRun(rec); err != nil {
			return err
		}
		if _, err := tx.AppendReceipt(storage.Draft{Kind: storage.KindHookEnd, Actor: r.rec.Actor, Subject: rec.Module + "/" + rec.Hook, Summary: summary, Details: details}); err != nil {
			return err
		}
		// The run's one token, revoked in the same commit (a point
		// lookup: no walk of every token ever issued).
		return e.auth.RevokeTx(tx, r.rec.Actor, r.token, "revoked session "+rec.ID)
	}); err != nil {
		rec.Error += "; recording the outcome failed: " + err.Error()
		e.auth.RevokeSession(r.rec.Actor, rec.ID)
	}
	e.bus.publish(Event{Kind: EventRun, Run: &rec})

	h.out = Outcome{Run: rec, Duration: dur}
	if r.egress != nil {
		h.out.Refused = r.egress.refusedDestinations()
	}
	e.runsMu.Lock()
	delete(e.active, rec.ID)
	e.runsMu.Unlock()
	// Late connections get run_ended for a while, then the dir goes. This
	// comes before done is closed: Close waits on done, so a run ended by
	// the shutdown has its socket and dir removed before Close returns.
	os.Remove(e.stampPath(rec.ID)) // the stage has been waited for
	r.tty.close(ttyConnectGrace)
	if r.command != nil && r.command.FreshHome {
		os.RemoveAll(r.jc.Home) // the rest of the run dir lingers with its broker
	}
	e.linger(r.brk, filepath.Dir(r.brk.SocketPath()))
	close(h.done)
}

// explainExit is the jail's word on a failed run ("" when it has none).
func (r *activeRun) explainExit(exit hooks.Exit) string {
	if r.jail == nil {
		return ""
	}
	r.mu.Lock()
	out := jail.ExitOutput{Code: exit.Code, Lines: r.lines, FirstStderr: r.firstErr}
	r.mu.Unlock()
	return r.jail.ExplainExit(out)
}

// linger keeps a finished run's broker answering run_ended for a while,
// then removes it and the run's dir.
func (e *Engine) linger(b *broker.Broker, dir string) {
	cleanup := func() {
		b.Close()
		os.RemoveAll(dir)
	}
	e.runsMu.Lock()
	if e.closing {
		// The engine is going: no lingering, and no goroutine the exiting
		// process might not wait for.
		e.runsMu.Unlock()
		cleanup()
		return
	}
	e.lingering[b] = time.AfterFunc(brokerLinger, func() {
		e.runsMu.Lock()
		delete(e.lingering, b)
		e.runsMu.Unlock()
		cleanup()
	})
	e.lingerDirs[b] = dir
	e.runsMu.Unlock()
}
