package engine

import (
	"slices"
	"sync"

	"warden/storage"
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
// turn fold with other writers. The queue is bounded: a producer that
// outruns the disk waits (backpressure on the hook's pipe), so no line is
// ever dropped on the way in.
type ingester struct {
	e     *Engine
	run   string
	limit uint64
	in    chan []storage.Line
	done  chan struct{}

	mu     sync.RWMutex // closed and the close of in
	closed bool
}

const (
	ingestQueue    = 256
	maxChunkLines  = 4096
	maxChunkBytes  = 1 << 20
	maxIngestLines = 64 * 1024 // per storage write
)

func (e *Engine) newIngester(run string) *ingester {
	g := &ingester{e: e, run: run, limit: e.opts.StreamLimit, in: make(chan []storage.Line, ingestQueue), done: make(chan struct{})}
	go g.loop()
	return g
}

// add queues lines; after close (a late log frame) they are dropped.
func (g *ingester) add(lines []storage.Line) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if !g.closed {
		g.in <- lines // the loop keeps draining, so this cannot stall close
	}
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

func (g *ingester) loop() {
	defer close(g.done)
	var batches [][]storage.Line
	for batch := range g.in {
		// Collect what has queued, then flatten it once at its exact
		// size: appending batch after batch to one slice re-copied a
		// flood's lines several times over.
		n := len(batch)
		batches = append(batches[:0], batch)
	more:
		for n < maxIngestLines {
			select {
			case b, ok := <-g.in:
				if !ok {
					break more
				}
				batches, n = append(batches, b), n+len(b)
			default:
				break more
			}
		}
		pending := batch
		if len(batches) > 1 {
			pending = make([]storage.Line, 0, n)
			for _, b := range batches {
				pending = append(pending, b...)
			}
		}
		clear(batches) // let the producers' slices go
		g.write(pending)
	}
}

// write stores lines (numbering them in place) and publishes them.
func (g *ingester) write(lines []storage.Line) {
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
		// cannot be kept; the run's end receipt notes stream trouble.
		g.e.noteStreamError(g.run, err)
		return
	}
	if total > g.e.opts.StreamBudget {
		g.e.kickPruner()
	}
	g.e.bus.publish(Event{Kind: EventLines, Lines: &LinesEvent{Run: g.run, Lines: lines}})
}

func (e *Engine) noteStreamError(run string, err error) {
	e.store.AppendReceipt(storage.Draft{Kind: storage.KindStreamError, Actor: "engine", Subject: run, Summary: "stream lines lost: " + err.Error()})
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
