package tui

import (
	"encoding/json"
	"sort"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
)

// What every list pane shares: one way to move (navKey), one rule for the
// scroll offset (scrollOff), ids cut where they do not tell rows apart
// (midCut), and times that say the day when it is not today (stamp).

// navKey applies the shared navigation keys to a cursor over n rows
// (page rows to a page). It returns the new cursor and whether msg was a
// navigation key. skip, when set, names rows the cursor never rests on
// (a module's header row): a move passes over them in its direction.
func navKey(msg tea.KeyMsg, k KeyMap, sel, n, page int, skip func(int) bool) (int, bool) {
	if n == 0 {
		return 0, key.Matches(msg, k.Up, k.Down, k.PageUp, k.PageDown, k.Top, k.Bottom)
	}
	dir := 1
	switch {
	case key.Matches(msg, k.Up):
		sel, dir = sel-1, -1
	case key.Matches(msg, k.Down):
		sel = sel + 1
	case key.Matches(msg, k.PageUp):
		sel, dir = sel-max(page, 1), -1
	case key.Matches(msg, k.PageDown):
		sel = sel + max(page, 1)
	case key.Matches(msg, k.Top):
		sel = 0
	case key.Matches(msg, k.Bottom):
		sel, dir = n-1, -1
	default:
		return sel, false
	}
	return landOn(sel, dir, n, skip), true
}

// landOn clamps sel to [0, n) and, when skip is set, moves it in dir (then
// against it) to the nearest row skip allows.
func landOn(sel, dir, n int, skip func(int) bool) int {
	sel = min(max(sel, 0), max(n-1, 0))
	if skip == nil || n == 0 {
		return sel
	}
	for _, d := range []int{dir, -dir} {
		for i := sel; i >= 0 && i < n; i += d {
			if !skip(i) {
				return i
			}
		}
	}
	return sel
}

// shownRows lists the indexes of n rows that hidden leaves (a / filter),
// in order.
func shownRows(n int, hidden func(int) bool) []int {
	vis := make([]int, 0, n)
	for i := range n {
		if !hidden(i) {
			vis = append(vis, i)
		}
	}
	return vis
}

// scrollOff is the offset that shows the cursor within rows rows of a list
// of n, moving the old offset the least, and never leaving rows empty
// below the list's end while rows above it are hidden: after a resize or
// a filter shrank the list, the offset is valid again.
func scrollOff(off, sel, rows, n int) int {
	rows = max(rows, 1)
	if sel < off {
		off = sel
	}
	if sel >= off+rows {
		off = sel - rows + 1
	}
	return max(min(off, n-rows), 0)
}

// midCut shortens s to width cells by cutting its middle: ids tell
// each other apart at both ends (a run id's time and its random tail, a
// fingerprint's head and tail), so both stay.
func midCut(s string, width int) string {
	if width <= 0 {
		return ""
	}
	if textWidth(s) <= width {
		return safe(s)
	}
	if width < 5 {
		return plain(s, width)
	}
	rs := []rune(s)
	tail := (width - 1) / 2
	head := width - 1 - tail
	return plain(string(rs[:head]), head) + "…" + plain(string(rs[len(rs)-tail:]), tail)
}

// stamp is an absolute time for a list: the clock when it is today, the
// date too when it is not (a receipt from last week must not read as
// this morning).
func stamp(t, now time.Time) string {
	t, now = t.Local(), now.Local()
	if y, m, d := t.Date(); y == now.Year() && m == now.Month() && d == now.Day() {
		return t.Format("15:04:05")
	}
	if t.Year() == now.Year() {
		return t.Format("Jan 02 15:04")
	}
	return t.Format("2006-01-02 15:04")
}

// ago is a relative time for a list column ("42s ago").
func ago(t, now time.Time) string { return ShortDuration(now.Sub(t)) + " ago" }

// runAgo says when a run happened, counted from its end: "cancelled 2s
// ago" two seconds after the cancel, however long it ran. A running run
// says how long it has been going.
func runAgo(r runRecord, now time.Time) string {
	if r.Ended == nil {
		return "for " + ShortDuration(now.Sub(r.Started))
	}
	return ago(*r.Ended, now) + ", took " + runDuration(r, now)
}

// inputsLine is a run's inputs as "name=value …", sorted by name, for a
// title or a row ("" when it had none). Values are a module author's and
// a caller's: the caller of this escapes (plain or safe) what it draws.
func inputsLine(raw []byte) string {
	if len(raw) == 0 {
		return ""
	}
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil || len(m) == 0 {
		return ""
	}
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		v, _ := json.Marshal(m[n])
		s := string(v)
		if str, ok := m[n].(string); ok && !strings.ContainsAny(str, " \"=") && str != "" {
			s = str
		}
		parts = append(parts, n+"="+s)
	}
	return strings.Join(parts, " ")
}
