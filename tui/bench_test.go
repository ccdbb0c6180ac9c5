package tui

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/wardenhq/warden/engine"
)

// benchConsole opens a console on an engine whose one run printed
// `lines` lines (stored through the engine's ingester, as any hook's
// output), sized w x h, on the Streams tab following the tail.
func benchConsole(b *testing.B, script string, w, h int) (*App, engine.Facade, string) {
	b.Helper()
	e := newEngine(b)
	addModule(b, e, "bench", map[string]string{"run": script}, nil)
	o := runHook(b, e, "bench", "run")
	if !o.OK() {
		b.Fatalf("run failed: %s", o.Run.Error)
	}
	a := New(e, Options{Theme: testShared(e).th, Actor: "local:test", Jail: engine.JailOff, Bell: func() {}})
	b.Cleanup(a.Close)
	a.Update(tea.WindowSizeMsg{Width: w, Height: h})
	return a, e, o.Run.ID
}

func benchView(b *testing.B, lines int) {
	a, e, run := benchConsole(b, "seq 1 "+strconv.Itoa(lines), 120, 40)
	m, _ := e.StreamInfo(run)
	if m.Lines != uint64(lines) {
		b.Fatalf("stored %d lines, want %d", m.Lines, lines)
	}
	if !strings.Contains(a.View(), strconv.Itoa(lines)) {
		b.Fatalf("the last line is not on screen:\n%s", a.View())
	}
	b.Run("tail", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = a.View()
		}
	})
	// The middle of the stream (paged from storage).
	a.streams.log.goTo(uint64(lines/2 - 1))
	if !strings.Contains(a.View(), fmt.Sprintf("⏸ %d/%d", lines/2, lines)) || !strings.Contains(a.View(), fmt.Sprintf("%d   %d", lines/2+20, lines/2+20)) {
		b.Fatalf("not in the middle:\n%s", a.View())
	}
	b.Run("middle", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = a.View()
		}
	})
	b.ReportMetric(float64(len(a.streams.log.win)), "window-lines")
}

// BenchmarkStreamsView1k and BenchmarkStreamsView1M draw the console's
// frame (Streams tab) over a run of 1,000 and of 1,000,000 stored lines.
func BenchmarkStreamsView1k(b *testing.B) { benchView(b, 1000) }
func BenchmarkStreamsView1M(b *testing.B) { benchView(b, 1_000_000) }

// BenchmarkLongLine100k: one 100,000-character line on screen.
func BenchmarkLongLine100k(b *testing.B) {
	a, _, _ := benchConsole(b, "seq 1 50; head -c 100000 /dev/zero | tr '\\0' x; echo; seq 1 5", 120, 40)
	v := a.streams.log
	a.streams.focusLog = true
	v.move(-5) // onto the long line
	if l, ok := v.selected(); !ok || len(l.Text) != 100000 {
		b.Fatalf("not on the long line: %d", len(l.Text))
	}
	if !strings.Contains(a.View(), cutMarker) {
		b.Fatal("no cut marker")
	}
	b.Run("cut", func(b *testing.B) {
		for b.Loop() {
			_ = a.View()
		}
	})
	v.wrap = true
	v.scrollToCursor()
	b.Run("wrap", func(b *testing.B) {
		for b.Loop() {
			_ = a.View()
		}
	})
	b.Run("wrap-cold", func(b *testing.B) { // no cached width
		for b.Loop() {
			for i := range v.widths {
				v.widths[i] = -1
			}
			v.scrollToCursor()
			_ = a.View()
		}
	})
	v.wrap = false
	b.Run("overlay-cold", func(b *testing.B) { // enter: the whole line laid out
		for b.Loop() {
			a.Update(a.streams.openLine()())
			_ = a.View()
			a.overlay = nil
		}
	})
}

// BenchmarkStreamMillionMemory streams 1,000,000 lines live through a
// console following the run, then reports the heap and RSS the process
// holds (engine included) and how many event messages carried them.
func BenchmarkStreamMillionMemory(b *testing.B) {
	for b.Loop() {
		e := newEngine(b)
		addModule(b, e, "bench", map[string]string{"run": "seq -f 'line %g of a million, the quick brown fox' 1 1000000"}, nil)
		a := New(e, Options{Theme: testShared(e).th, Actor: "local:test", Jail: engine.JailOff, Bell: func() {}})
		a.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
		h, err := e.StartRun("local:test", engine.RunRequest{Module: "bench", Hook: "run", Jail: engine.JailOff})
		if err != nil {
			b.Fatal(err)
		}
		// This loop runs no commands, and opening a run reads in one:
		// open it in place, as New does.
		a.streams.reload()
		start := time.Now()
		for a.streams.log.end < 1_000_000 || a.streams.running() > 0 {
			msg := a.waitEvents()()
			a.Update(msg)
			_ = a.View()
			if time.Since(start) > time.Minute {
				b.Fatal("timed out")
			}
		}
		h.Wait()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MiB")
		b.ReportMetric(rssMiB(), "rss-MiB")
		b.ReportMetric(float64(a.eventMsgs), "event-msgs")
		b.ReportMetric(float64(len(a.streams.log.win)), "window-lines")
		if !strings.Contains(a.View(), "line 999999 of a million") {
			b.Fatalf("the tail is not on screen:\n%s", a.View())
		}
		a.Close()
	}
}

func rssMiB() float64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			var kb float64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), &kb)
			return kb / 1024
		}
	}
	return 0
}

// goTo puts the cursor on line n (or the nearest passing line).
func (v *logView) goTo(n uint64) {
	if v.run == "" || v.end == 0 {
		return
	}
	n = min(max(n, v.first), v.end-1)
	v.follow = false
	v.loadAround(n)
	v.cursor = n
	if v.idx(n) < 0 {
		if m, ok := v.step(n, 1); ok {
			v.cursor = m
		} else if m, ok := v.step(n, -1); ok {
			v.cursor = m
		}
	}
	v.top, v.topRow = v.cursor, 0
	v.scrollToCursor()
}
