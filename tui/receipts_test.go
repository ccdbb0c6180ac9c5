package tui

import (
	"fmt"
	"strings"
	"testing"

	"warden/engine"
)

// The receipts pane reads nothing at open (the first frame draws the
// Runs tab) and reads the newest page when it is first shown, receipts
// written since the console opened included; from then on it keeps up.
func TestReceiptsReadWhenFirstShown(t *testing.T) {
	e := newEngine(t)
	rotate := func() {
		t.Helper()
		if _, err := e.RotateTrust("local:test"); err != nil {
			t.Fatal(err)
		}
	}
	rotate()
	d := newDriver(t, e, 120, 30)
	if n := len(d.app.receipts.rs); n != 0 {
		t.Fatalf("the console read %d receipts at open, before the pane was shown", n)
	}
	rotate()
	all, err := e.Receipts(engine.ReceiptFilter{})
	if err != nil {
		t.Fatal(err)
	}
	d.keys("3")
	p := d.app.receipts
	if len(p.rs) != len(all) || p.rs[len(p.rs)-1].Seq != all[len(all)-1].Seq || p.sel != len(p.rs)-1 {
		t.Fatalf("shown: %d receipts held, cursor %d; want all %d, the cursor on the newest", len(p.rs), p.sel, len(all))
	}
	if v := d.view(); !strings.Contains(v, fmt.Sprintf("Receipts · newest %d", len(all))) || !strings.Contains(v, "trust.rotate") {
		t.Errorf("the receipts are not on screen:\n%s", v)
	}
}
