package tui

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wardenhq/warden/engine"
)

// millionScript prints 1,000,000 lines: every 1000th on stderr (a
// warning, "disk full"), the rest on stdout. The same lines go to a file
// for grep, the baseline.
const millionScript = `awk 'BEGIN{for(i=1;i<=1000000;i++){ if(i%1000==0) print "line " i ": disk full" > "/dev/stderr"; else print "line " i ": all good, the quick brown fox" }}'`

// BenchmarkFilterSearchMillion measures the console's level filter and
// search over a stored 1,000,000-line stream, from the key to the first
// screen of results (the frame drawn), with `grep -c` over the same lines
// as the baseline, in the same run.
//
//	level-warn:   l l from the tail: the newest 38 warnings (1 in 1000 lines)
//	level-error:  no error anywhere: the whole stream looked at, "nothing at this level"
//	search-far:   / for a line near the start, from the tail: ~1,000,000 lines looked at
//	grep-c:       grep -c 'disk full' over the same 1,000,000 lines
func BenchmarkFilterSearchMillion(b *testing.B) {
	a, e, run := benchConsole(b, millionScript, 120, 40)
	m, _ := e.StreamInfo(run)
	if m.Lines != 1_000_000 {
		b.Fatalf("stored %d lines, want 1000000", m.Lines)
	}
	file := filepath.Join(b.TempDir(), "lines")
	var sb strings.Builder
	for i := 1; i <= 1_000_000; i++ {
		if i%1000 == 0 {
			fmt.Fprintf(&sb, "line %d: disk full\n", i)
		} else {
			fmt.Fprintf(&sb, "line %d: all good, the quick brown fox\n", i)
		}
	}
	if err := os.WriteFile(file, []byte(sb.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	v := a.streams.log
	a.streams.focusLog = true
	reset := func() {
		v.level, v.invert, v.query = levelAll, false, ""
		v.bottom()
	}
	b.Run("level-warn", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			reset()
			b.StartTimer()
			v.level = levelWarn
			v.refilter()
			_ = a.View()
		}
		// A full screen of warnings, the newest last (stdout and stderr
		// interleave as the pipes deliver them, so line numbers vary).
		if view := a.View(); strings.Count(view, ": disk full") != v.height || !strings.Contains(view, "line 1000000: disk full") {
			b.Fatalf("not a screen of the newest warnings (%d):\n%s", strings.Count(view, ": disk full"), view)
		}
	})
	b.Run("level-error", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			reset()
			b.StartTimer()
			v.level = levelError
			v.refilter()
			_ = a.View()
		}
		if view := a.View(); !strings.Contains(view, "nothing at this level") {
			b.Fatalf("no empty-result message:\n%s", view)
		}
	})
	b.Run("search-far", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			reset()
			b.StartTimer()
			v.query = "line 17: "
			v.search(-1)
			_ = a.View()
		}
		if l, ok := v.selected(); !ok || !strings.HasPrefix(l.Text, "line 17: ") || !strings.Contains(a.View(), "line 17: all good") {
			b.Fatalf("not on line 17:\n%s", a.View())
		}
	})
	b.Run("grep-c", func(b *testing.B) {
		for b.Loop() {
			out, err := exec.Command("grep", "-c", "disk full", file).Output()
			if err != nil || strings.TrimSpace(string(out)) != "1000" {
				b.Fatalf("grep: %v %q", err, out)
			}
		}
	})
	_ = engine.LevelWarn
}
