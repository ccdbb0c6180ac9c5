package tui

import (
	"strings"
	"testing"
)

// smallScans makes the console look at a few lines per slice, so a
// 300-line stream shows what a stream of millions does: a search or a
// filter that goes on in slices, keys answered between them.
func smallScans(t *testing.T) {
	chunk, limit := scanChunk, scanLimit
	scanChunk, scanLimit = 40, 80
	t.Cleanup(func() { scanChunk, scanLimit = chunk, limit })
}

func TestStreamsSearchGoesOnInSlices(t *testing.T) {
	smallScans(t)
	e := newEngine(t)
	streamModule(t, e)
	runHook(t, e, "chatty", "lines")
	c := startConsole(t, e)
	c.wait("line 300: disk full")
	c.keys("right", "/", "line 3: all", "enter")
	// From the tail, line 3 is 297 lines back: four slices of 80.
	c.wait("⏸ 3/300")
	view := c.final()
	if !strings.Contains(view, "▸  3   line 3: all good") {
		t.Errorf("the cursor is not on line 3:\n%s", view)
	}
	c.golden(view)
}

func TestStreamsFilterNothingAtThisLevel(t *testing.T) {
	smallScans(t)
	e := newEngine(t)
	addModule(t, e, "quiet", map[string]string{"calm": "seq 1 200"}, nil)
	runHook(t, e, "quiet", "calm")
	c := startConsole(t, e)
	c.wait("END 200 lines")
	c.keys("right", "l", "l", "l") // error: there is none
	c.wait("nothing at this level (error)")
	c.keys("/", "zebra", "enter")
	c.wait(`no match for "zebra"`)
	c.golden(c.final())
}

// TestStreamsSparseFilterFillsTheScreenInSlices: three errors in 300
// lines, 80 looked at per slice: the filter goes on until all three show.
func TestStreamsSparseFilterFillsTheScreenInSlices(t *testing.T) {
	smallScans(t)
	e := newEngine(t)
	streamModule(t, e)
	runHook(t, e, "chatty", "lines")
	c := startConsole(t, e)
	c.wait("line 300: disk full")
	c.keys("right", "l", "l", "l")
	c.wait("line 100: disk full")
	view := c.final()
	for _, want := range []string{"100 E line 100: disk full", "200 E line 200: disk full", "▸300 E line 300: disk full"} {
		if !strings.Contains(view, want) {
			t.Errorf("missing %q:\n%s", want, view)
		}
	}
}
