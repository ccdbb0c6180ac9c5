package tui

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/wardenhq/warden/engine"
)

// The log view shows one run's stream. Storage holds every line; the view
// holds a bounded window of them (at most winMax lines and winMaxBytes of
// text) around what is on screen and pages from storage when the cursor
// leaves it. Drawing a frame touches only the visible lines, and a line's
// width is measured once and cached, so a frame costs the same whether the
// run printed a thousand lines or a million.
//
// Under a level filter the window holds only the lines that pass: storage
// filters them on its stored bytes (StreamScan), so a sparse filter over a
// million lines reads a few screens of lines, not a million strings. The
// window then covers the stream's lines [lo, hi): every passing line in
// that range is in it.
const (
	winMax      = 2000
	winMaxBytes = 16 << 20
	winPage     = 500
)

// scanChunk bounds how many stored lines one read looks at; a key press
// looks at no more than scanLimit (a sparse filter's page, a move, a
// search); what is left is looked at in later slices (scanOnMsg), so the
// console keeps answering keys meanwhile. Variables: tests make them
// small.
var (
	scanChunk = 1 << 19
	scanLimit = 1 << 20
)

// Level filters, cycled with l.
type levelFilter int

const (
	levelAll levelFilter = iota
	levelInfo
	levelWarn
	levelError
)

func (f levelFilter) String() string {
	return [...]string{"all", "≥info", "≥warn", "error"}[f]
}

// severity ranks levels for the filter: success ranks with info.
func severity(l engine.Level) levelFilter {
	switch l {
	case engine.LevelDebug:
		return levelAll
	case engine.LevelWarn:
		return levelWarn
	case engine.LevelError:
		return levelError
	default:
		return levelInfo
	}
}

type logView struct {
	sh *shared
	// src is where a copy made for an operation reads (logops.go); nil:
	// the engine.
	src lineSource

	run         string
	first, end  uint64 // storage holds lines [first, end)
	lo, hi      uint64 // the window covers lines [lo, hi)
	win         []engine.Line
	widths      []int32 // display width of win[i], -1 until measured
	winBytes    int
	cursor, top uint64 // line numbers (N)
	topRow      int    // rows of the top line scrolled off (wrap)
	follow      bool
	wrap        bool
	level       levelFilter
	invert      bool
	query       string
	err         string
	paints      *logPaints
	scanStop    bool   // the last seek gave up at scanLimit ...
	scanAt      uint64 // ... at this line
	width       int
	height      int
	// states keeps each run's search and filter while another is shown.
	states map[string]viewState
	// noRuns: there is no run at all (the view says where to start).
	noRuns bool
}

// viewState is what of a run's view is the operator's choice to keep.
type viewState struct {
	level  levelFilter
	invert bool
	query  string
}

func newLogView(sh *shared) *logView {
	return &logView{sh: sh, follow: true}
}

// match reports whether a line passes the level filter.
func (v *logView) match(l *engine.Line) bool {
	if v.level == levelAll {
		return true
	}
	ok := severity(l.Level) >= v.level
	if v.level == levelError {
		ok = l.Level == engine.LevelError
	}
	return ok != v.invert
}

// lineFilter is the level filter as storage applies it.
func (v *logView) lineFilter() engine.LineFilter {
	if v.level == levelAll {
		return engine.LineFilter{}
	}
	var bits uint8
	for l := engine.LevelDebug; l <= engine.LevelSuccess; l++ {
		if v.match(&engine.Line{Level: l}) {
			bits |= engine.LevelBit(l)
		}
	}
	return engine.LineFilter{Levels: bits}
}

// filtered reports whether a level filter leaves lines out.
func (v *logView) filtered() bool { return v.level != levelAll }

// winStart and winEnd bound the lines the window covers: [winStart, winEnd).
func (v *logView) winStart() uint64 { return v.lo }

func (v *logView) winEnd() uint64 { return v.hi }

// idx is the window index of line n, or -1.
func (v *logView) idx(n uint64) int {
	if len(v.win) == 0 || n < v.win[0].N || n > v.win[len(v.win)-1].N {
		return -1
	}
	i := int(n - v.win[0].N) // unfiltered, stored lines are contiguous
	if i < len(v.win) && v.win[i].N == n {
		return i
	}
	i = sort.Search(len(v.win), func(i int) bool { return v.win[i].N >= n })
	if i < len(v.win) && v.win[i].N == n {
		return i
	}
	return -1
}

// open shows run, following its tail.
func (v *logView) open(run string) {
	// Search and filter belong to a run: the one left keeps its own for
	// when it is shown again, and the one shown starts with its own
	// (none, the first time).
	states := v.states
	if states == nil {
		states = map[string]viewState{}
	}
	if v.run != "" {
		st := viewState{level: v.level, invert: v.invert, query: v.query}
		if st == (viewState{}) {
			delete(states, v.run)
		} else {
			states[v.run] = st
		}
	}
	st := states[run]
	*v = logView{sh: v.sh, src: v.src, run: run, follow: true, wrap: v.wrap, level: st.level, invert: st.invert, query: st.query, width: v.width, height: v.height, paints: v.paints, states: states}
	v.refreshMeta()
	v.loadTail()
}

func (v *logView) refreshMeta() {
	m, err := v.store().StreamInfo(v.run)
	if err != nil {
		v.err = err.Error()
		return
	}
	v.first, v.end = m.First, m.Lines
}

func (v *logView) setWindow(lines []engine.Line, lo, hi uint64) {
	v.win, v.lo, v.hi = lines, lo, hi
	v.widths = make([]int32, len(lines))
	v.winBytes = 0
	for i := range lines {
		v.widths[i] = -1
		v.winBytes += len(lines[i].Text)
	}
}

// page reads a window's page of passing lines from line from on
// (forward) or before it (backward), and the range it covers.
func (v *logView) page(from uint64, backward bool) (lines []engine.Line, lo, hi uint64) {
	s, err := v.store().StreamScan(v.run, from, backward, v.lineFilter(), winPage, scanChunk)
	if err != nil {
		v.err = err.Error()
		return nil, from, from
	}
	if backward {
		return s.Lines, min(s.Next, from), from
	}
	return s.Lines, from, max(s.Next, from)
}

// loadTail fills the window with the stream's last page.
func (v *logView) loadTail() {
	if v.run == "" {
		return
	}
	v.setWindow(v.page(v.end, true))
	if n := len(v.win); n > 0 && v.win[n-1].N+1 > v.end {
		v.end = v.win[n-1].N + 1
	}
	v.toEnd()
}

// loadAround fills the window with lines around n.
func (v *logView) loadAround(n uint64) {
	from := v.first
	if n > from+winPage/2 {
		from = n - winPage/2
	}
	if v.filtered() {
		// Passing lines may be far apart: a page before n+1, then on.
		back, lo, _ := v.page(n+1, true)
		v.setWindow(back, lo, n+1)
		v.fetch(1)
		return
	}
	v.setWindow(v.page(from, false))
}

// toEnd puts the cursor on the last passing line (follow mode's place).
func (v *logView) toEnd() {
	if v.winEnd() < v.end {
		v.setWindow(v.page(v.end, true))
	}
	// A sparse filter: look further back (to scanLimit) for a screen.
	for scanned := 0; len(v.win) < v.height && v.lo > v.first && scanned < scanLimit; scanned += scanChunk {
		if !v.fetch(-1) {
			break
		}
	}
	if len(v.win) == 0 {
		v.cursor, v.top, v.topRow = v.end, v.end, 0
		return
	}
	v.cursor = v.win[len(v.win)-1].N
	v.anchorBottom()
}

// appendLive adds lines that just became durable for this run.
func (v *logView) appendLive(lines []engine.Line) {
	if len(lines) == 0 {
		return
	}
	atEnd := v.winEnd() >= v.end
	if last := lines[len(lines)-1].N + 1; last > v.end {
		v.end = last
	}
	if !atEnd {
		return // the window is elsewhere; storage has them for later
	}
	if lines[0].N > v.winEnd() && (len(v.win) > 0 || v.winEnd() > v.first) {
		// A gap (missed events): the window no longer meets the tail.
		if v.follow {
			v.loadTail()
		}
		return
	}
	for len(lines) > 0 && lines[0].N < v.winEnd() {
		lines = lines[1:] // already held
	}
	if len(lines) == 0 {
		return
	}
	v.hi = lines[len(lines)-1].N + 1
	if len(lines) > winMax { // only the tail of a flood can matter here
		if !v.follow && len(v.win) > 0 {
			// The user reads older lines; the window stays with them
			// (and no longer reaches the tail).
			v.hi = v.win[len(v.win)-1].N + 1
			return
		}
		lines = lines[len(lines)-winMax:]
		if len(v.win) == 0 {
			v.lo = lines[0].N
		}
	}
	for i := range lines {
		if !v.match(&lines[i]) {
			continue
		}
		v.win = append(v.win, lines[i])
		v.widths = append(v.widths, -1)
		v.winBytes += len(lines[i].Text)
	}
	if v.follow {
		v.trim(true)
		v.toEnd()
	} else {
		v.trim(v.cursor >= v.winStart()+(v.winEnd()-v.winStart())/2)
	}
}

// trim keeps the window within bounds, dropping lines from the front
// (fromFront) or the back. It copies what it keeps, so the arrays of a
// flood are not held.
func (v *logView) trim(fromFront bool) {
	if len(v.win) <= winMax && v.winBytes <= winMaxBytes {
		return
	}
	lo, hi := 0, len(v.win)
	bytes := v.winBytes
	for hi-lo > winMax || (bytes > winMaxBytes && hi-lo > 1) {
		if fromFront {
			bytes -= len(v.win[lo].Text)
			lo++
		} else {
			hi--
			bytes -= len(v.win[hi].Text)
		}
	}
	if fromFront {
		v.lo = v.win[lo].N
	} else {
		v.hi = v.win[hi-1].N + 1
	}
	v.win = append([]engine.Line(nil), v.win[lo:hi]...)
	v.widths = append([]int32(nil), v.widths[lo:hi]...)
	v.winBytes = bytes
}

// fetch extends the window by a page in direction dir; false at the edge.
func (v *logView) fetch(dir int) bool {
	if dir > 0 {
		if v.winEnd() >= v.end {
			return false
		}
		lines, _, hi := v.page(v.winEnd(), false)
		if hi <= v.winEnd() {
			return false
		}
		for i := range lines {
			v.win = append(v.win, lines[i])
			v.widths = append(v.widths, -1)
			v.winBytes += len(lines[i].Text)
		}
		v.hi = hi
		v.trim(true)
		return true
	}
	if v.winStart() <= v.first {
		return false
	}
	lines, lo, _ := v.page(v.winStart(), true)
	if lo >= v.winStart() {
		return false
	}
	ws := make([]int32, len(lines), len(lines)+len(v.win))
	for i := range ws {
		ws[i] = -1
		v.winBytes += len(lines[i].Text)
	}
	v.win = append(lines, v.win...)
	v.widths = append(ws, v.widths...)
	v.lo = lo
	v.trim(false)
	return true
}

// step finds the nearest passing line strictly after (dir>0) or before
// (dir<0) line n, paging from storage as needed; the window then holds it.
func (v *logView) step(n uint64, dir int) (uint64, bool) {
	return v.seek(n, dir, func(*engine.Line) bool { return true })
}

// seek is step with a further predicate on the window's lines. It looks
// at no more than scanLimit stored lines.
func (v *logView) seek(n uint64, dir int, ok func(*engine.Line) bool) (uint64, bool) {
	v.scanStop = false
	if n < v.winStart() || n >= v.winEnd() {
		v.loadAround(n)
	}
	var looked uint64
	for {
		if dir > 0 {
			i := sort.Search(len(v.win), func(i int) bool { return v.win[i].N > n })
			for ; i < len(v.win); i++ {
				if ok(&v.win[i]) {
					return v.win[i].N, true
				}
			}
			n = max(n, v.winEnd()-1) // every line up to winEnd looked at
		} else {
			i := sort.Search(len(v.win), func(i int) bool { return v.win[i].N >= n }) - 1
			for ; i >= 0; i-- {
				if ok(&v.win[i]) {
					return v.win[i].N, true
				}
			}
			n = min(n, v.winStart())
		}
		if looked >= uint64(scanLimit) {
			v.scanStop, v.scanAt = true, n
			return 0, false
		}
		lo, hi := v.winStart(), v.winEnd()
		if !v.fetch(dir) {
			return 0, false
		}
		if dir > 0 {
			looked += v.winEnd() - hi
		} else {
			looked += lo - v.winStart()
		}
	}
}

// ensure makes the window hold line n.
func (v *logView) ensure(n uint64) {
	if v.idx(n) < 0 && n >= v.first && n < v.end && (n < v.winStart() || n >= v.winEnd()) {
		v.loadAround(n)
	}
}

// move moves the cursor by count passing lines.
func (v *logView) move(count int) {
	if v.run == "" {
		return
	}
	dir := 1
	if count < 0 {
		dir, count = -1, -count
	}
	v.ensure(v.cursor)
	moved := false
	for ; count > 0; count-- {
		n, ok := v.step(v.cursor, dir)
		if !ok {
			break
		}
		v.cursor, moved = n, true
	}
	if dir < 0 && moved {
		v.follow = false
	}
	if dir > 0 && v.atLast() {
		v.follow = true // on at the bottom, as less +F
	}
	v.ensure(v.cursor)
	v.scrollToCursor()
}

// atLast reports whether the cursor is on the stream's last passing line.
func (v *logView) atLast() bool {
	if v.winEnd() < v.end {
		return false
	}
	i := v.idx(v.cursor)
	return i >= 0 && i == len(v.win)-1
}

// home and bottom.
func (v *logView) home() {
	v.follow = false
	v.setWindow(v.page(v.first, false))
	for scanned := 0; len(v.win) == 0 && v.winEnd() < v.end && scanned < scanLimit; scanned += scanChunk {
		if !v.fetch(1) {
			break
		}
	}
	if len(v.win) == 0 {
		return
	}
	n := v.win[0].N
	v.cursor, v.top, v.topRow = n, n, 0
}

func (v *logView) bottom() {
	v.follow = true
	v.loadTail()
}

// setFollow turns follow on (to the tail) or off (where the view is).
func (v *logView) setFollow(on bool) {
	if on {
		v.bottom()
		return
	}
	v.follow = false
}

// refilter re-reads the window after a filter change (it held the lines
// of the old filter) and keeps the cursor on the nearest passing line at
// or before where it was.
func (v *logView) refilter() {
	if v.run == "" {
		return
	}
	if v.follow {
		v.loadTail()
		return
	}
	at, oldTop := v.cursor, v.top
	back, lo, _ := v.page(at+1, true)
	v.setWindow(back, lo, at+1)
	v.fetch(1)
	switch {
	case len(back) > 0:
		v.cursor = back[len(back)-1].N
	case len(v.win) > 0:
		v.cursor = v.win[0].N
	default:
		if n, ok := v.step(at, -1); ok {
			v.cursor = n
		} else if n, ok := v.step(at, 1); ok {
			v.cursor = n
		}
	}
	// The view moves the least: the top stays on the nearest passing
	// line at or above where it was.
	top := v.cursor
	if i := sort.Search(len(v.win), func(i int) bool { return v.win[i].N > oldTop }) - 1; i >= 0 && v.win[i].N < top {
		top = v.win[i].N
	}
	v.top, v.topRow = top, 0
	v.scrollToCursor()
}

// empty reports whether nothing passes the filter in the part of the
// stream looked at, and that part is the whole stream.
func (v *logView) empty() bool {
	return len(v.win) == 0 && v.winStart() <= v.first && v.winEnd() >= v.end
}

// searchFilter is the search as storage applies it: the query (matched
// without regard to case when it is all lower case, as highlight does)
// within the level filter.
func (v *logView) searchFilter() engine.LineFilter {
	f := v.lineFilter()
	f.Query, f.Fold = v.query, isLower(v.query)
	return f
}

// search moves to the next (dir>0) or previous line holding the query,
// looking at no more than scanLimit lines; scanStop and scanAt then say
// where a later search goes on.
func (v *logView) search(dir int) (found bool) {
	if v.query == "" || v.run == "" {
		return false
	}
	from := v.cursor
	if dir > 0 {
		from = v.cursor + 1
	}
	if v.scanStop {
		from = v.scanAt // going on from where the last one stopped
	}
	return v.searchFrom(from, dir)
}

// searchFrom looks for the query from line from on (or before it).
func (v *logView) searchFrom(from uint64, dir int) bool {
	v.scanStop = false
	s, err := v.store().StreamScan(v.run, from, dir < 0, v.searchFilter(), 1, scanLimit)
	if err != nil {
		v.err = err.Error()
		return false
	}
	if len(s.Lines) == 0 {
		if !s.Done {
			v.scanStop, v.scanAt = true, s.Next
		}
		return false
	}
	// The view moves the least, as a move does.
	n := s.Lines[0].N
	if v.idx(n) < 0 {
		v.loadAround(n)
	}
	v.cursor, v.follow = n, false
	v.scrollToCursor()
	return true
}

// Layout: a gutter (cursor mark, line number, level tag) then the text.
func (v *logView) gutter() int { return 1 + len(strconv.FormatUint(max(v.end, 1), 10)) + 3 }

func (v *logView) textCols() int { return max(v.width-v.gutter(), 1) }

// rows is how many screen rows line i of the window takes.
func (v *logView) rows(i int) int {
	if !v.wrap {
		return 1
	}
	if v.widths[i] < 0 {
		v.widths[i] = int32(textWidth(v.win[i].Text))
	}
	return rowsFor(int(v.widths[i]), v.textCols())
}

// anchorBottom scrolls so the cursor's line ends on the last row.
func (v *logView) anchorBottom() {
	i := v.idx(v.cursor)
	if i < 0 {
		v.top, v.topRow = v.cursor, 0
		return
	}
	h := max(v.height, 1)
	used := 0
	top, topRow := v.cursor, 0
	for j := i; j >= 0; j-- {
		if !v.match(&v.win[j]) && j != i {
			continue
		}
		r := v.rows(j)
		if used+r >= h {
			top, topRow = v.win[j].N, r-(h-used)
			used = h
			break
		}
		used += r
		top, topRow = v.win[j].N, 0
	}
	v.top, v.topRow = top, topRow
}

// scrollToCursor keeps the cursor on screen, moving the view the least,
// and makes sure the window holds the lines the screen shows.
func (v *logView) scrollToCursor() {
	v.placeCursor()
	v.fillAhead()
}

// fillAhead reads on from storage when the window ends before the screen.
func (v *logView) fillAhead() {
	for v.winEnd() < v.end {
		i := v.idx(v.top)
		if i < 0 {
			return
		}
		shown := 0
		for j := i; j < len(v.win) && shown <= v.height; j++ {
			if v.match(&v.win[j]) {
				shown++
			}
		}
		// Enough to fill the screen, or a page more would push the top
		// out of the window (a sparse filter): stop.
		if shown > v.height || len(v.win)+winPage-winMax > i {
			return
		}
		if !v.fetch(1) {
			return
		}
	}
}

func (v *logView) placeCursor() {
	if v.follow {
		v.anchorBottom()
		return
	}
	if v.cursor < v.top || (v.cursor == v.top && v.topRow > 0) || v.idx(v.top) < 0 {
		v.top, v.topRow = v.cursor, 0
		if v.idx(v.top) >= 0 {
			return
		}
	}
	// Rows from top through the cursor's line.
	ti, ci := v.idx(v.top), v.idx(v.cursor)
	if ti < 0 || ci < 0 {
		v.top, v.topRow = v.cursor, 0
		return
	}
	used := -v.topRow
	for j := ti; j <= ci; j++ {
		if j == ci || v.match(&v.win[j]) {
			used += v.rows(j)
		}
		if used > v.height {
			v.anchorBottom()
			return
		}
	}
}

// paints are the log view's styles as plain prefix/suffix strings: a
// frame styles every visible line, and lipgloss.Style.Render costs far
// more than two concatenations.
type logPaints struct {
	level                [6]paint
	num, sel, match, cur paint
	marker, dim          paint
	tags                 [6]string
}

func newLogPaints(th themeT) *logPaints {
	p := &logPaints{num: newPaint(th.LineNumber), sel: newPaint(th.Selected), match: newPaint(th.Match),
		cur: newPaint(th.MatchCurrent), marker: newPaint(th.Marker), dim: newPaint(th.Dim)}
	styles := [6]styleT{th.LevelInfo, th.LevelDebug, th.LevelInfo, th.LevelWarn, th.LevelError, th.LevelSuccess}
	tags := [6]string{" ", "D", " ", "W", "E", "S"}
	for i := range styles {
		p.level[i] = newPaint(styles[i])
		p.tags[i] = p.level[i].s(tags[i])
	}
	return p
}

func levelIndex(l engine.Level) int {
	if l >= engine.LevelDebug && l <= engine.LevelSuccess {
		return int(l)
	}
	return 0
}

// View draws exactly height rows of width cells. It reads nothing from
// storage and touches only the lines on screen.
func (v *logView) View() string {
	th := v.sh.th
	if v.paints == nil {
		v.paints = newLogPaints(th)
	}
	pt := v.paints
	h, w := max(v.height, 1), max(v.width, 1)
	var b strings.Builder
	b.Grow(h * (w + 32))
	rows := 0
	emit := func(row string, width int) {
		if rows > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(row)
		if width < w {
			b.WriteString(strings.Repeat(" ", w-width))
		}
		rows++
	}
	switch {
	case v.run == "" && v.noRuns:
		// An empty console says where to start.
		for _, l := range []string{
			"Nothing has run yet. Where to start:",
			"",
			"  4 Modules → enter on a hook    runs it; its lines show here",
			"  4 Modules → a                  adds a module from its folder",
			"  2 Requests                     a hook's questions, to answer",
			"  ?                              every key",
		} {
			msg := plain(l, w)
			emit(pt.dim.s(msg), textWidth(msg))
		}
	case v.run == "":
		msg := plain("no run selected: pick one on the left (↑/↓, enter)", w)
		emit(pt.dim.s(msg), textWidth(msg))
	case len(v.win) == 0:
		msg := "no lines yet"
		switch {
		case v.err != "":
			msg = v.err
		case v.filtered() && v.empty():
			msg = "nothing at this level (" + v.levelName() + "): l shows the next level, ! inverts"
		case v.filtered():
			msg = fmt.Sprintf("nothing at this level in the last %d lines; looking further back…", v.winEnd()-v.winStart())
		}
		msg = plain(OneLine(msg), w)
		emit(pt.dim.s(msg), textWidth(msg))
	default:
		gut := v.gutter()
		numW := gut - 4
		cols := v.textCols()
		i := v.idx(v.top)
		if i < 0 {
			i = 0
		}
		skip := v.topRow
		var numBuf []byte
		for ; i < len(v.win) && rows < h; i++ {
			l := &v.win[i]
			if !v.match(l) {
				continue
			}
			li := levelIndex(l.Level)
			sel := l.N == v.cursor
			numBuf = strconv.AppendUint(numBuf[:0], l.N+1, 10)
			num := strings.Repeat(" ", max(numW-len(numBuf), 0)) + string(numBuf)
			var g string
			if sel {
				g = pt.sel.s("▸"+num) + " " + pt.tags[li] + " "
			} else {
				g = " " + pt.num.s(num) + " " + pt.tags[li] + " "
			}
			hl := pt.match
			if sel {
				hl = pt.cur
			}
			if !v.wrap {
				text, tw, cut := cutLine(l.Text, cols)
				row := g + highlight(text, v.query, pt.level[li], hl)
				if cut {
					row += pt.marker.s(cutMarker)
					tw += cutMarkerWidth
				}
				emit(row, gut+tw)
				continue
			}
			n := v.rows(i) - skip
			for k, seg := range wrapRows(l.Text, cols, skip, min(n, h-rows)) {
				if k > 0 || skip > 0 {
					g = strings.Repeat(" ", gut-1) + pt.dim.s("↪")
				}
				emit(g+highlight(seg, v.query, pt.level[li], hl), gut+textWidth(seg))
			}
			skip = 0
		}
	}
	for rows < h {
		emit("", 0)
	}
	return b.String()
}

// selected returns the cursor's line.
func (v *logView) selected() (engine.Line, bool) {
	if i := v.idx(v.cursor); i >= 0 {
		return v.win[i], true
	}
	return engine.Line{}, false
}

// levelName is the filter as the title shows it ("!≥warn").
func (v *logView) levelName() string {
	f := v.level.String()
	if v.invert {
		f = "!" + f
	}
	return f
}
