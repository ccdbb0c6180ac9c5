package storage

import (
	bolt "go.etcd.io/bbolt"
)

// maxBatch bounds how many writers share one transaction, so a flood of
// appends still commits in steady, bounded steps.
const maxBatch = 1024

type commitOp struct {
	fn   func(*Tx) error
	tx   *Tx // the op's view of the last attempt; holds appended receipts
	done chan error
}

// Update runs fn in a write transaction shared with whatever other writers
// are queued at the same moment (group commit): one fsync serves them all.
// A writer waits for at most the commit in flight plus its own; there is no
// delay timer, so a lone writer commits at once. fn may be run more than
// once (if another writer in its batch fails) and must have no effects
// outside the Tx. It returns the receipts fn appended, as committed.
func (s *Store) Update(fn func(*Tx) error) ([]Receipt, error) {
	op := &commitOp{fn: fn, done: make(chan error, 1)}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return nil, ErrClosed
	}
	s.commits <- op
	s.mu.RUnlock()
	if err := <-op.done; err != nil {
		return nil, err
	}
	return op.tx.appended, nil
}

// View runs fn in a read-only transaction. A panic or memory fault in
// it (bbolt reading a damaged page) is returned as a *CorruptError
// naming the file, not let through to kill the process.
func (s *Store) View(fn func(*Tx) error) error {
	return s.noteBroken(guarded(s.db.Path(), func() error {
		return s.db.View(func(btx *bolt.Tx) error {
			return fn(&Tx{s: s, btx: btx})
		})
	}))
}

func (s *Store) committer() {
	defer s.wg.Done()
	batch := make([]*commitOp, 0, maxBatch)
	for op := range s.commits {
		batch = append(batch[:0], op)
	drain:
		for len(batch) < maxBatch {
			select {
			case more, ok := <-s.commits:
				if !ok {
					break drain
				}
				batch = append(batch, more)
			default:
				break drain
			}
		}
		s.runBatch(batch)
	}
}

// runBatch commits ops together. If one op fails, the transaction is rolled
// back, that op is run alone so its error reflects only its own effect, and
// the rest are retried together.
func (s *Store) runBatch(ops []*commitOp) {
	ce := s.broken.Load()
	if ce == nil {
		ce = s.damage.Load()
	}
	if ce != nil {
		for _, op := range ops {
			op.done <- ce
		}
		return
	}
	// All of ops in one transaction. head advances as they append
	// receipts, and is kept only if the transaction commits.
	failed := -1
	var failErr error
	head := s.head
	// A damaged page must fail the batch, not the committer (and with
	// it the process): bbolt rolls the transaction back on a panic.
	err := guarded(s.db.Path(), func() error {
		return s.db.Update(func(btx *bolt.Tx) error {
			for i, op := range ops {
				op.tx = &Tx{s: s, btx: btx, head: &head}
				if err := op.fn(op.tx); err != nil {
					failed, failErr = i, err
					return err
				}
			}
			return nil
		})
	})
	s.noteBroken(err)
	if err == nil {
		s.head = head
		if s.onCommit != nil {
			var rs []Receipt
			for _, op := range ops {
				rs = append(rs, op.tx.appended...)
			}
			if len(rs) > 0 {
				s.onCommit(rs)
			}
		}
		for _, op := range ops {
			for _, fn := range op.tx.after {
				fn()
			}
			op.done <- nil
		}
		return
	}
	if failed < 0 { // the commit itself failed: nobody's writes landed
		for _, op := range ops {
			op.done <- err
		}
		return
	}
	bad := ops[failed]
	if len(ops) == 1 {
		bad.done <- failErr
		return
	}
	rest := append(append([]*commitOp(nil), ops[:failed]...), ops[failed+1:]...)
	s.runBatch(rest)
	s.runBatch([]*commitOp{bad})
}
