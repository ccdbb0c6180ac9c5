package tui

import (
	"fmt"
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/wardenhq/warden/engine"
)

// receiptsWithConfig is a chain with a module, a run and n config.set
// receipts after them (key00 … keyNN).
func receiptsWithConfig(t *testing.T, n int) engine.Facade {
	t.Helper()
	e := newEngine(t)
	streamModule(t, e)
	runHook(t, e, "chatty", "lines")
	for i := range n {
		if err := e.SetConfig("local:test", "chatty", fmt.Sprintf("key%02d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// TestReceiptsTextFilter: / with text keeps the rows whose seq, kind,
// actor, subject or summary hold it, smart case: lower case matches any
// case, a capital asks for that case.
func TestReceiptsTextFilter(t *testing.T) {
	e := receiptsWithConfig(t, 30)
	c := startConsole(t, e)
	c.keys("3")
	c.wait("Receipts · newest")
	c.keys("/")
	c.wait("filter ›")
	c.keys("KEY1", "enter") // a capital: case-sensitive, the summaries say key1…
	c.wait(`0 matching "KEY1"`, `no receipts match "KEY1"`)
	c.keys("/")
	c.tm.Send(tea.KeyMsg{Type: tea.KeyCtrlU}) // / offers the last filter: clear it
	c.keys("key1", "enter")                   // lower case: any case
	c.wait(`10 matching "key1" of`, "all read")
	view := c.final()
	if n := receiptRows(view); n != 10 {
		t.Errorf("the title says 10, %d rows shown:\n%s", n, view)
	}
	for i := range 10 {
		if !strings.Contains(view, fmt.Sprintf("chatty/key1%d", i)) {
			t.Errorf("key1%d is not shown:\n%s", i, view)
		}
	}
	if strings.Contains(view, "key20") || strings.Contains(view, "hook.end") {
		t.Errorf("rows that do not hold key1 are shown:\n%s", view)
	}
	c.golden(view)
}

// TestReceiptsKindFilter: kind=K (and a token that reads as a kind)
// selects by kind through the key-range read, as :receipts kind=K does;
// words beside it filter those by text.
func TestReceiptsKindFilter(t *testing.T) {
	e := receiptsWithConfig(t, 30)
	c := startConsole(t, e)
	c.keys("3")
	c.wait("Receipts · newest")
	c.keys("/", "kind=hook", "enter")
	c.wait("Receipts · newest 2 of kind hook.", "2 receipts of kind hook.")
	view := c.final()
	if !strings.Contains(view, "hook.start") || !strings.Contains(view, "hook.end") || strings.Contains(view, "config.set") {
		t.Errorf("kind=hook should show the two hook receipts only:\n%s", view)
	}
	c.golden(view)
}

// TestReceiptsKindAndTextFilter: a kind token and text together.
func TestReceiptsKindAndTextFilter(t *testing.T) {
	e := receiptsWithConfig(t, 30)
	c := startConsole(t, e)
	c.keys("3")
	c.wait("Receipts · newest")
	c.keys("/", "config.set key2", "enter")
	c.wait(`10 matching "key2" of 30 read of kind config.set`)
	if p := c.app.receipts; p.kind != "config.set" || p.query != "key2" {
		t.Errorf("kind %q text %q, want config.set and key2", p.kind, p.query)
	}
	c.final()
}

// TestReceiptsEscClearsFilter: esc after a text filter (and after a kind
// filter) shows every receipt again.
func TestReceiptsEscClearsFilter(t *testing.T) {
	e := receiptsWithConfig(t, 30)
	all, err := e.Receipts(engine.ReceiptFilter{})
	if err != nil {
		t.Fatal(err)
	}
	c := startConsole(t, e)
	c.keys("3")
	c.wait("Receipts · newest")
	c.keys("/", "hook.end lines", "enter")
	c.wait(`1 matching "lines" of 1 read of kind hook.end`)
	c.keys("esc")
	c.wait(fmt.Sprintf("Receipts · newest %d ", len(all)))
	c.keys("/", "key0", "enter")
	c.wait(`10 matching "key0"`)
	c.keys("esc")
	c.wait(fmt.Sprintf("Receipts · newest %d ", len(all)))
	view := c.final()
	if strings.Contains(view, "matching") || strings.Contains(view, "of kind") {
		t.Errorf("esc left a filter on:\n%s", view)
	}
	c.golden(view)
}

// TestReceiptsFilterEmpty: a text nothing holds says so, with how much
// was read, back to the chain's start.
func TestReceiptsFilterEmpty(t *testing.T) {
	e := receiptsWithConfig(t, 5)
	c := startConsole(t, e)
	c.keys("3")
	c.wait("Receipts · newest")
	c.keys("/", "no-such-thing", "enter")
	c.wait(`no receipts match "no-such-thing" in the`, "back to the chain's start")
	c.golden(c.final())
}

// TestReceiptsFilterFindsOlderPage: the only match is far above the
// newest page held; the filter reads older receipts in the background
// until it finds it (and the chain's start).
func TestReceiptsFilterFindsOlderPage(t *testing.T) {
	e := receiptsWithConfig(t, 2*receiptsScan)
	all, err := e.Receipts(engine.ReceiptFilter{})
	if err != nil {
		t.Fatal(err)
	}
	c := startConsole(t, e)
	c.keys("3")
	c.wait(fmt.Sprintf("Receipts · newest %d", receiptsLoad))
	c.keys("/", "lines", "enter") // the run's hook.start and hook.end, seq 4 and 5
	c.wait(fmt.Sprintf(`2 matching "lines" of %d read · all read`, len(all)), "hook.start")
	view := c.final()
	if n := receiptRows(view); n != 2 || !strings.Contains(view, "hook.end") {
		t.Errorf("%d rows shown, want the run's two:\n%s", n, view)
	}
	c.golden(view)
}

// The scan's contract, step by step: the title says "reading older…"
// while a read is out, the read runs as a command (never in Update), and
// an answer that comes after the filter changed is dropped.
func TestReceiptsFilterScanIsBackgroundAndDropsStale(t *testing.T) {
	e := receiptsWithConfig(t, receiptsScan+200)
	d := newDriver(t, e, 120, 30)
	d.keys("3")
	p := d.app.receipts
	if len(p.rs) != receiptsLoad {
		t.Fatalf("%d receipts held, want a page of %d", len(p.rs), receiptsLoad)
	}
	read := p.rs
	cmd := p.setFilter("added")
	if cmd == nil {
		t.Fatal("no background read for a text with no match in the page held")
	}
	if &p.rs[0] != &read[0] || len(p.rs) != receiptsLoad {
		t.Fatal("setFilter read storage itself")
	}
	if v := d.view(); !strings.Contains(v, `0 matching "added" of 100 read · reading older…`) || !strings.Contains(v, "reading older…") {
		t.Fatalf("while reading, the title does not say so:\n%s", v)
	}
	first := cmd()
	// The operator changes the filter before the answer arrives.
	next := p.setFilter("key01")
	d.send(first)
	if p.read != 0 || len(p.rs) != receiptsLoad {
		t.Fatalf("a stale answer was used: %d read, %d held", p.read, len(p.rs))
	}
	if next == nil {
		t.Fatal("the new text has no match held, yet reads nothing older")
	}
	d.send(next())
	v := d.view()
	if !strings.Contains(v, `1 matching "key01" of`) || !strings.Contains(v, "all read") {
		t.Fatalf("the new filter's answer is not shown:\n%s", v)
	}
	// Esc: every row held in full again, none of the scan's.
	d.keys("esc")
	if len(p.rs) != receiptsLoad || p.sparse != 0 {
		t.Fatalf("after esc %d held (%d from the scan), want the page of %d", len(p.rs), p.sparse, receiptsLoad)
	}
}

func TestParseReceiptFilter(t *testing.T) {
	for _, tc := range []struct{ in, kind, text string }{
		{"disk full", "", "disk full"},
		{"hook.", "hook.", ""},
		{"hook", "", "hook"},
		{"kind=hook", "hook.", ""},
		{"kind=module.add chatty", "module.add", "chatty"},
		{"request.decide denied", "request.decide", "denied"},
		{"example.com", "", "example.com"},
		{"chatty/lines 1.0", "", "chatty/lines 1.0"},
		{"hook.End", "", "hook.End"},
	} {
		if k, x := parseReceiptFilter(tc.in); k != tc.kind || x != tc.text {
			t.Errorf("%q: kind %q text %q, want %q %q", tc.in, k, x, tc.kind, tc.text)
		}
	}
}

// Paging up without a filter reads the page above as a command too: the
// key returns at once with the title saying so, the answer puts the
// cursor on the row above the first one held, and an answer that comes
// after a kind filter re-read the list is dropped.
func TestReceiptsOlderPageIsReadInTheBackground(t *testing.T) {
	e := receiptsWithConfig(t, 3*receiptsLoad)
	d := newDriver(t, e, 120, 30)
	d.keys("3")
	p := d.app.receipts
	first := p.rs[0].Seq
	d.keys("g") // the oldest row held (the read it asks for runs in the driver)
	if p.rs[0].Seq >= first || p.sel != 0 {
		t.Fatalf("g did not reach the page above: first held %d (was %d), cursor %d", p.rs[0].Seq, first, p.sel)
	}
	// Now by hand: up at the first row held returns the read, unrun.
	p.sel = 0
	held, top := len(p.rs), p.rs[0]
	cmd := p.update(tea.KeyMsg{Type: tea.KeyUp})
	if cmd == nil || len(p.rs) != held {
		t.Fatalf("up at the first row held: cmd %v, %d held (was %d); want a command and nothing read yet", cmd != nil, len(p.rs), held)
	}
	if v := d.view(); !strings.Contains(v, "reading older…") {
		t.Fatalf("the title does not say a read is going:\n%s", v)
	}
	d.send(cmd())
	if len(p.rs) <= held || p.rs[p.sel].Seq != top.Seq-1 {
		t.Fatalf("after the page came: %d held, cursor on seq %d; want more than %d, the cursor on seq %d (the row above)", len(p.rs), p.rs[p.sel].Seq, held, top.Seq-1)
	}
	// A read overtaken by a kind filter is dropped.
	p.sel = 0
	if cmd = p.update(tea.KeyMsg{Type: tea.KeyUp}); cmd == nil {
		t.Fatal("up at the first row held with older receipts in storage asked for nothing")
	}
	kindRead := p.setFilter("kind=hook")
	d.send(cmd(), kindRead()) // the page above comes after the filter changed, then the hook page
	if len(p.rs) != 2 || p.rs[0].Kind != "hook.start" {
		t.Fatalf("a stale page was added to the hook receipts: %d held, first %s", len(p.rs), p.rs[0].Kind)
	}
}

// The newest page is read as a command when the pane is first shown:
// the key returns at once, the title says a read is going, and a receipt
// appended after the read but announced before it came is not lost.
func TestReceiptsFirstPageIsACommand(t *testing.T) {
	e := receiptsWithConfig(t, 3)
	d := newDriver(t, e, 120, 30)
	_, cmd := d.app.Update(keyMsg("3"))
	p := d.app.receipts
	if cmd == nil || len(p.rs) != 0 {
		t.Fatalf("showing the pane: cmd %v, %d held; want a command and nothing read yet", cmd != nil, len(p.rs))
	}
	if v := d.view(); !strings.Contains(v, "Receipts · reading the newest…") {
		t.Fatalf("the title does not say the page is being read:\n%s", v)
	}
	page := cmd() // read now; the next receipt comes after it
	if err := e.SetConfig("local:test", "chatty", "late", "v"); err != nil {
		t.Fatal(err)
	}
	all, err := e.Receipts(engine.ReceiptFilter{})
	if err != nil {
		t.Fatal(err)
	}
	late := all[len(all)-1]
	p.add(late) // its event, before the page
	d.send(page)
	if len(p.rs) != len(all) || p.rs[len(p.rs)-1].Seq != late.Seq || p.rs[p.sel].Seq != late.Seq {
		t.Fatalf("%d held, last %d, cursor on %d; want all %d, the late receipt %d last and selected", len(p.rs), p.rs[len(p.rs)-1].Seq, p.rs[p.sel].Seq, len(all), late.Seq)
	}
}

// A filter that matches nothing leaves nothing selected: enter, d and c
// act on no hidden receipt.
func TestReceiptsEmptyFilterSelectsNothing(t *testing.T) {
	e := receiptsWithConfig(t, 3)
	d := newDriver(t, e, 120, 30)
	d.keys("3", "/", "no-such-thing", "enter")
	p := d.app.receipts
	if len(p.rs) == 0 {
		t.Fatal("nothing held")
	}
	if r, ok := p.selected(); ok {
		t.Fatalf("receipt %d is selected, though none is shown", r.Seq)
	}
	d.keys("enter", "d", "c")
	if d.app.overlay != nil {
		t.Fatalf("a key opened an overlay on a hidden receipt:\n%s", d.view())
	}
	if v := d.view(); strings.Contains(v, "copied") {
		t.Fatalf("c copied a hidden receipt:\n%s", v)
	}
}

// A text filter that fills a screen from what is held reads nothing
// older, and offers it: going up past the first match reads the next
// slice in the background.
func TestReceiptsFilterPausesAtAScreen(t *testing.T) {
	e := receiptsWithConfig(t, receiptsScan+100)
	d := newDriver(t, e, 120, 30)
	d.keys("3", "/", "config", "enter")
	p := d.app.receipts
	if p.read != 0 || len(p.rs) != receiptsLoad {
		t.Fatalf("a full screen of matches held, yet %d more were read", p.read)
	}
	if v := d.view(); !strings.Contains(v, `100 matching "config" of 100 read · ↑ reads older`) {
		t.Fatalf("the title does not offer older receipts:\n%s", v)
	}
	top := p.rs[0].Seq
	d.keys("g") // the first match held; past it, the next slice
	if p.read != receiptsScan || p.rs[0].Seq >= top {
		t.Fatalf("g at the first match read %d (want %d), first held %d (was %d)", p.read, receiptsScan, p.rs[0].Seq, top)
	}
	if r, ok := p.selected(); !ok || r.Seq != top {
		t.Fatalf("the cursor left the receipt it was on (%d): %+v", top, r.Seq)
	}
	if v := d.view(); !strings.Contains(v, `600 matching "config" of 600 read · ↑ reads older`) {
		t.Fatalf("after the slice:\n%s", v)
	}
}
