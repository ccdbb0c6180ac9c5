package tui

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/wardenhq/warden/engine"
)

// slowTop is the real engine, except that while held, a read of a
// stream's first page waits until the test lets it go: the one slow read
// a real store cannot be made to do on cue.
type slowTop struct {
	engine.Facade
	held    atomic.Bool
	started chan struct{}
	release chan struct{}
}

func (s *slowTop) StreamScan(run string, from uint64, backward bool, f engine.LineFilter, max, scan int) (engine.LineScan, error) {
	if from == 0 && !backward && s.held.Load() {
		s.started <- struct{}{}
		<-s.release
	}
	return s.Facade.StreamScan(run, from, backward, f, max, scan)
}

// TestStreamsKeysWhileAPageIsRead: g (the first line) on a long stream
// reads a page from storage. While that read is slow, the console still
// answers keys (another tab draws), and the keys given to the log
// meanwhile act, in order, once the page is there.
func TestStreamsKeysWhileAPageIsRead(t *testing.T) {
	real := newEngine(t)
	addModule(t, real, "long", map[string]string{"out": "seq 1 5000"}, nil)
	runHook(t, real, "long", "out")
	e := &slowTop{Facade: real, started: make(chan struct{}), release: make(chan struct{})}
	c := startConsole(t, e)
	c.wait("END 5000 lines")
	c.keys("right")
	e.held.Store(true)
	c.keys("g")
	<-e.started // the read is out, and waits
	e.held.Store(false)
	c.keys("j", "j")
	c.keys("3") // another tab, drawn while the read waits
	c.wait("hook.end")
	c.keys("1")
	c.wait("END 5000 lines") // the log as it was: the page is not there yet
	close(e.release)
	c.wait("⏸ 3/5000") // g, then j twice
	view := c.final()
	if !strings.Contains(view, "▸   3   3") {
		t.Errorf("the cursor is not on line 3:\n%s", view)
	}
}

// TestStreamsStalePageDropped: the page read for a run the operator
// left before it came is not shown over the run shown now.
func TestStreamsStalePageDropped(t *testing.T) {
	e := newEngine(t)
	addModule(t, e, "m", map[string]string{"long": "seq 1 5000", "short": "echo only-the-short-one"}, nil)
	long := runHook(t, e, "m", "long")
	short := runHook(t, e, "m", "short")
	d := newDriver(t, e, 120, 30)
	if !strings.Contains(d.view(), "only-the-short-one") {
		t.Fatalf("the newest run is not shown:\n%s", d.view())
	}
	// Down opens the long run: its tail is read in a command, held here.
	_, held := d.app.Update(keyMsg("down"))
	if held == nil {
		t.Fatal("opening a run read nothing off the UI goroutine")
	}
	if p := d.app.streams; p.want != long.Run.ID || p.log.run == long.Run.ID {
		t.Fatalf("want %q, shown %q: the long run should be opening, not shown", p.want, p.log.run)
	}
	d.keys("up") // back to the short run before the page came
	d.send(held())
	view := d.view()
	if !strings.Contains(view, "only-the-short-one") || d.app.streams.log.run != short.Run.ID || strings.Contains(view, "5000") {
		t.Errorf("a stale page replaced the run shown:\n%s", view)
	}
	// The long run still opens when asked again.
	d.keys("down")
	if view := d.view(); !strings.Contains(view, "END 5000 lines") {
		t.Errorf("the long run does not open:\n%s", view)
	}
}

// TestReceiptsStaleFilterReadDropped: a kind filter's read that comes
// after the operator chose another kind does not replace the list.
func TestReceiptsStaleFilterReadDropped(t *testing.T) {
	e := newEngine(t)
	addModule(t, e, "m", map[string]string{"quick": "true"}, nil)
	runHook(t, e, "m", "quick")
	if err := e.SetConfig("local:test", "m", "k", "v"); err != nil {
		t.Fatal(err)
	}
	d := newDriver(t, e, 120, 30)
	d.keys("3", "/", "hook.end")
	_, held := d.app.Update(keyMsg("enter")) // its read, held here
	d.keys("/")
	for range len("hook.end") {
		d.keys("backspace")
	}
	d.keys("config.set", "enter")
	d.send(held())
	p := d.app.receipts
	if p.kind != "config.set" || len(p.rs) != 1 || p.rs[0].Kind != "config.set" {
		kinds := make([]string, len(p.rs))
		for i, r := range p.rs {
			kinds[i] = r.Kind
		}
		t.Errorf("filter %q shows %v", p.kind, kinds)
	}
}

// TestReceiptsOlderPageThenMove: up past the first receipt held reads
// the page above off the UI goroutine, then moves onto its last receipt,
// as a read in Update would.
func TestReceiptsOlderPageThenMove(t *testing.T) {
	e := newEngine(t)
	addModule(t, e, "m", map[string]string{"quick": "true"}, nil)
	for i := range receiptsLoad + 20 {
		if err := e.SetConfig("local:test", "m", "k", fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	d := newDriver(t, e, 120, 30)
	d.keys("3")
	p := d.app.receipts
	if len(p.rs) != receiptsLoad {
		t.Fatalf("held %d", len(p.rs))
	}
	p.sel, p.atEnd = 0, false // the first of the newest page held
	first := p.rs[0].Seq
	d.keys("up")
	if p.sel < 0 || p.sel >= len(p.rs) || p.rs[p.sel].Seq != first-1 {
		t.Errorf("after up: cursor on seq %d, want %d (held %d)", p.rs[p.sel].Seq, first-1, len(p.rs))
	}
}
