package engine

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/wardenhq/warden/storage"
)

// LinesEvent is a batch of one run's stream lines, durable before it is
// published.
type LinesEvent struct {
	Run   string         `json:"run"`
	Lines []storage.Line `json:"lines"`
}

// ingester makes a run's stream lines durable in chunks. Producers (the
// stdout and stderr readers, log frames) hand it batches; it folds
// whatever has queued into one storage write, which the committer may in
// turn fold with other writers.
//
// Writes are spaced: a line that arrives after a quiet spell is written
// at once, and the lines after it wait until streamCommitEvery has
// passed since that write began, so a run's lines cost at most one
// commit (and its fsyncs) per streamCommitEvery, however they arrive: in
// one pipe read, or one `warden hook log` call each, milliseconds apart
// (a commit each, without the spacing). A full batch (maxIngestLines, or
// half the budget) is written at once, and close writes what is left:
// every line is durable before the run's verdict. Lines are published
// only once written, so a line anyone was shown survives the engine's
// death; one still waiting when the engine is killed outright is lost
// with it, like a line in the hook's pipe.
//
// Memory is bounded per run: the text queued and being written is held
// to ingestBudget bytes. A producer that would go over it waits in add,
// which stops it reading the hook's pipe or socket, so the backpressure
// lands on the hook and never on the engine; no line is dropped on the
// way in. (One batch larger than the whole budget is let in alone.)
//
// If storage refuses a write (a full disk), the lines cannot be kept: the
// ingester counts them as lost from then on, without trying again, and
// calls onFail once, so the run can be stopped and end failed, with one
// receipt (its hook.end) instead of one per chunk.
type ingester struct {
	e     *Engine
	run   string
	limit uint64
	every time.Duration // the least time from one write's start to the next's
	in    chan ingestBatch
	done  chan struct{}

	mu     sync.RWMutex // closed and the close of in
	closed bool

	budgetMu sync.Mutex
	budgetCh chan struct{} // closed and replaced when budget is given back
	queued   int           // bytes admitted by add and not yet written or dropped

	// onFail, when set, is called once (from the loop) at the first
	// storage failure.
	onFail func(error)

	failMu  sync.Mutex
	failErr error  // the first storage failure
	lost    uint64 // lines not stored since then

}

// ingestBatch is a producer's lines and the budget they hold.
type ingestBatch struct {
	lines []storage.Line
	size  int
}

const (
	ingestQueue    = 256
	maxChunkLines  = 4096
	maxChunkBytes  = 1 << 20
	maxIngestLines = 64 * 1024 // per storage write
	// ingestBudget bounds one run's queued stream text (see ingester).
	ingestBudget = 8 << 20
	// lineOverhead is what a queued line costs beside its text.
	lineOverhead = 64
	// streamCommitEvery spaces one run's stream writes (see ingester):
	// short enough that a console showing the lines keeps up, long
	// enough that a hook's calls share commits.
	streamCommitEvery = 50 * time.Millisecond
)

func (e *Engine) newIngester(run string) *ingester {
	every := e.opts.streamCommitEvery
	if every <= 0 {
		every = streamCommitEvery
	}
	g := &ingester{e: e, run: run, limit: e.opts.StreamLimit, every: every, in: make(chan ingestBatch, ingestQueue), done: make(chan struct{}), budgetCh: make(chan struct{})}
	go g.loop()
	return g
}

func batchSize(lines []storage.Line) int {
	n := 0
	for i := range lines {
		n += len(lines[i].Text) + lineOverhead
	}
	return n
}

// add queues lines, waiting while the run is over its memory budget;
// after close (a late log frame) they are dropped.
func (g *ingester) add(lines []storage.Line) {
	size := batchSize(lines)
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.closed {
		return
	}
	g.acquire(size) // the loop keeps draining, so this cannot stall close
	g.in <- ingestBatch{lines: lines, size: size}
}

// acquire waits until size bytes fit in the budget (or nothing else is
// queued) and takes them.
func (g *ingester) acquire(size int) {
	for {
		g.budgetMu.Lock()
		if g.queued == 0 || g.queued+size <= ingestBudget {
			g.queued += size
			g.budgetMu.Unlock()
			return
		}
		wait := g.budgetCh
		g.budgetMu.Unlock()
		<-wait
	}
}

// release gives size bytes back and wakes the producers waiting for them.
func (g *ingester) release(size int) {
	g.budgetMu.Lock()
	g.queued -= size
	close(g.budgetCh)
	g.budgetCh = make(chan struct{})
	g.budgetMu.Unlock()
}

// close flushes everything queued and stops the ingester.
func (g *ingester) close() {
	g.mu.Lock()
	if !g.closed {
		g.closed = true
		close(g.in)
	}
	g.mu.Unlock()
	<-g.done
}

// failure is the lines lost since the first storage failure, and that
// failure (nil: none); final once close has returned.
func (g *ingester) failure() (lost uint64, err error) {
	g.failMu.Lock()
	defer g.failMu.Unlock()
	return g.lost, g.failErr
}

func (g *ingester) loop() {
	defer close(g.done)
	var batches []ingestBatch
	var last time.Time // when the last write began
	wait := time.NewTimer(time.Hour)
	wait.Stop()
	for batch := range g.in {
		// Collect what has queued, then flatten it once at its exact
		// size: appending batch after batch to one slice re-copied a
		// flood's lines several times over.
		n, size := len(batch.lines), batch.size
		batches = append(batches[:0], batch)
		full := func() bool { return n >= maxIngestLines || size >= ingestBudget/2 }
		var due <-chan time.Time // nil: take only what has queued
		if left := g.every - time.Since(last); !last.IsZero() && left > 0 {
			wait.Reset(left)
			due = wait.C
		}
	more:
		for !full() {
			select {
			case b, ok := <-g.in:
				if !ok {
					break more
				}
				batches, n, size = append(batches, b), n+len(b.lines), size+b.size
				continue
			default:
			}
			if due == nil {
				break more
			}
			select {
			case b, ok := <-g.in:
				if !ok {
					break more
				}
				batches, n, size = append(batches, b), n+len(b.lines), size+b.size
			case <-due:
				due = nil
				break more
			}
		}
		wait.Stop() // since Go 1.23 no stale tick is left to drain
		last = time.Now()
		pending := batch.lines
		if len(batches) > 1 {
			pending = make([]storage.Line, 0, n)
			for _, b := range batches {
				pending = append(pending, b.lines...)
			}
		}
		clear(batches) // let the producers' slices go
		g.write(pending)
		g.release(size)
	}
}

// write stores lines (numbering them in place) and publishes them. After
// a storage failure it only counts them as lost.
func (g *ingester) write(lines []storage.Line) {
	g.failMu.Lock()
	failed := g.failErr != nil
	if failed {
		g.lost += uint64(len(lines))
	}
	g.failMu.Unlock()
	if failed {
		return
	}
	var total uint64
	_, err := g.e.store.Update(func(tx *storage.Tx) error {
		for start := 0; start < len(lines); {
			end, size := start, 0
			for end < len(lines) && end-start < maxChunkLines && (size == 0 || size+len(lines[end].Text) <= maxChunkBytes) {
				size += len(lines[end].Text)
				end++
			}
			got, _, err := tx.AppendLines(g.run, lines[start:end], g.limit)
			if err != nil {
				return err
			}
			if len(got) > 0 && &got[0] != &lines[start] {
				copy(lines[start:end], got) // numbered elsewhere: bring the numbers back
			}
			start = end
		}
		total = tx.StreamTotal()
		return nil
	})
	if err != nil {
		// Storage refused the write (disk full, closed store). The lines
		// cannot be kept, and the run cannot be recorded honestly from
		// here on: say so once, and let the run end failed.
		g.failMu.Lock()
		g.failErr, g.lost = err, uint64(len(lines))
		g.failMu.Unlock()
		if g.onFail != nil {
			g.onFail(err)
		}
		return
	}
	if total > g.e.opts.StreamBudget {
		g.e.kickPruner()
	}
	g.e.bus.publish(Event{Kind: EventLines, Lines: &LinesEvent{Run: g.run, Lines: lines}})
}

// streamFailure is the run error for a stream storage failure: what the
// filesystem said, without the path bbolt adds (the operator knows where
// the data dir is; doctor says how full it is).
func streamFailure(err error, lost uint64) string {
	why := err.Error()
	switch {
	case errors.Is(err, syscall.ENOSPC):
		why = syscall.ENOSPC.Error()
	case errors.Is(err, syscall.EDQUOT):
		why = syscall.EDQUOT.Error()
	}
	return fmt.Sprintf("stream storage failed: %s (%d lines lost)", why, lost)
}

// StreamLines reads a run's stored lines from line from (at most max).
func (e *Engine) StreamLines(run string, from uint64, max int) (lines []Line, err error) {
	err = e.store.View(func(tx *storage.Tx) error {
		lines, err = tx.ReadLines(run, from, max)
		return err
	})
	return lines, err
}

// StreamLinesBefore reads up to max lines before line before.
func (e *Engine) StreamLinesBefore(run string, before uint64, max int) (lines []Line, err error) {
	err = e.store.View(func(tx *storage.Tx) error {
		lines, err = tx.ReadLinesBefore(run, before, max)
		return err
	})
	return lines, err
}

// StreamScan looks at a run's stored lines and returns those passing f
// (storage's ScanLines: the filter runs on stored bytes).
func (e *Engine) StreamScan(run string, from uint64, backward bool, f LineFilter, max, scan int) (s LineScan, err error) {
	err = e.store.View(func(tx *storage.Tx) error {
		s, err = tx.ScanLines(run, from, backward, f, max, scan)
		return err
	})
	return s, err
}

// StreamInfo reports a run's stream counts.
func (e *Engine) StreamInfo(run string) (m storage.StreamMeta, err error) {
	err = e.store.View(func(tx *storage.Tx) error {
		m, err = tx.StreamMeta(run)
		return err
	})
	return m, err
}

// Runs lists runs newest first.
func (e *Engine) Runs(limit int) (rs []RunRecord, err error) { return e.RunsBefore("", limit) }

// RunsBefore lists the runs older than the run before ("" for the
// newest), newest first, at most limit (0 for all): the next page of a
// list that ended at before.
func (e *Engine) RunsBefore(before string, limit int) (rs []RunRecord, err error) {
	err = e.store.View(func(tx *storage.Tx) error {
		rs, err = tx.RunsBefore(before, limit)
		return err
	})
	return rs, err
}

// LiveRuns lists the runs still running, newest first, read through the
// index of live runs (however long the history).
func (e *Engine) LiveRuns() (rs []RunRecord, err error) {
	err = e.store.View(func(tx *storage.Tx) error {
		rs, err = tx.LiveRuns()
		return err
	})
	slices.Reverse(rs)
	return rs, err
}

// Run reads one run.
func (e *Engine) Run(id string) (r RunRecord, err error) {
	err = e.store.View(func(tx *storage.Tx) error {
		r, err = tx.Run(id)
		return err
	})
	return r, err
}
