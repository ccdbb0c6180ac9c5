package tui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wardenhq/warden/engine"
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

// The requests pane holds only the pending requests at open (the header
// counts them, the Runs tab answers them) and reads the decided history
// when it is first shown.
func TestRequestHistoryReadWhenFirstShown(t *testing.T) {
	e := newEngine(t)
	askModule(t, e)
	detach := e.AttachOperator() // a question is asked only with an operator there
	defer detach()
	ask := func(want uint64) interface{ Wait() engine.Outcome } {
		t.Helper()
		h, err := e.StartRun("local:test", engine.RunRequest{Module: "asker", Hook: "ask", Jail: engine.JailOff})
		if err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if rs, _ := e.Requests(engine.RequestFilter{}); len(rs) > 0 && rs[len(rs)-1].ID == want {
				return h
			}
			if time.Now().After(deadline) {
				t.Fatalf("request %d was not asked", want)
			}
		}
	}
	first := ask(1)
	if _, err := e.Deny("local:test", 1, "history"); err != nil {
		t.Fatal(err)
	}
	first.Wait()
	second := ask(2)
	defer func() { e.Deny("local:test", 2, "over"); second.Wait() }()

	d := newDriver(t, e, 120, 30)
	if rs := d.app.requests.reqs; len(rs) != 1 || rs[0].ID != 2 {
		t.Fatalf("at open the console holds %d requests; want only the pending #2", len(rs))
	}
	if v := d.view(); !strings.Contains(v, "1 pending") {
		t.Errorf("the header does not count the pending request:\n%s", v)
	}
	d.keys("2")
	if rs := d.app.requests.reqs; len(rs) != 2 || rs[0].ID != 2 || rs[1].ID != 1 {
		t.Fatalf("shown: %d requests held; want #2 pending, then #1 decided", len(rs))
	}
	if v := d.view(); !strings.Contains(v, "#1 ") || !strings.Contains(v, "#2 ") {
		t.Errorf("the history is not on screen:\n%s", v)
	}
}
