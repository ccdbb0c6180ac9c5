package tui

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wardenhq/warden/engine"
)

// TestDrillDownAndBack: enter on a request receipt opens the request, esc
// comes back; enter on a hook receipt opens the run's stream, with the
// trail in the tab bar.
func TestDrillDownAndBack(t *testing.T) {
	e := newEngine(t)
	askModule(t, e)
	c := startConsole(t, e)
	c.wait("no runs yet")
	h, err := e.StartRun("local:test", engine.RunRequest{Module: "asker", Hook: "ask", Jail: engine.JailOff})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		e.Deny("local:test", 1, "the test is over")
		h.Wait()
	}()
	c.wait("1 pending")
	c.keys(":", "receipts kind=request.", "enter")
	c.wait("of kind request.")
	c.keys("enter")
	c.wait("Receipts #", "› Requests  (esc back)", "operator.confirm: Reboot now?")
	c.keys("esc")
	c.wait("Receipts · newest 1 of kind request.")
	c.keys(":", "receipts kind=hook.", "enter")
	c.wait("of kind hook.")
	c.keys("enter")
	c.wait("› Streams  (esc back)")
	view := c.final()
	if !strings.Contains(view, "asker/ask") || !strings.Contains(view, "Receipts #") {
		t.Errorf("not on the run's stream with a trail:\n%s", view)
	}
	c.golden(view)
}

// TestCopyIsOSC52: c copies the selection as an OSC 52 sequence of
// warden's own, the text base64-encoded inside it, and the text is what
// the screen shows: a hook's own escape sequences escaped.
func TestCopyIsOSC52(t *testing.T) {
	e := newEngine(t)
	addModule(t, e, "evil", map[string]string{"esc": `printf 'pwn \033]52;c;ZXZpbA==\007 done\n'`}, nil)
	runHook(t, e, "evil", "esc")
	var mu sync.Mutex
	var seqs []string
	c := startConsoleWith(t, e, func(o *Options) {
		o.Copy = func(s string) { mu.Lock(); seqs = append(seqs, s); mu.Unlock() }
	})
	c.wait("pwn")
	c.keys("right", "c")
	c.wait("copied line 1 to the clipboard")
	c.keys("3")
	c.wait("Receipts · newest") // the page is read off the UI goroutine
	c.keys("c")
	c.wait("hash to the clipboard")
	c.final()
	mu.Lock()
	defer mu.Unlock()
	if len(seqs) != 2 {
		t.Fatalf("%d sequences, want 2: %q", len(seqs), seqs)
	}
	for _, s := range seqs {
		body, ok := strings.CutPrefix(s, "\x1b]52;c;")
		body, ok2 := strings.CutSuffix(body, "\x07")
		if !ok || !ok2 || strings.ContainsAny(body, "\x1b\x07") {
			t.Fatalf("not one clean OSC 52 sequence: %q", s)
		}
		if _, err := base64.StdEncoding.DecodeString(body); err != nil {
			t.Errorf("payload is not base64: %q", body)
		}
	}
	line, _ := base64.StdEncoding.DecodeString(strings.TrimSuffix(strings.TrimPrefix(seqs[0], "\x1b]52;c;"), "\x07"))
	if string(line) != "pwn ␛]52;c;ZXZpbA==␇ done" {
		t.Errorf("copied %q, want the line as drawn, its controls escaped", line)
	}
}

// TestPagerGetsEscapedText: o feeds the stream to $PAGER's stdin with
// every line escaped as the console draws it, and leaves no file behind.
func TestPagerGetsEscapedText(t *testing.T) {
	e := newEngine(t)
	addModule(t, e, "evil", map[string]string{"esc": `printf 'pwn \033]0;title\007 done\n'`}, nil)
	o := runHook(t, e, "evil", "esc")
	dir := t.TempDir()
	out := filepath.Join(dir, "paged")
	// The pager copies what it reads.
	t.Setenv("PAGER", pagerScript(t, `cat > "`+out+`"`))
	t.Setenv("TMPDIR", dir)
	c := startConsole(t, e)
	c.wait("pwn")
	c.keys("o")
	c.wait("Runs (1)") // redrawn after the pager
	c.final()
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(string(raw), "\x1b\x07") || !strings.Contains(string(raw), "pwn ␛]0;title␇ done") {
		t.Errorf("run %s paged as %q", o.Run.ID, raw)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "warden-pager-*")); len(left) > 0 {
		t.Errorf("files left for the pager: %v", left)
	}
}

// pagerScript writes a pager that runs sh code on its stdin.
func pagerScript(t *testing.T, code string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "pager")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+code+"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	return p
}

// pageCounter is the real engine, counting the stream pages read.
type pageCounter struct {
	engine.Facade
	pages atomic.Int32
}

func (c *pageCounter) StreamLines(run string, from uint64, n int) ([]engine.Line, error) {
	c.pages.Add(1)
	return c.Facade.StreamLines(run, from, n)
}

// TestPagerQuitEarly: a pager that quits after a few lines (head) over a
// long stream hands the console back, and the feeder stops there: it
// read a few pages of the stream, not all of it, and is gone.
func TestPagerQuitEarly(t *testing.T) {
	real := newEngine(t)
	const lines = 200_000
	addModule(t, real, "big", map[string]string{"out": fmt.Sprintf(`awk 'BEGIN{for(i=1;i<=%d;i++) print "line " i " \033[31mred\033[0m"}'`, lines)}, nil)
	runHook(t, real, "big", "out")
	e := &pageCounter{Facade: real}
	out := filepath.Join(t.TempDir(), "head")
	t.Setenv("PAGER", pagerScript(t, `head -n 5 > "`+out+`"`))
	c := startConsole(t, e)
	c.wait("line 200000")
	c.keys("o")
	c.wait("Runs (1)")
	c.keys("3") // the console answers keys again
	c.wait("hook.end")
	// The feeder is gone while the console still runs (closing it would
	// stop the feeder too).
	deadline := time.Now().Add(30 * time.Second)
	for pagerFeeders.Load() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := pagerFeeders.Load(); n != 0 {
		t.Fatalf("%d feeders still running after the pager quit", n)
	}
	c.final()
	if n, all := e.pages.Load(), int32(lines/feedPage); n >= all/2 {
		t.Errorf("the feeder read %d pages of %d for a pager that read 5 lines", n, all)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	if len(got) != 5 || !strings.Contains(got[0], "line 1 ␛[31mred␛[0m") || strings.ContainsAny(string(raw), "\x1b") {
		t.Errorf("the pager read %q", raw)
	}
}

// TestPagerHandsBackALiveScreen: after a pager that exits at once (here
// one that is not there, the commonest mistake in $PAGER) the console
// draws again, every time. Bubble Tea v1.3.10 could stay frozen after an
// exec that returned quickly (bubbletea #1778): its old render goroutine
// stopped the ticker the new one waited on. third_party/bubbletea carries
// the fix until upstream has it.
func TestPagerHandsBackALiveScreen(t *testing.T) {
	e := newEngine(t)
	streamModule(t, e)
	runHook(t, e, "chatty", "lines")
	t.Setenv("PAGER", filepath.Join(t.TempDir(), "no-such-pager"))
	c := startConsole(t, e)
	c.wait("Runs (1)")
	for i := 0; i < 40; i++ {
		c.keys("o")
		c.wait("the pager failed", "Runs (1)") // redrawn after the pager
	}
	c.final()
}
