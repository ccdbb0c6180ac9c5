package tui

import (
	"runtime"
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/themes"
)

// A viewer's 65535×65535 window-change (over SSH, one request) made the
// console draw a frame of 4 billion cells: serve went from 30 MB to 4 GB.
// The console and the fleet console draw at most MaxWidth × MaxHeight,
// whatever size they are told, and a zero or negative size is one cell.
func TestHugeWindowIsClamped(t *testing.T) {
	e := newEngine(t)
	a := New(e, Options{Theme: testShared(e).th, Actor: "local:test", Jail: engine.JailOff, Bell: func() {}})
	t.Cleanup(a.Close)
	f := newFakeFleet()
	fl := NewFleet(f, FleetOptions{Theme: themes.NoColor(), Name: "alice", Role: "operator"})
	for name, m := range map[string]tea.Model{"console": a, "fleet": fl} {
		var before runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		m.Update(tea.WindowSizeMsg{Width: 65535, Height: 65535})
		view := m.View()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		lines := strings.Split(view, "\n")
		if len(lines) > MaxHeight {
			t.Errorf("%s: %d lines drawn for a 65535-row terminal, want at most %d", name, len(lines), MaxHeight)
		}
		for i, l := range lines {
			if w := ansi.StringWidth(l); w > MaxWidth {
				t.Errorf("%s: line %d is %d cells wide, want at most %d", name, i, w, MaxWidth)
				break
			}
		}
		// A 1000×500 frame, styled, is a few MB of allocations; the
		// unclamped one was gigabytes.
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 256<<20 {
			t.Errorf("%s: one 65535×65535 frame allocated %d MiB", name, alloc>>20)
		}
		m.Update(tea.WindowSizeMsg{Width: 0, Height: -3})
		_ = m.View() // no panic on a size of nothing
	}
}

// The program-level filter bounds what a viewer says before the renderer
// or any model sees it; other messages pass untouched.
func TestBoundSize(t *testing.T) {
	for _, tc := range []struct{ w, h, ww, wh int }{
		{65535, 65535, MaxWidth, MaxHeight}, {80, 24, 80, 24}, {0, 0, 1, 1}, {-5, 3000, 1, MaxHeight},
	} {
		got := BoundSize(nil, tea.WindowSizeMsg{Width: tc.w, Height: tc.h}).(tea.WindowSizeMsg)
		if got.Width != tc.ww || got.Height != tc.wh {
			t.Errorf("%dx%d: %dx%d, want %dx%d", tc.w, tc.h, got.Width, got.Height, tc.ww, tc.wh)
		}
	}
	if k := BoundSize(nil, tea.KeyMsg{Type: tea.KeyEnter}); k.(tea.KeyMsg).Type != tea.KeyEnter {
		t.Errorf("a key came out as %v", k)
	}
}
