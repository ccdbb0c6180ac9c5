package engine

import (
	"warden/storage"
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
// go (the rest belong to live runs). A failure (a corrupt stream record,
// a closed store) only ends this pass: pruning never stops a run. It is
// safe to run beside the pruner: each batch decides inside its own
// transaction.
func (e *Engine) pruneStreams() {
	budget := e.opts.StreamBudget
	if e.streamTotal() <= budget {
		return // woken for a total another pass has already brought down
	}
	target := budget - budget/16
	for e.life.Err() == nil {
		var done bool
		if _, err := e.store.Update(func(tx *storage.Tx) (err error) {
			_, done, err = tx.PruneStreams(target, pruneBatch)
			return err
		}); err != nil || done {
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
