package engine

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wardenhq/warden/storage"
)

// Producers far faster than the disk never have more than the run's
// budget queued: they wait (which, for a hook, stops its pipe or socket
// being read), and every line still lands.
func TestIngestBudgetHoldsProducersBack(t *testing.T) {
	e := openEngine(t, Options{StreamLimit: 1 << 30})
	g := e.newIngester(e.store.NewRunID(time.Now()))
	var peak atomic.Int64
	watch := func() {
		g.budgetMu.Lock()
		q := int64(g.queued)
		g.budgetMu.Unlock()
		for p := peak.Load(); q > p && !peak.CompareAndSwap(p, q); p = peak.Load() {
		}
	}
	big := strings.Repeat("x", 1<<20-1)
	const producers, each = 8, 8 // 64 MiB offered, eight times the budget
	var wg sync.WaitGroup
	for range producers {
		wg.Go(func() {
			for range each {
				g.add([]storage.Line{{Level: storage.LevelInfo, Text: big}})
				watch()
			}
		})
	}
	wg.Wait()
	g.close()
	if p := peak.Load(); p > ingestBudget || p == 0 {
		t.Errorf("queued stream text peaked at %d bytes, want at most the budget (%d)", p, ingestBudget)
	}
	if lost, err := g.failure(); err != nil {
		t.Fatalf("storage failed: %v (%d lost)", err, lost)
	}
	m, err := e.StreamInfo(g.run)
	if err != nil || m.Lines != producers*each || m.Dropped != 0 {
		t.Errorf("stored %+v (%v), want all %d lines", m, err, producers*each)
	}
}
