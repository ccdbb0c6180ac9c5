package tui

import (
	"fmt"
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/wardenhq/warden/engine"
)

// filteredRuns runs alpha/one, beta/other, alpha/bone, beta/other in
// that order: newest first, the list is other, bone, other, one, and
// "one" matches bone and one, with a hidden row between them.
func filteredRuns(t *testing.T, e engine.Facade) {
	t.Helper()
	addModule(t, e, "alpha", map[string]string{"one": "true", "bone": "true"}, nil)
	addModule(t, e, "beta", map[string]string{"other": "true"}, nil)
	for _, h := range [][2]string{{"alpha", "one"}, {"beta", "other"}, {"alpha", "bone"}, {"beta", "other"}} {
		runHook(t, e, h[0], h[1])
	}
}

// TestSlashFiltersRuns: / on the runs list filters it by what a row
// shows (here the hook's name); the cursor lands on the first match and
// j/k/G/g pass over the rows the filter hides, the log following the
// cursor; esc shows the list whole again.
func TestSlashFiltersRuns(t *testing.T) {
	e := newEngine(t)
	filteredRuns(t, e)
	c := startConsoleSize(t, e, 140, 30)
	c.wait("Runs (4)", "/ filter runs")
	c.keys("/")
	c.wait("filter runs ›")
	c.keys("one", "enter")
	// The newest run (beta/other) is hidden: the cursor goes on to
	// alpha/bone, and the log opens it.
	c.wait("Runs · filter one (esc clears) · 2 of 4", "alpha/bone · succeeded")
	// Down passes over the hidden beta/other between the two matches.
	c.keys("down")
	c.wait("alpha/one · succeeded")
	c.keys("up")
	c.wait("alpha/bone · succeeded")
	c.keys("G")
	c.wait("alpha/one · succeeded")
	c.keys("g")
	c.wait("alpha/bone · succeeded")
	c.keys("pgdown")
	c.wait("alpha/one · succeeded")
	view := c.final()
	if !strings.Contains(view, "▸✓ alpha/one") || strings.Contains(view, "beta/other") {
		t.Errorf("want the cursor on alpha/one and no beta/other row:\n%s", view)
	}
	if strings.Count(view, "✓ alpha/") != 2 {
		t.Errorf("want the two matching runs listed:\n%s", view)
	}
	c.golden(view)

	// esc clears the filter: the four runs are back.
	c = startConsoleSize(t, e, 140, 30)
	c.wait("Runs (4)")
	c.keys("/", "one", "enter")
	c.wait("2 of 4")
	c.keys("esc")
	c.wait("Runs (4)", "runs filter cleared")
	view = c.final()
	if strings.Count(view, "beta/other") != 2 || strings.Contains(view, "filter one") {
		t.Errorf("esc did not show the whole list:\n%s", view)
	}
}

// TestRunsFilterMatchingNothing: a filter that matches no run says so,
// and leaves nothing to act on: enter and c do nothing, x cancels nothing.
func TestRunsFilterMatchingNothing(t *testing.T) {
	e := newEngine(t)
	filteredRuns(t, e)
	c := startConsoleSize(t, e, 140, 30)
	c.wait("Runs (4)")
	c.keys("/", "zzz", "enter")
	c.wait("Runs · filter zzz (esc clears) · 0 of 4", "no match for zzz")
	c.keys("enter")
	c.wait(`no run matches "zzz": esc clears the filter`)
	c.keys("c", "x")
	c.wait(`no run matches "zzz": nothing to cancel (esc clears the filter)`)
	view := c.final()
	if strings.Contains(view, "copied") || strings.Contains(view, "✓ ") {
		t.Errorf("a hidden run was copied or drawn:\n%s", view)
	}
	c.golden(view)
}

// TestRunsFilterXCancelsNothingHidden: with a run going, x on a filter
// that hides it asks nothing and cancels nothing; once esc clears the
// filter, x asks to cancel it again.
func TestRunsFilterXCancelsNothingHidden(t *testing.T) {
	e := newEngine(t)
	streamModule(t, e)
	c := startConsoleSize(t, e, 140, 30)
	h := c.startSlowRun()
	defer func() {
		_ = e.CancelRun("local:test", h.ID)
		h.Wait()
	}()
	c.wait("chatty/slow")
	c.keys("/", "zzz", "enter")
	c.wait("0 of 1", "no match for zzz")
	c.keys("x")
	c.wait(`no run matches "zzz": nothing to cancel`)
	// Had x asked, y would now cancel the run.
	c.keys("y")
	rec, err := e.Run(h.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != engine.RunRunning {
		t.Fatalf("the hidden run is %s, want it still running", rec.Status)
	}
	c.keys("esc")
	c.wait("Runs (1)")
	c.keys("x")
	c.wait("cancel run " + h.ID)
	c.keys("n")
	c.wait("nothing done")
	// The log side keeps / for its search.
	c.keys("enter", "/")
	c.wait("search this stream")
	c.keys("esc")
	if rec, _ := e.Run(h.ID); rec.Status != engine.RunRunning {
		t.Errorf("the run is %s after n, want it still running", rec.Status)
	}
}

// TestRunsFilterReadsOlderPages: a match older than the first page is
// found by moving past the end: the next pages are read by key range
// until one holds a match.
func TestRunsFilterReadsOlderPages(t *testing.T) {
	e := newEngine(t)
	filteredRuns(t, e)
	for range runsPage + 5 {
		runHook(t, e, "beta", "other")
	}
	c := startConsoleSize(t, e, 140, 30)
	c.wait("Runs (50)")
	c.keys("/", "bone", "enter")
	c.wait("0 of 50", "no match for bone")
	c.keys("down")
	c.wait("alpha/bone · succeeded", "1 of 59")
	// Past the last match, the history ends: said, and the cursor stays.
	c.keys("down")
	c.wait(`no older run matches "bone"`)
	view := c.final()
	if !strings.Contains(view, "▸✓ alpha/bone") {
		t.Errorf("want the cursor on the older alpha/bone:\n%s", view)
	}
}

func TestRunsTitleShortensToTheWidth(t *testing.T) {
	p := newStreamsPane(testShared(nil))
	p.runs = make([]engine.RunRecord, 12)
	p.runQuery = "chatty"
	for _, tc := range []struct {
		w    int
		want string
	}{
		{60, "Runs · filter chatty (esc clears) · 3 of 12"},
		{40, "filter chatty (esc clears) · 3 of 12"},
		{30, "/chatty (esc clears) · 3 of 12"},
		{24, "/chatty · 3 of 12"},
	} {
		if got := p.runsTitle(3, tc.w); got != tc.want {
			t.Errorf("at %d: %q, want %q", tc.w, got, tc.want)
		}
	}
}

// TestSlashHintsSayWhichSide: the hints name / by the side with focus,
// and help names both.
func TestSlashHintsSayWhichSide(t *testing.T) {
	p := newStreamsPane(testShared(nil))
	p.resize(100, 30)
	hints := func() (short, full string) {
		km := p.keys()
		for _, b := range km.short {
			short += b.Help().Key + " " + b.Help().Desc + " · "
		}
		for _, col := range km.full {
			for _, b := range col {
				full += b.Help().Key + " " + b.Help().Desc + " · "
			}
		}
		return short, full
	}
	short, full := hints()
	if !strings.Contains(short, "/ filter runs") || !strings.Contains(full, "/ runs: filter, log: search") {
		t.Errorf("on the runs: hints %q, help %q", short, full)
	}
	p.focusLog = true
	short, _ = hints()
	if !strings.Contains(short, "/ search ·") || strings.Contains(short, "filter runs") {
		t.Errorf("on the log: hints %q", short)
	}
}

// TestShowClearsARunsFilterHidingTheRun: a run shown on purpose (started
// from Modules, drilled to) is not left hidden under the cursor.
func TestShowClearsARunsFilterHidingTheRun(t *testing.T) {
	e := newEngine(t)
	filteredRuns(t, e)
	p := newStreamsPane(testShared(e))
	p.resize(100, 30)
	p.reload()
	p.setRunQuery("one")
	other := p.runs[0] // beta/other, hidden by "one"
	if !p.hidden(0) || p.selectedID() == other.ID {
		t.Fatalf("beta/other is not hidden by the filter")
	}
	p.show(other.ID)
	if p.runQuery != "" || p.selectedID() != other.ID || !p.focusLog {
		t.Errorf("show left the filter %q, selection %q (want %s)", p.runQuery, p.selectedID(), other.ID)
	}
}

// BenchmarkRunsFilter: what a runs filter costs a frame over maxRuns
// runs with inputs; the baseline decodes each run's inputs every time,
// as the filter would without inputsText.
func BenchmarkRunsFilter(b *testing.B) {
	p := newStreamsPane(testShared(nil))
	for i := range maxRuns {
		p.runs = append(p.runs, engine.RunRecord{ID: fmt.Sprintf("20261201T0928%02d-e3a1f%d", i%60, i), Module: "chatty", Hook: "lines",
			Actor: "local:root", Status: engine.RunSucceeded, Inputs: []byte(`{"name":"x","count":3,"path":"/a/b"}`)})
	}
	p.runQuery = "count=3"
	b.Run("decodeEachTime", func(b *testing.B) {
		for range b.N {
			shownRows(len(p.runs), func(i int) bool {
				r := p.runs[i]
				return !contains(strings.Join([]string{r.Module + "/" + r.Hook, r.ID, r.Status, r.Actor, inputsLine(r.Inputs)}, " "), p.runQuery)
			})
		}
	})
	b.Run("visible", func(b *testing.B) {
		for range b.N {
			if len(p.visible()) != maxRuns {
				b.Fatal("the filter lost runs")
			}
		}
	})
}

// TestRunsFilterClickPicksAShownRow: a click on the runs list picks among
// the rows on screen (the filter's), not by the unfiltered index.
func TestRunsFilterClickPicksAShownRow(t *testing.T) {
	e := newEngine(t)
	filteredRuns(t, e)
	p := newStreamsPane(testShared(e))
	p.resize(100, 30)
	p.reload()
	p.setRunQuery("one")
	p.view(100, 30)
	// Row 2 under the title is the second match, alpha/one (unfiltered,
	// it would be the hidden beta/other).
	p.update(tea.MouseMsg{X: 2, Y: 2, Button: tea.MouseButtonLeft, Action: tea.MouseActionPress})
	if r, _ := p.record(p.selectedID()); r.Module+"/"+r.Hook != "alpha/one" {
		t.Errorf("the click picked %q, want alpha/one", r.Module+"/"+r.Hook)
	}
	// A click under the last shown row picks nothing.
	p.update(tea.MouseMsg{X: 2, Y: 3, Button: tea.MouseButtonLeft, Action: tea.MouseActionPress})
	if r, _ := p.record(p.selectedID()); r.Module+"/"+r.Hook != "alpha/one" {
		t.Errorf("a click below the list moved the cursor to %q", r.Module+"/"+r.Hook)
	}
}
