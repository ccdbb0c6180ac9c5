package tui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/wardenhq/warden/engine"
)

// receiptRows counts the receipt rows of a frame (rows whose seq column
// holds a number).
func receiptRows(view string) (n int) {
	for _, l := range strings.Split(view, "\n") {
		f := strings.Fields(strings.TrimPrefix(l, "▸"))
		if len(f) > 2 && f[1] == "hh:mm:ss" {
			if _, err := fmt.Sscan(f[0], new(int)); err == nil {
				n++
			}
		}
	}
	return n
}

// TestReceiptsResizeKeepsTheListFull: a list scrolled to its end at 80x24
// fills a 200x60 window after the resize (it left 38 rows empty), and a
// kind filter that leaves 14 receipts shows all 14.
func TestReceiptsResizeKeepsTheListFull(t *testing.T) {
	e := newEngine(t)
	streamModule(t, e)
	for i := range 80 {
		if err := e.SetConfig("local:test", "chatty", fmt.Sprintf("key%02d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	c := startConsole(t, e)
	c.tm.Send(tea.WindowSizeMsg{Width: 80, Height: 24})
	c.keys("3")
	c.wait("Receipts · newest 8")
	c.tm.Send(tea.WindowSizeMsg{Width: 200, Height: 60})
	c.wait("summary")
	// g then G: the cursor goes to the oldest and back to the newest.
	c.keys("g", "G")
	view := c.final()
	if n := receiptRows(view); n != 60-4-2 {
		t.Errorf("%d receipt rows at 200x60, want %d (the body full):\n%s", n, 60-6, view)
	}
	c.golden(view)
}

func TestReceiptsFilterShowsEveryMatch(t *testing.T) {
	e := newEngine(t)
	streamModule(t, e)
	for i := range 14 {
		runHook(t, e, "chatty", "lines")
		_ = i
	}
	for i := range 60 {
		if err := e.SetConfig("local:test", "chatty", fmt.Sprintf("key%02d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	c := startConsole(t, e)
	c.keys("3")
	c.wait("Receipts · newest")
	c.keys("/", "hook.end", "enter")
	c.wait("of kind hook.end")
	view := c.final()
	if !strings.Contains(view, "newest 14 of kind hook.end") {
		t.Fatalf("want 14 hook.end receipts:\n%s", view)
	}
	if n := receiptRows(view); n != 14 {
		t.Errorf("the title says 14, %d shown:\n%s", n, view)
	}
}

// TestModulesNavigation: g/G/PgUp/PgDn move in Modules, and the cursor
// never rests on a module's header row.
func TestModulesNavigation(t *testing.T) {
	e := newEngine(t)
	addModule(t, e, "alpha", map[string]string{"one": "true", "two": "true"}, nil)
	addModule(t, e, "beta", map[string]string{"three": "true", "four": "true"}, nil)
	c := startConsole(t, e)
	c.keys("4")
	c.wait("Modules (2)")
	c.keys("G", "up", "up", "g", "down", "down", "pgdown", "pgup")
	view := c.final()
	// After pgup the cursor is on the first hook, never on "alpha 1.0.0".
	if !strings.Contains(view, "▸   one") || strings.Contains(view, "▸ alpha") {
		t.Errorf("the cursor is not on the first hook:\n%s", view)
	}
	c.golden(view)

	// And step by step: down from alpha's last hook lands on beta's first.
	p := newModulesPane(testShared(e))
	p.reload(nil)
	var seen []string
	for range 5 {
		r := p.rows[p.sel]
		if r.hook == "" {
			t.Fatalf("the cursor rests on the header row of %s", r.mod.Record.ID)
		}
		seen = append(seen, r.mod.Record.ID+"/"+r.hook)
		p.move(1)
	}
	if got := strings.Join(seen, " "); got != "alpha/one alpha/two beta/four beta/three beta/three" {
		t.Errorf("down walks %s", got)
	}
}

func TestMidCutKeepsBothEnds(t *testing.T) {
	for _, tc := range []struct {
		in   string
		w    int
		want string
	}{
		{"ssh:SHA256:Np4kq9aZ0uYwTq3bX1", 16, "ssh:SHA2…wTq3bX1"},
		{"20261201T092818-e3a1f0", 14, "2026120…e3a1f0"},
		{"short", 10, "short"},
		{"\x1b]52;c;evil\x07tail", 12, "␛]52;c…␇tail"},
	} {
		got := midCut(tc.in, tc.w)
		if got != tc.want || textWidth(got) > tc.w {
			t.Errorf("midCut(%q, %d) = %q, want %q", tc.in, tc.w, got, tc.want)
		}
	}
}

func TestStampSaysTheDayWhenNotToday(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		at   time.Time
		want string
	}{
		{now.Add(-time.Hour), "11:00:00"},
		{now.Add(-13 * time.Hour), "Nov 30 23:00"},
		{now.AddDate(-1, 0, 0), "2025-12-01 12:00"},
	} {
		if got := stamp(tc.at, now); got != tc.want {
			t.Errorf("stamp(%v) = %q, want %q", tc.at, got, tc.want)
		}
	}
	ended := now.Add(-2 * time.Second)
	r := runRecord{Started: now.Add(-45 * time.Second), Ended: &ended}
	if got := runAgo(r, now); got != "2s ago, took 43s" {
		t.Errorf("a run cancelled 2s ago after 43s says %q", got)
	}
}

// TestSlashFiltersModulesAndRequests: / filters the Modules and Requests
// lists too; esc shows them whole again.
func TestSlashFiltersModulesAndRequests(t *testing.T) {
	e := newEngine(t)
	addModule(t, e, "alpha", map[string]string{"one": "true", "two": "true"}, nil)
	addModule(t, e, "beta", map[string]string{"three": "true", "four": "true"}, nil)
	askModule(t, e)
	c := startConsole(t, e)
	c.keys("4")
	c.wait("Modules (3)")
	c.keys("/", "thr", "enter")
	c.wait("filter thr (esc clears)")
	c.keys("esc")
	c.wait("Modules (3)  ")
	var hs []interface{ Wait() engine.Outcome }
	for range 2 {
		h, err := e.StartRun("local:test", engine.RunRequest{Module: "asker", Hook: "ask", Jail: engine.JailOff})
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	defer func() {
		e.Deny("local:test", 1, "over")
		e.Deny("local:test", 2, "over")
		for _, h := range hs {
			h.Wait()
		}
	}()
	c.wait("2 pending")
	c.keys("2", "/", "#2", "enter")
	c.wait("filter #2 (esc clears) · 1 of 2")
	view := c.final()
	if !strings.Contains(view, "▸#2 ") || strings.Contains(view, " #1 ") {
		t.Errorf("filtered requests:\n%s", view)
	}
	c.golden(view)
}

func TestSlashFiltersModules(t *testing.T) {
	e := newEngine(t)
	addModule(t, e, "alpha", map[string]string{"one": "true", "two": "true"}, nil)
	addModule(t, e, "beta", map[string]string{"three": "true", "four": "true"}, nil)
	c := startConsole(t, e)
	c.keys("4")
	c.wait("Modules (2)")
	c.keys("/", "thr", "enter")
	c.wait("filter thr (esc clears) · 1 of 4 hooks")
	view := c.final()
	if !strings.Contains(view, "▸   three") || strings.Contains(view, "alpha") || strings.Contains(view, "four") {
		t.Errorf("filtered modules:\n%s", view)
	}
	c.golden(view)
}
