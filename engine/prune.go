package engine

import (
	"fmt"

	"github.com/wardenhq/warden/storage"
)

// pruneBatch bounds the streams one pruning transaction deletes, so the
// writers queued behind it (run starts, ingesters) wait at most one small
// batch.
const pruneBatch = 64

// startPruner starts the goroutine that keeps the stored stream bytes
// across runs under Options.StreamBudget. Ingesters wake it when a write
// leaves the stored total over the budget; it deletes whole streams,
// oldest first, through storage's index by age (no run record is read),
// in bounded batches, until the total is back under a low-water mark
// (budget less 1/16), so it wakes again only after that much more output.
// It never runs inside a run's start transaction: a run start costs the
// same over the budget as under it.
func (e *Engine) startPruner() {
	e.pruneKick, e.pruned = make(chan struct{}, 1), make(chan struct{})
	e.kickPruner() // a store left over budget (a smaller budget, a crash)
	go func() {
		defer close(e.pruned)
		for {
			select {
			case <-e.life.Done():
				return
			case <-e.pruneKick:
				e.pruneStreams()
			}
		}
	}()
}

// kickPruner wakes the pruner; it never blocks.
func (e *Engine) kickPruner() {
	select {
	case e.pruneKick <- struct{}{}:
	default: // already awake or woken
	}
}

// pruneStreams deletes the oldest streams, one bounded batch per commit,
// until the stored total is at most the low-water mark or nothing more can
// go (the rest belong to live runs). A failure (say a corrupt stream
// record) ends this pass but never stops a run; the first one in an
// engine's life is receipted (stream.error), so the operator learns why
// the budget is not kept without a receipt on every write that wakes the
// pruner again. Passes are serialized (pruneMu), so a caller that runs one
// beside the pruner returns after any pass in flight has finished.
func (e *Engine) pruneStreams() {
	e.pruneMu.Lock()
	defer e.pruneMu.Unlock()
	budget := e.opts.StreamBudget
	if e.streamTotal() <= budget {
		return // woken for a total another pass has already brought down
	}
	target := budget - budget/16
	for e.life.Err() == nil {
		var done bool
		_, err := e.store.Update(func(tx *storage.Tx) (err error) {
			_, done, err = tx.PruneStreams(target, pruneBatch)
			return err
		})
		if err != nil {
			if e.life.Err() == nil && !e.pruneFailed {
				e.pruneFailed = true
				e.store.AppendReceipt(storage.Draft{Kind: storage.KindStreamError, Actor: "engine", Subject: "streams",
					Summary: fmt.Sprintf("pruning old streams failed, so the stream budget (%d bytes) is not kept: %v (run `warden doctor`)", budget, err),
					Details: map[string]any{"error": err.Error(), "budget": budget}})
			}
			return
		}
		if done {
			return
		}
	}
}

// streamTotal is the stream text bytes stored across runs.
func (e *Engine) streamTotal() (n uint64) {
	e.store.View(func(tx *storage.Tx) error {
		n = tx.StreamTotal()
		return nil
	})
	return n
}
