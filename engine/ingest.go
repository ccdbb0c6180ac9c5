package engine

import (
	"sort"
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
	for batch := range g.in {
		pending := batch
	more:
		for len(pending) < maxIngestLines {
			select {
			case b, ok := <-g.in:
				if !ok {
					break more
				}
				pending = append(pending, b...)
			default:
				break more
			}
		}
		g.write(pending)
	}
}

func (g *ingester) write(lines []storage.Line) {
	var stored []storage.Line
	_, err := g.e.store.Update(func(tx *storage.Tx) error {
		stored = stored[:0]
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
			stored = append(stored, got...)
			start = end
		}
		return nil
	})
	if err != nil {
		// Storage refused the write (disk full, closed store). The lines
		// cannot be kept; the run's end receipt notes stream trouble.
		g.e.noteStreamError(g.run, err)
		return
	}
	g.e.bus.publish(Event{Kind: EventLines, Lines: &LinesEvent{Run: g.run, Lines: stored}})
}

func (e *Engine) noteStreamError(run string, err error) {
	e.store.AppendReceipt(storage.Draft{Kind: "stream.error", Actor: "engine", Subject: run, Summary: "stream lines lost: " + err.Error()})
}

// pruneStreams keeps the stored stream bytes across runs under budget by
// deleting the streams of the oldest runs first (run ids sort by time).
// It runs inside a run's start transaction; its failure (say a corrupt
// stream record) only skips pruning, it never stops the run.
func (e *Engine) pruneStreams(tx *storage.Tx) {
	budget := e.opts.StreamBudget
	func() error {
		sizes, err := tx.StreamSizes()
		if err != nil {
			return err
		}
		var total uint64
		runs := make([]string, 0, len(sizes))
		for r, n := range sizes {
			total += n
			runs = append(runs, r)
		}
		sort.Strings(runs)
		for _, r := range runs {
			if total <= budget {
				break
			}
			if rec, err := tx.Run(r); err == nil && rec.Status == storage.RunRunning {
				continue
			}
			total -= sizes[r]
			if err := tx.DeleteStream(r); err != nil {
				return err
			}
		}
		return nil
	}()
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
func (e *Engine) Runs(limit int) (rs []RunRecord, err error) {
	err = e.store.View(func(tx *storage.Tx) error {
		rs, err = tx.Runs(limit)
		return err
	})
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
