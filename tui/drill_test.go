package tui

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"warden/engine"
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
// warden's own, the text base64-encoded inside it, whatever it holds.
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
	if string(line) != "pwn \x1b]52;c;ZXZpbA==\x07 done" {
		t.Errorf("copied %q", line)
	}
}

// TestPagerGetsEscapedText: o writes the stream for $PAGER with every
// line escaped as the console draws it.
func TestPagerGetsEscapedText(t *testing.T) {
	e := newEngine(t)
	addModule(t, e, "evil", map[string]string{"esc": `printf 'pwn \033]0;title\007 done\n'`}, nil)
	o := runHook(t, e, "evil", "esc")
	out := filepath.Join(t.TempDir(), "paged")
	// The pager copies what it is given.
	t.Setenv("PAGER", "cp -t "+filepath.Dir(out)+" --")
	c := startConsole(t, e)
	c.wait("pwn")
	c.keys("o")
	c.wait("Runs (1)") // redrawn after the pager
	c.final()
	matches, _ := filepath.Glob(filepath.Join(filepath.Dir(out), "warden-pager-*"))
	if len(matches) != 1 {
		t.Fatalf("the pager got %d files", len(matches))
	}
	raw, _ := os.ReadFile(matches[0])
	if strings.ContainsAny(string(raw), "\x1b\x07") || !strings.Contains(string(raw), "pwn ␛]0;title␇ done") {
		t.Errorf("run %s paged as %q", o.Run.ID, raw)
	}
}
