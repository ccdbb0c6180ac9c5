package tui

import (
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/wardenhq/warden/engine"
)

// receiptReads is the real engine, counting walks from a run's start
// (runEnd's fallback).
type receiptReads struct {
	engine.Facade
	walks atomic.Int32
}

func (r *receiptReads) Receipts(f engine.ReceiptFilter) ([]engine.Receipt, error) {
	if !f.Since.IsZero() {
		r.walks.Add(1)
	}
	return r.Facade.Receipts(f)
}

// endedRuns runs a quick hook n times with gap config writes (one receipt
// each) after every run: a log where ends stand among other receipts.
func endedRuns(t testing.TB, e engine.Facade, n, gap int) []engine.RunRecord {
	t.Helper()
	addModule(t, e, "q", map[string]string{"quick": "true"}, nil)
	var runs []engine.RunRecord
	for i := range n {
		runs = append(runs, runHook(t, e, "q", "quick").Run)
		for j := range gap {
			if err := e.SetConfig("local:test", "q", fmt.Sprintf("k%d", j), fmt.Sprint(i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	return runs
}

// TestRunEndFindsItsReceipt: each ended run's hook.end is found by its
// end time among many receipts, without the walk from its start.
func TestRunEndFindsItsReceipt(t *testing.T) {
	real := newEngine(t)
	runs := endedRuns(t, real, 12, 40)
	e := &receiptReads{Facade: real}
	for _, r := range runs {
		rc, ok, err := runEnd(e, r)
		if err != nil || !ok {
			t.Fatalf("run %s: found %v, %v", r.ID, ok, err)
		}
		var det struct {
			Run string `json:"run"`
		}
		if json.Unmarshal(rc.Details, &det); rc.Kind != engine.KindHookEnd || det.Run != r.ID {
			t.Errorf("run %s: got %s of run %q", r.ID, rc.Kind, det.Run)
		}
	}
	if n := e.walks.Load(); n != 0 {
		t.Errorf("%d walks from a run's start", n)
	}
	// A run still going has no end to find.
	running := runs[0]
	running.Ended = nil
	if _, ok, err := runEnd(e, running); ok || err != nil {
		t.Errorf("a run without an end: found %v, %v", ok, err)
	}
}

// BenchmarkRunEnd finds the hook.end of the first of 20 runs in a log of
// about 4,000 receipts: by its end time (runEnd) against the walk of
// every receipt since its start (what the Streams title did before),
// the baseline, in the same run.
func BenchmarkRunEnd(b *testing.B) {
	e := newEngine(b)
	runs := endedRuns(b, e, 20, 200)
	r := runs[0]
	b.Run("walk-since-start", func(b *testing.B) {
		for b.Loop() {
			rs, err := e.Receipts(engine.ReceiptFilter{Kind: engine.KindHookEnd, Since: r.Started})
			if _, ok := endOf(rs, r.ID); err != nil || !ok {
				b.Fatal("not found", err)
			}
		}
	})
	b.Run("by-end-time", func(b *testing.B) {
		for b.Loop() {
			if _, ok, err := runEnd(e, r); err != nil || !ok {
				b.Fatal("not found", err)
			}
		}
	})
}
