package tui

import (
	"fmt"
	"testing"
	"time"

	"github.com/wardenhq/warden/engine"
)

// BenchmarkReceiptsTextFilter measures a text filter over the most the
// pane holds (maxReceipts rows): from the filter line to the frame drawn,
// with the same frame drawn without a filter as the baseline, in the
// same run. The rows are built in memory (no storage read is involved:
// the filter runs over what is held).
//
//	frame:   a 120x40 frame of the receipts, no filter (the baseline)
//	filter:  / "key1999" (one match) applied, then the frame drawn
func BenchmarkReceiptsTextFilter(b *testing.B) {
	p := newReceiptsPane(testShared(nil))
	p.shown, p.oldest = true, true
	at := time.Now()
	for i := range maxReceipts {
		p.rs = append(p.rs, engine.Receipt{Seq: uint64(i + 1), At: at, Kind: "config.set", Actor: "local:test",
			Subject: "chatty", Summary: fmt.Sprintf("config.set chatty/key%04d", i)})
	}
	p.from = 1
	b.Run("frame", func(b *testing.B) {
		for b.Loop() {
			p.gen++ // what is held changed: computed again, as after a new receipt
			_ = p.view(120, 40)
		}
	})
	b.Run("filter", func(b *testing.B) {
		for b.Loop() {
			if cmd := p.setFilter("key1999"); cmd != nil {
				b.Fatal("a filter over a chain read to its start asked for a read")
			}
			_ = p.view(120, 40)
		}
		if n := len(p.visible()); n != 1 {
			b.Fatalf("%d matches, want 1", n)
		}
	})
}
