package tui

import (
	"strconv"
	"strings"

	"warden/engine"
)

// The log view shows one run's stream. Storage holds every line; the view
// holds a bounded window of them (at most winMax lines and winMaxBytes of
// text) around what is on screen and pages from storage when the cursor
// leaves it. Drawing a frame touches only the visible lines, and a line's
// width is measured once and cached, so a frame costs the same whether the
// run printed a thousand lines or a million.
const (
	winMax      = 2000
	winMaxBytes = 16 << 20
	winPage     = 500
	// scanLimit bounds how many lines one key press (n, a move under a
	// sparse filter) reads from storage before it gives up.
	scanLimit = 200_000
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

	run         string
	first, end  uint64 // storage holds lines [first, end)
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

// winStart and winEnd bound the window: lines [winStart, winEnd).
func (v *logView) winStart() uint64 {
	if len(v.win) == 0 {
		return v.end
	}
	return v.win[0].N
}

func (v *logView) winEnd() uint64 {
	if len(v.win) == 0 {
		return v.end
	}
	return v.win[len(v.win)-1].N + 1
}

// idx is the window index of line n, or -1.
func (v *logView) idx(n uint64) int {
	if len(v.win) == 0 || n < v.win[0].N || n >= v.winEnd() {
		return -1
	}
	i := int(n - v.win[0].N) // stored lines are contiguous
	if i < len(v.win) && v.win[i].N == n {
		return i
	}
	for i = range v.win { // not contiguous after all: search
		if v.win[i].N == n {
			return i
		}
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
	*v = logView{sh: v.sh, run: run, follow: true, wrap: v.wrap, level: st.level, invert: st.invert, query: st.query, width: v.width, height: v.height, paints: v.paints, states: states}
	v.refreshMeta()
	v.loadTail()
}

func (v *logView) refreshMeta() {
	m, err := v.sh.e.StreamInfo(v.run)
	if err != nil {
		v.err = err.Error()
		return
	}
	v.first, v.end = m.First, m.Lines
}

func (v *logView) setWindow(lines []engine.Line) {
	v.win = lines
	v.widths = make([]int32, len(lines))
	v.winBytes = 0
	for i := range lines {
		v.widths[i] = -1
		v.winBytes += len(lines[i].Text)
	}
}

func (v *logView) read(from uint64, n int) []engine.Line {
	lines, err := v.sh.e.StreamLines(v.run, from, n)
	if err != nil {
		v.err = err.Error()
	}
	return lines
}

func (v *logView) readBefore(before uint64, n int) []engine.Line {
	lines, err := v.sh.e.StreamLinesBefore(v.run, before, n)
	if err != nil {
		v.err = err.Error()
	}
	return lines
}

// loadTail fills the window with the stream's last page.
func (v *logView) loadTail() {
	if v.run == "" {
		return
	}
	v.setWindow(v.readBefore(v.end, winPage))
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
	v.setWindow(v.read(from, winPage))
}

// toEnd puts the cursor on the last matching line (follow mode's place).
func (v *logView) toEnd() {
	if len(v.win) == 0 {
		v.cursor, v.top, v.topRow = v.end, v.end, 0
		return
	}
	if v.winEnd() < v.end {
		v.setWindow(v.readBefore(v.end, winPage))
	}
	last := v.win[len(v.win)-1].N
	if n, ok := v.step(last+1, -1); ok {
		v.cursor = n
	} else {
		v.cursor = last
	}
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
	if lines[0].N > v.winEnd() && len(v.win) > 0 {
		// A gap (missed events): the window no longer meets the tail.
		if v.follow {
			v.loadTail()
		}
		return
	}
	for len(lines) > 0 && len(v.win) > 0 && lines[0].N < v.winEnd() {
		lines = lines[1:] // already held
	}
	if len(lines) > winMax { // only the tail of a flood can matter here
		if !v.follow && len(v.win) > 0 {
			return // the user reads older lines; the window stays with them
		}
		lines = lines[len(lines)-winMax:]
	}
	for i := range lines {
		v.win = append(v.win, lines[i])
		v.widths = append(v.widths, -1)
		v.winBytes += len(lines[i].Text)
	}
	if v.follow {
		v.trim(true)
		v.toEnd()
	} else {
		v.trim(v.cursor >= v.winStart()+uint64(len(v.win)/2))
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
		lines := v.read(v.winEnd(), winPage)
		if len(lines) == 0 {
			return false
		}
		for i := range lines {
			v.win = append(v.win, lines[i])
			v.widths = append(v.widths, -1)
			v.winBytes += len(lines[i].Text)
		}
		v.trim(true)
		return true
	}
	if v.winStart() <= v.first {
		return false
	}
	lines := v.readBefore(v.winStart(), winPage)
	if len(lines) == 0 {
		return false
	}
	ws := make([]int32, len(lines), len(lines)+len(v.win))
	for i := range ws {
		ws[i] = -1
		v.winBytes += len(lines[i].Text)
	}
	v.win = append(lines, v.win...)
	v.widths = append(ws, v.widths...)
	v.trim(false)
	return true
}

// step finds the nearest matching line strictly after (dir>0) or before
// (dir<0) line n, paging from storage as needed; the window then holds it.
func (v *logView) step(n uint64, dir int) (uint64, bool) {
	return v.seek(n, dir, v.match)
}

// seek is step with any predicate. It reads at most scanLimit lines.
func (v *logView) seek(n uint64, dir int, ok func(*engine.Line) bool) (uint64, bool) {
	var cand uint64
	if dir > 0 {
		cand = n + 1
	} else {
		if n == 0 {
			return 0, false
		}
		cand = n - 1
	}
	v.scanStop = false
	for scanned := 0; ; {
		if scanned >= scanLimit {
			// Give up for this key press; the caller may go on from
			// where the scan stopped.
			v.scanStop, v.scanAt = true, cand
			return 0, false
		}
		if cand < v.first {
			if dir < 0 {
				return 0, false
			}
			cand = v.first
		}
		if cand >= v.end {
			if dir > 0 {
				return 0, false
			}
			cand = v.end - 1
		}
		i := v.idx(cand)
		if i < 0 {
			switch {
			case dir > 0 && len(v.win) > 0 && cand == v.winEnd():
				if !v.fetch(1) {
					return 0, false
				}
			case dir < 0 && len(v.win) > 0 && cand+1 == v.winStart():
				if !v.fetch(-1) {
					return 0, false
				}
			case dir > 0:
				v.setWindow(v.read(cand, winPage))
			default:
				v.setWindow(v.readBefore(cand+1, winPage))
			}
			if i = v.idx(cand); i < 0 {
				return 0, false
			}
		}
		if dir > 0 {
			for ; i < len(v.win); i++ {
				scanned++
				if ok(&v.win[i]) {
					return v.win[i].N, true
				}
			}
			cand = v.winEnd()
		} else {
			for ; i >= 0; i-- {
				scanned++
				if ok(&v.win[i]) {
					return v.win[i].N, true
				}
			}
			if v.winStart() == 0 {
				return 0, false
			}
			cand = v.winStart() - 1
		}
	}
}

// ensure makes the window hold line n.
func (v *logView) ensure(n uint64) {
	if v.idx(n) < 0 && n >= v.first && n < v.end {
		v.loadAround(n)
	}
}

// move moves the cursor by count matching lines.
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

// atLast reports whether the cursor is on the stream's last matching line
// (looking only at the window, which then holds the tail).
func (v *logView) atLast() bool {
	if v.winEnd() < v.end {
		return false
	}
	i := v.idx(v.cursor)
	if i < 0 {
		return false
	}
	for j := i + 1; j < len(v.win); j++ {
		if v.match(&v.win[j]) {
			return false
		}
	}
	return true
}

// goTo puts the cursor on line n (or the nearest matching line).
func (v *logView) goTo(n uint64) {
	if v.run == "" || v.end == 0 {
		return
	}
	n = min(max(n, v.first), v.end-1)
	v.follow = false
	v.loadAround(n)
	v.cursor = n
	if i := v.idx(n); i >= 0 && !v.match(&v.win[i]) {
		if m, ok := v.step(n, 1); ok {
			v.cursor = m
		} else if m, ok := v.step(n, -1); ok {
			v.cursor = m
		}
	}
	v.top, v.topRow = v.cursor, 0
	v.scrollToCursor()
}

// home and bottom.
func (v *logView) home() {
	v.follow = false
	v.setWindow(v.read(v.first, winPage))
	if len(v.win) == 0 {
		return
	}
	n := v.win[0].N
	if !v.match(&v.win[0]) {
		if m, ok := v.step(n, 1); ok {
			n = m
		}
	}
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

// refilter keeps the cursor on a matching line after a filter change.
func (v *logView) refilter() {
	if v.follow {
		v.toEnd()
		return
	}
	v.ensure(v.cursor)
	if i := v.idx(v.cursor); i >= 0 && v.match(&v.win[i]) {
		v.scrollToCursor()
		return
	}
	if n, ok := v.step(v.cursor, -1); ok {
		v.cursor = n
	} else if n, ok := v.step(v.cursor, 1); ok {
		v.cursor = n
	}
	v.scrollToCursor()
}

// search moves to the next (dir>0) or previous line holding the query.
func (v *logView) search(dir int) (found bool) {
	if v.query == "" || v.run == "" {
		return false
	}
	v.ensure(v.cursor)
	n, ok := v.seek(v.cursor, dir, func(l *engine.Line) bool { return v.match(l) && contains(l.Text, v.query) })
	if !ok {
		if v.scanStop {
			// Searched scanLimit lines: stand where the scan stopped,
			// so the next n goes on from there.
			v.goTo(v.scanAt)
			v.scanStop = true
			return false
		}
		v.ensure(v.cursor)
		return false
	}
	v.cursor = n
	v.follow = false
	v.ensure(n)
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
		if v.err != "" {
			msg = v.err
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
