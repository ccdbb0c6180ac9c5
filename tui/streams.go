package tui

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"github.com/wardenhq/warden/engine"
)

// The runs list reads runsPage runs at a time by key range (the newest at
// open, older ones as the cursor passes the last held); maxRuns bounds
// what new runs add on top.
const (
	runsPage = 50
	maxRuns  = 500
)

type streamsKeys struct {
	KeyMap
	Runs, Log, Open             key.Binding
	Follow, Search, Next, Prev  key.Binding
	Level, Invert, Wrap, Cancel key.Binding
	Clear                       key.Binding
	// / means one thing per side: it filters the runs list while the
	// list has focus, and searches the log while the log has. The
	// short hints name the side's meaning; help (Search) names both.
	Filter, FilterHint, SearchHint key.Binding
}

func newStreamsKeys() streamsKeys {
	return streamsKeys{
		KeyMap: DefaultKeyMap().withEnds("first line", "last line"),
		Runs:   key.NewBinding(key.WithKeys("left", "h"), key.WithHelp("←/h", "runs")),
		// Esc has one meaning everywhere: clear the search and the
		// filter; with neither set, it goes back (to the runs).
		Clear:  key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "clear search/filter, back")),
		Log:    key.NewBinding(key.WithKeys("right"), key.WithHelp("→", "log")),
		Open:   key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "open/whole line")),
		Follow: key.NewBinding(key.WithKeys("f"), key.WithHelp("f", "follow")),
		Search: key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "runs: filter, log: search")),
		Filter: key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "filter the runs")),
		// The same keys, as the status line's hints say them.
		SearchHint: key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "search")),
		FilterHint: key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "filter runs")),
		Next:       key.NewBinding(key.WithKeys("n"), key.WithHelp("n", "next match")),
		Prev:       key.NewBinding(key.WithKeys("N"), key.WithHelp("N", "prev match")),
		Level:      key.NewBinding(key.WithKeys("l"), key.WithHelp("l", "level filter")),
		Invert:     key.NewBinding(key.WithKeys("!"), key.WithHelp("!", "invert filter")),
		Wrap:       key.NewBinding(key.WithKeys("w"), key.WithHelp("w", "wrap")),
		Cancel:     key.NewBinding(key.WithKeys("x"), key.WithHelp("x", "cancel run")),
	}
}

type streamsPane struct {
	paneBase
	sh       *shared
	k        streamsKeys
	runs     []engine.RunRecord
	pageEnd  string // the oldest run of the pages read (older live runs are held too)
	sel      int
	off      int
	focusLog bool
	log      *logView
	search   promptInput
	// runFilter and runQuery: / on the runs list shows only the runs
	// whose row holds the query (smart case); a run it hides is never
	// acted on (selectedID).
	runFilter promptInput
	runQuery  string
	// inputsSeen holds each run's inputsLine for the filter (inputsText).
	inputsSeen map[string]string
	scanGen    int // the search or filter going on in slices (scanOnMsg)
	w, h       int
	leftW      int
	dests      destTracker // destinations reached, per run (network.go)
	// pendingFor finds the oldest pending request a run asked (the app
	// wires it to the Requests pane): it shows under the run's stream
	// and y/n answer it there.
	pendingFor func(run string) (engine.Request, bool)
	// reason is the deny prompt for request denyID, asked from here.
	reason promptInput
	denyID uint64

	// The log's reads run as operations (logops.go): logGen tells the
	// current outcome from stale ones, logBusy says one is out, and
	// logQueue holds those asked for meanwhile. want is the run the log
	// shows, or is opening.
	logGen   uint64
	logBusy  bool
	logQueue []logOp
	want     string
	// fillDue: a resize left the screen short of lines held; the next
	// update reads them.
	fillDue bool
	// runsGen tells the current re-read of the runs from stale ones;
	// olderAsked is the page of older runs being read ("" for none).
	runsGen    uint64
	olderAsked string
}

func newStreamsPane(sh *shared) *streamsPane {
	return &streamsPane{sh: sh, k: newStreamsKeys(), log: newLogView(sh), search: newPromptInput("/", "search this stream", 256), w: 80, h: 20,
		reason:     newPromptInput("deny: reason (optional, enter to deny) › ", "", 500),
		runFilter:  newPromptInput("filter runs › ", "module/hook, run id, status, actor or inputs", 128),
		pendingFor: func(string) (engine.Request, bool) { return engine.Request{}, false }}
}

// reload reads the runs and opens the selected one's log in place: New
// does it, before the program runs. Update re-reads with refresh.
func (p *streamsPane) reload() {
	runs, live, err := readRuns(p.eng(), p.runsWanted())
	p.setRuns(runs, live, err)
	if id := p.selectedID(); id != "" {
		p.want = id
		p.log.open(id)
	}
}

// runsWanted is how many of the newest runs a re-read reads.
func (p *streamsPane) runsWanted() int { return max(runsPage, min(len(p.runs), maxRuns)) }

// runsLoadedMsg is a re-read of the runs (refresh).
type runsLoadedMsg struct {
	gen        uint64
	runs, live []engine.RunRecord
	err        error
}

// readRuns reads the newest n runs and the runs still running.
func readRuns(e engine.Runs, n int) (runs, live []engine.RunRecord, err error) {
	runs, err = e.RunsBefore("", n)
	if err != nil {
		return nil, nil, err
	}
	// Runs still running are always held, however far down the history
	// they started: the header counts them and quitting warns of them.
	live, err = e.LiveRuns()
	return runs, live, err
}

// refresh re-reads the runs off the UI goroutine (after missed events, a
// take-over); the log of the selected run follows.
func (p *streamsPane) refresh() tea.Cmd {
	p.runsGen++
	gen, e, n := p.runsGen, p.eng(), p.runsWanted()
	return func() tea.Msg {
		runs, live, err := readRuns(e, n)
		return runsLoadedMsg{gen: gen, runs: runs, live: live, err: err}
	}
}

func (p *streamsPane) runsLoaded(m runsLoadedMsg) tea.Cmd {
	if m.gen != p.runsGen {
		return nil // a later re-read is out
	}
	if !p.setRuns(m.runs, m.live, m.err) {
		return nil
	}
	if run := p.want; run != "" && run == p.cursorID() {
		return p.doLog(forRun(run, func(v *logView) {
			v.refreshMeta()
			if v.follow {
				v.loadTail()
			}
		}))
	}
	return p.openSelected()
}

// setRuns takes a read of the runs, keeping the selection on its run.
func (p *streamsPane) setRuns(runs, live []engine.RunRecord, err error) bool {
	if err != nil {
		p.sh.errStatus(err)
		return false
	}
	p.pageEnd, p.olderAsked = "", ""
	if len(runs) > 0 {
		p.pageEnd = runs[len(runs)-1].ID
	}
	for _, r := range live {
		if len(runs) == 0 || r.ID < runs[len(runs)-1].ID {
			runs = append(runs, r) // older than the page: live runs come newest first
		}
	}
	cur := p.cursorID()
	p.runs = runs
	p.sel = 0
	for i, r := range runs {
		if r.ID == cur {
			p.sel = i
		}
	}
	return true
}

// selectedID is the run the cursor is on, when the filter shows it: a
// run the filter hides is never opened, cancelled, copied or paged,
// even when the cursor is left on it because nothing matches.
func (p *streamsPane) selectedID() string {
	if p.sel >= 0 && p.sel < len(p.runs) && !p.hidden(p.sel) {
		return p.runs[p.sel].ID
	}
	return ""
}

// cursorID is the run the cursor is on, shown or not (to keep the cursor
// on its run when the list is read again).
func (p *streamsPane) cursorID() string {
	if p.sel >= 0 && p.sel < len(p.runs) {
		return p.runs[p.sel].ID
	}
	return ""
}

// hidden reports whether the runs filter hides run i. The text matched
// is what the run's row and the log's title show of it.
func (p *streamsPane) hidden(i int) bool {
	if p.runQuery == "" {
		return false
	}
	r := p.runs[i]
	return !contains(strings.Join([]string{r.Module + "/" + r.Hook, r.ID, r.Status, r.Actor, p.inputsText(r)}, " "), p.runQuery)
}

// inputsText is run r's inputs as inputsLine says them, decoded once per
// run (a run's inputs never change) and not on every frame.
func (p *streamsPane) inputsText(r engine.RunRecord) string {
	if len(r.Inputs) == 0 {
		return ""
	}
	if s, ok := p.inputsSeen[r.ID]; ok {
		return s
	}
	if p.inputsSeen == nil || len(p.inputsSeen) >= 4*maxRuns {
		p.inputsSeen = map[string]string{} // bounded: forget, decode again
	}
	s := inputsLine(r.Inputs)
	p.inputsSeen[r.ID] = s
	return s
}

// visible lists the indexes of the runs the filter leaves, in order.
func (p *streamsPane) visible() []int { return shownRows(len(p.runs), p.hidden) }

// setRunQuery filters the runs list ("" shows it all): the cursor moves
// to the nearest run the filter leaves, and the log follows it.
func (p *streamsPane) setRunQuery(q string) tea.Cmd {
	p.runQuery = q
	if len(p.runs) > 0 {
		p.sel = landOn(p.sel, 1, len(p.runs), p.hidden)
	}
	p.keepSel()
	return p.openSelected()
}

// onRuns reports whether the runs list has focus (and is drawn).
func (p *streamsPane) onRuns() bool { return !p.focusLog && p.leftW > 0 }

func (p *streamsPane) openSelected() tea.Cmd {
	if id := p.selectedID(); id != "" && id != p.want {
		return p.open(id)
	}
	return nil
}

// open shows run's log, in place of whatever the log was reading.
func (p *streamsPane) open(run string) tea.Cmd {
	p.want = run
	return tea.Batch(p.supersedeLog(func(v *logView) func() tea.Cmd {
		v.open(run)
		return nil
	}), p.lookUpDests(run))
}

// runFoundMsg is a run's record, read to show it (show).
type runFoundMsg struct {
	rec engine.RunRecord
	err error
}

// show selects a run and focuses its log (e.g. after starting it). A run
// the list does not hold is read first.
func (p *streamsPane) show(id string) tea.Cmd {
	found := false
	for i, r := range p.runs {
		if r.ID == id {
			p.sel, found = i, true
		}
	}
	if found && p.hidden(p.sel) {
		// The run asked for is shown, whatever the filter said.
		p.runQuery = ""
		p.sh.setStatus("runs filter cleared to show run "+id, false)
	}
	if !found {
		e := p.eng()
		return func() tea.Msg {
			rec, err := e.Run(id)
			if err == nil && rec.ID != id {
				err = fmt.Errorf("no run %s", id)
			}
			return runFoundMsg{rec: rec, err: err}
		}
	}
	p.focusLog = true
	p.keepSel()
	return p.open(id)
}

// runFound shows a run read for show.
func (p *streamsPane) runFound(m runFoundMsg) tea.Cmd {
	if m.err != nil {
		p.sh.errStatus(m.err)
		return nil
	}
	cmd := p.runEvent(m.rec)
	return tea.Batch(cmd, p.show(m.rec.ID))
}

// runningRuns are the runs going now, newest first.
func (p *streamsPane) runningRuns() (out []engine.RunRecord) {
	for _, r := range p.runs {
		if r.Status == engine.RunRunning {
			out = append(out, r)
		}
	}
	return out
}

func (p *streamsPane) running() (n int) {
	for _, r := range p.runs {
		if r.Status == engine.RunRunning {
			n++
		}
	}
	return n
}

func (p *streamsPane) unjailedRunning() (n int) {
	for _, r := range p.runs {
		if r.Status == engine.RunRunning && r.JailMode == engine.JailOff {
			n++
		}
	}
	return n
}

// landlockRunning counts running runs under the landlock backend, which
// is weaker than bwrap (docs/jail.md).
func (p *streamsPane) landlockRunning() (n int) {
	for _, r := range p.runs {
		if r.Status == engine.RunRunning && r.JailMode == engine.JailLandlock {
			n++
		}
	}
	return n
}

// runEvent records a run that started or ended.
func (p *streamsPane) runEvent(rec engine.RunRecord) tea.Cmd {
	for i := range p.runs {
		if p.runs[i].ID == rec.ID {
			p.runs[i] = rec
			if rec.ID == p.want && rec.Status != engine.RunRunning {
				return tea.Batch(p.doLog(forRun(rec.ID, (*logView).refreshMeta)), p.lookUpDests(rec.ID))
			}
			return nil
		}
	}
	// New runs go on top; the selection stays on its run.
	p.runs = append([]engine.RunRecord{rec}, p.runs...)
	if len(p.runs) > maxRuns {
		p.runs = p.runs[:maxRuns]
	}
	if p.want != "" || len(p.runs) > 1 {
		p.sel++
	}
	if p.sel >= len(p.runs) {
		p.sel = len(p.runs) - 1
	}
	var cmd tea.Cmd
	if p.want == "" {
		p.sel = 0
		cmd = p.openSelected()
	}
	p.keepSel()
	return cmd
}

// lines takes a batch of durable lines.
func (p *streamsPane) lines(ev *engine.LinesEvent) tea.Cmd {
	if ev == nil || ev.Run != p.want {
		return nil
	}
	return p.doLog(forRun(ev.Run, func(v *logView) { v.appendLive(ev.Lines) }))
}

// receipt takes a durable receipt: a network.connect tells where a run
// reached (network.go).
func (p *streamsPane) receipt(rc engine.Receipt) {
	if p.dests == nil {
		p.dests = destTracker{}
	}
	p.dests.receipt(rc)
}

func (p *streamsPane) capturing() bool {
	return p.search.Active() || p.reason.Active() || p.runFilter.Active()
}

func (p *streamsPane) prompt() string {
	switch {
	case p.reason.Active():
		return p.reason.View()
	case p.runFilter.Active():
		return p.runFilter.View()
	}
	return p.search.View()
}

// pending is the question the run shown is waiting on, if any.
func (p *streamsPane) pending() (engine.Request, bool) {
	if p.want == "" {
		return engine.Request{}, false
	}
	return p.pendingFor(p.want)
}

func (p *streamsPane) keys() keyMap {
	k := p.k
	if p.search.Active() {
		return p.search.KeyMap()
	}
	if p.reason.Active() {
		return p.reason.KeyMap()
	}
	if p.runFilter.Active() {
		return p.runFilter.KeyMap()
	}
	search := k.SearchHint
	if p.onRuns() {
		search = k.FilterHint
	}
	if _, ok := p.pending(); ok && !p.sh.opts.Viewer {
		ans := []key.Binding{
			key.NewBinding(key.WithKeys("y"), key.WithHelp("y", "approve request")),
			key.NewBinding(key.WithKeys("n"), key.WithHelp("n", "deny request")),
		}
		return keyMap{short: append(ans, k.Open, k.Follow, search, k.Level, k.Cancel), full: [][]key.Binding{ans}}
	}
	nav := []key.Binding{k.Up, k.Down, k.PageUp, k.PageDown, k.Top, k.Bottom, k.Runs, k.Log, k.Open, k.Clear}
	logk := []key.Binding{k.Follow, k.Search, k.Next, k.Prev, k.Level, k.Invert, k.Wrap, k.Cancel}
	short := []key.Binding{k.Open, k.Follow, search, k.Next, k.Level, k.Invert, k.Wrap}
	if !p.focusLog {
		short = []key.Binding{k.Up, k.Down, k.Open, k.Follow, search, k.Cancel, k.Level}
	}
	return keyMap{short: short, full: [][]key.Binding{nav, logk}}
}

func (p *streamsPane) resize(w, h int) {
	p.w, p.h = w, h
	p.leftW = min(max(w*3/10, 24), 40)
	if w < 60 {
		p.leftW = 0 // too narrow for both: the log alone
	}
	p.log.width = w - p.leftW - min(p.leftW, 1)
	p.log.height = max(h-1, 1)
	p.search.SetWidth(max(w-4, 10))
	p.runFilter.SetWidth(max(w-16, 10))
	p.reason.SetWidth(max(w-44, 10))
	// Placing the cursor reads nothing; filling a taller screen may, and
	// resize cannot answer with a command: the next update does it.
	p.log.placeCursor()
	try := &localOnly{}
	p.log.clone(try, false).fillAhead()
	p.fillDue = try.read
}

func (p *streamsPane) update(msg tea.Msg) tea.Cmd {
	var fill tea.Cmd
	if p.fillDue {
		p.fillDue = false
		fill = p.doLog(func(v *logView) func() tea.Cmd { v.fillAhead(); return nil })
	}
	return tea.Batch(fill, p.handle(msg))
}

func (p *streamsPane) handle(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case logDoneMsg:
		return p.logDone(msg)
	case runsLoadedMsg:
		return p.runsLoaded(msg)
	case olderRunsMsg:
		return p.olderRunsRead(msg)
	case runFoundMsg:
		return p.runFound(msg)
	case destsMsg:
		p.destsRead(msg)
	case scanOnMsg:
		return p.scannedOn(msg)
	case cancelledMsg:
		if msg.err != nil {
			p.sh.errStatus(msg.err)
			return nil
		}
		p.sh.setStatus("cancelling run "+msg.run, false)
	case tea.KeyMsg:
		if p.reason.Active() {
			cmd, outcome, reason := p.reason.Update(msg)
			if outcome == promptSubmitted {
				return p.decide(p.denyID, engine.Deny, strings.TrimSpace(reason))
			}
			return cmd
		}
		if p.search.Active() {
			return p.typingKey(msg)
		}
		if p.runFilter.Active() {
			cmd, outcome, q := p.runFilter.Update(msg)
			if outcome == promptSubmitted {
				return tea.Batch(cmd, p.setRunQuery(strings.TrimSpace(q)))
			}
			return cmd
		}
		if r, ok := p.pending(); ok {
			// The run shown waits on a question: y and n answer it
			// here (n/N search again once it is answered).
			switch msg.String() {
			case "y":
				return p.decide(r.ID, engine.ApproveOnce, "")
			case "n":
				p.denyID = r.ID
				return p.reason.Open("")
			}
		}
		return p.key(msg)
	case tea.MouseMsg:
		return p.mouse(msg)
	}
	return nil
}

func (p *streamsPane) typingKey(msg tea.KeyMsg) tea.Cmd {
	cmd, outcome, query := p.search.Update(msg)
	if outcome != promptSubmitted {
		return cmd
	}
	return tea.Batch(cmd, p.doLog(func(v *logView) func() tea.Cmd {
		v.query = query
		v.scanStop = false
		// Forward from the cursor, then (nothing after it) backward.
		if v.query == "" || v.search(1) {
			return nil
		}
		if v.scanStop {
			return func() tea.Cmd { return p.searchMiss(1) }
		}
		if !v.search(-1) {
			return func() tea.Cmd { return p.searchMiss(-1) }
		}
		return nil
	}))
}

// logKey is a key's change of the log view, with nothing to say after.
func logKey(op func(v *logView)) logOp {
	return func(v *logView) func() tea.Cmd {
		op(v)
		return nil
	}
}

func (p *streamsPane) key(msg tea.KeyMsg) tea.Cmd {
	k, v := p.k, p.log
	if msg.Type == tea.KeyEsc {
		p.scanGen++ // stops a search or filter going on in slices
	}
	page := max(v.height-1, 1)
	// Keys that act on the log whichever side has focus.
	switch {
	case key.Matches(msg, k.Follow):
		return p.doLog(logKey(func(v *logView) { v.setFollow(!v.follow) }))
	case key.Matches(msg, k.Filter) && p.onRuns():
		return p.runFilter.Open(p.runQuery)
	case key.Matches(msg, k.Search):
		return p.search.Open(v.query)
	case key.Matches(msg, k.Next), key.Matches(msg, k.Prev):
		dir := 1
		if key.Matches(msg, k.Prev) {
			dir = -1
		}
		return p.doLog(func(v *logView) func() tea.Cmd {
			v.scanStop = false
			switch {
			case v.query == "":
				return func() tea.Cmd { p.sh.setStatus("no search yet: press / first", true); return nil }
			case !v.search(dir):
				return func() tea.Cmd { return p.searchMiss(dir) }
			}
			return nil
		})
	case key.Matches(msg, k.Level):
		return p.doLog(func(v *logView) func() tea.Cmd {
			v.level = (v.level + 1) % 4
			v.refilter()
			return p.filterOn
		})
	case key.Matches(msg, k.Invert):
		return p.doLog(func(v *logView) func() tea.Cmd {
			v.invert = !v.invert
			all := v.level == levelAll
			v.refilter()
			return func() tea.Cmd {
				if all {
					p.sh.setStatus("invert applies to a level filter: press l to choose one", false)
				}
				return p.filterOn()
			}
		})
	case key.Matches(msg, k.Wrap):
		return p.doLog(logKey(func(v *logView) {
			v.wrap = !v.wrap
			v.scrollToCursor()
		}))
	case key.Matches(msg, k.Cancel):
		return p.cancelRun()
	case key.Matches(msg, k.Clear) && !p.focusLog && p.runQuery != "":
		// On the runs, esc clears their filter first.
		p.sh.setStatus("runs filter cleared", false)
		return p.setRunQuery("")
	case key.Matches(msg, k.Clear):
		if v.query != "" || v.level != levelAll || v.invert {
			return p.doLog(func(v *logView) func() tea.Cmd {
				v.query, v.level, v.invert = "", levelAll, false
				v.refilter()
				return func() tea.Cmd { p.sh.setStatus("search and filter cleared", false); return nil }
			})
		}
		if p.focusLog && p.leftW > 0 {
			p.focusLog = false
		}
		return nil
	}
	if !p.focusLog {
		switch {
		case key.Matches(msg, k.Up):
			return p.stepRuns(-1)
		case key.Matches(msg, k.Down):
			return p.stepRuns(1)
		case key.Matches(msg, k.PageUp):
			return p.stepRuns(-page)
		case key.Matches(msg, k.PageDown):
			return p.stepRuns(page)
		case key.Matches(msg, k.Top):
			return p.endRuns(0, 1)
		case key.Matches(msg, k.Bottom):
			return p.endRuns(len(p.runs)-1, -1)
		case key.Matches(msg, k.Open) && p.selectedID() == "" && p.runQuery != "":
			p.sh.setStatus(fmt.Sprintf("no run matches %q: esc clears the filter", p.runQuery), false)
		case key.Matches(msg, k.Open), key.Matches(msg, k.Log):
			if p.want != "" {
				p.focusLog = true
			}
		}
		return nil
	}
	switch {
	case key.Matches(msg, k.Up):
		return p.doLog(logKey(func(v *logView) { v.move(-1) }))
	case key.Matches(msg, k.Down):
		return p.doLog(logKey(func(v *logView) { v.move(1) }))
	case key.Matches(msg, k.PageUp):
		return p.doLog(logKey(func(v *logView) { v.move(-page) }))
	case key.Matches(msg, k.PageDown):
		return p.doLog(logKey(func(v *logView) { v.move(page) }))
	case key.Matches(msg, k.Top):
		return p.doLog(logKey((*logView).home))
	case key.Matches(msg, k.Bottom):
		return p.doLog(logKey((*logView).bottom))
	case key.Matches(msg, k.Runs):
		if p.leftW > 0 {
			p.focusLog = false
		}
	case key.Matches(msg, k.Open):
		if l, ok := p.log.selected(); ok {
			if id := lineRequest(l.Text); id != 0 {
				return drill(drillMsg{from: fmt.Sprintf("line %d", l.N+1), request: id})
			}
		}
		return p.openLine()
	}
	return nil
}

// searchMiss reports a search that found nothing. One that stopped at
// scanLimit goes on by itself, a slice at a time (scanOnMsg), so keys are
// answered between slices; the status line shows how far it got.
func (p *streamsPane) searchMiss(dir int) tea.Cmd {
	v := p.log
	if v.scanStop {
		p.scanGen++
		p.sh.setStatus(fmt.Sprintf("searching for %q… at line %d of %d (esc stops)", v.query, v.scanAt+1, v.end), false)
		return scanOn(scanOnMsg{gen: p.scanGen, run: v.run, query: v.query, dir: dir})
	}
	p.sh.setStatus(fmt.Sprintf("no match for %q", v.query), true)
	return nil
}

// scanOnMsg goes on with a search or a filter's first screen that
// stopped at scanLimit lines.
type scanOnMsg struct {
	gen        int
	run, query string
	dir        int
	filter     bool
}

func scanOn(m scanOnMsg) tea.Cmd { return func() tea.Msg { return m } }

// filterOn goes on looking for a filter's first screen when the first
// scanLimit lines did not fill it.
func (p *streamsPane) filterOn() tea.Cmd {
	v := p.log
	if !v.filtered() || len(v.win) >= v.height || v.winStart() <= v.first {
		return nil
	}
	p.scanGen++
	p.sh.setStatus(fmt.Sprintf("filtering %s… looked at %d of %d lines (esc stops)", v.levelName(), v.winEnd()-v.winStart(), v.end-v.first), false)
	return scanOn(scanOnMsg{gen: p.scanGen, run: v.run, filter: true})
}

// scannedOn runs one more slice of a search or a filter.
func (p *streamsPane) scannedOn(m scanOnMsg) tea.Cmd {
	if m.gen != p.scanGen || m.run != p.want {
		return nil // stopped, or another run is shown
	}
	// Esc while the slice was read stops it all the same.
	stopped := func() bool { return m.gen != p.scanGen }
	if m.filter {
		return p.doLog(func(v *logView) func() tea.Cmd {
			if v.run != m.run {
				return nil
			}
			if v.fetch(-1) && len(v.win) > 0 && v.follow {
				v.toEnd()
			}
			return func() tea.Cmd {
				if stopped() {
					return nil
				}
				if cmd := p.filterOn(); cmd != nil {
					return cmd
				}
				p.sh.setStatus("", false)
				return nil
			}
		})
	}
	return p.doLog(func(v *logView) func() tea.Cmd {
		if v.run != m.run || v.query != m.query {
			return nil
		}
		found := v.search(m.dir)
		return func() tea.Cmd {
			switch {
			case stopped():
				return nil
			case found:
				p.sh.setStatus("", false)
				return nil
			}
			return p.searchMiss(m.dir)
		}
	})
}

func (p *streamsPane) openLine() tea.Cmd {
	l, ok := p.log.selected()
	if !ok {
		return nil
	}
	return openOverlay(textOverlay(p.sh, fmt.Sprintf("line %d · %s · %s", l.N+1, l.Level, l.At.Local().Format("15:04:05.000")), l.Text))
}

// decide records a decision on the run's request (the Requests pane
// shows its outcome: decidedMsg goes to every pane).
func (p *streamsPane) decide(id uint64, verdict, reason string) tea.Cmd {
	e, actor := p.eng(), p.sh.opts.Actor
	return func() tea.Msg {
		r, err := decideRequest(e, actor, id, verdict, reason)
		return decidedMsg{id: id, verdict: verdict, r: r, err: err}
	}
}

// pendingBanner is the question under the stream of the run that asked
// it, with how to answer (no hints for a viewer).
func (p *streamsPane) pendingBanner(r engine.Request, w int) string {
	th := p.sh.th
	q := fmt.Sprintf("⚠ request %d asks: %s", r.ID, OneLine(operationLine(r)))
	hint := " · y approve · n deny"
	if p.sh.opts.Viewer {
		hint = " · an operator decides"
	}
	qw := max(w-textWidth(hint), w/2)
	return fit(th.Pending.Render(plain(q, qw))+th.Dim.Render(plain(hint, max(w-min(textWidth(q), qw), 1))), w)
}

// cancelledMsg is the engine's answer to a cancel asked for here.
type cancelledMsg struct {
	run string
	err error
}

// cancelRun asks the engine to cancel the run shown, off the UI goroutine
// (over a control socket it is a round trip).
func (p *streamsPane) cancelRun() tea.Cmd {
	id := p.want
	if !p.focusLog {
		id = p.selectedID()
	}
	if id == "" {
		if p.runQuery != "" {
			p.sh.setStatus(fmt.Sprintf("no run matches %q: nothing to cancel (esc clears the filter)", p.runQuery), false)
		}
		return nil
	}
	// The list holds every run still running: one it does not hold is not.
	rec, _ := p.record(id)
	if rec.Status != engine.RunRunning {
		status := rec.Status
		if status == "" {
			status = "ended"
		}
		p.sh.setStatus(fmt.Sprintf("run %s is not running (%s): nothing to cancel", id, status), false)
		return nil
	}
	e, actor := p.eng(), p.sh.opts.Actor
	q := fmt.Sprintf("cancel run %s (%s/%s, running for %s)?", id, safe(rec.Module), safe(rec.Hook), runDuration(rec, p.sh.now()))
	return ask(q, "the hook is stopped; its receipt says cancelled by you", false, func() tea.Msg { return cancelledMsg{run: id, err: e.CancelRun(actor, id)} })
}

// stepRuns moves the cursor d rows among the runs the filter shows.
// Past the last one held, the cursor goes to the last shown now, and on
// by what is left once the next page of older runs is read (a page
// with no match reads the next, till the history ends).
func (p *streamsPane) stepRuns(d int) tea.Cmd {
	if len(p.runs) == 0 || d == 0 {
		return nil
	}
	vis := p.visible()
	// at is the cursor's place among the shown rows; a cursor on a hidden
	// row sits between its shown neighbours.
	at := 0
	for _, i := range vis {
		if i < p.sel {
			at++
		}
	}
	if d > 0 && (p.sel >= len(p.runs) || p.hidden(p.sel)) {
		at--
	}
	t := at + d
	var older tea.Cmd
	if t >= len(vis) {
		if len(vis) > 0 {
			p.sel = vis[len(vis)-1] // the page goes on from here
		}
		older = p.olderRuns(p.cursorID(), t-max(len(vis)-1, at))
		t = len(vis) - 1
	}
	if len(vis) > 0 {
		p.sel = vis[max(t, 0)]
	}
	p.keepSel()
	return tea.Batch(p.openSelected(), older)
}

// endRuns puts the cursor on the first (dir 1) or last (dir -1) run the
// filter shows, from row i.
func (p *streamsPane) endRuns(i, dir int) tea.Cmd {
	if len(p.runs) == 0 {
		return nil
	}
	p.sel = landOn(i, dir, len(p.runs), p.hidden)
	p.keepSel()
	return p.openSelected()
}

// olderRunsMsg is the page of runs after the last page read.
type olderRunsMsg struct {
	after string // the page's end when asked
	rs    []engine.RunRecord
	err   error
	from  string // the run selected when asked ...
	left  int    // ... and how many rows further the selection goes
}

// olderRuns reads the page of runs after the last page read.
func (p *streamsPane) olderRuns(from string, left int) tea.Cmd {
	if p.pageEnd == "" || p.olderAsked == p.pageEnd {
		return nil
	}
	p.olderAsked = p.pageEnd
	e, after := p.eng(), p.pageEnd
	return func() tea.Msg {
		rs, err := e.RunsBefore(after, runsPage)
		return olderRunsMsg{after: after, rs: rs, err: err, from: from, left: left}
	}
}

// olderRunsRead merges a page of older runs (by id, which sorts by time)
// with the older live runs already held, the selection on its run.
func (p *streamsPane) olderRunsRead(m olderRunsMsg) tea.Cmd {
	if m.after != p.pageEnd {
		return nil // the list was read again meanwhile
	}
	p.olderAsked = ""
	if m.err != nil {
		p.sh.errStatus(m.err)
		return nil
	}
	if len(m.rs) == 0 {
		if m.left > 0 && p.runQuery != "" {
			p.sh.setStatus(fmt.Sprintf("no older run matches %q", p.runQuery), false)
		}
		return nil
	}
	p.pageEnd = m.rs[len(m.rs)-1].ID
	held := make(map[string]bool, len(p.runs))
	for _, r := range p.runs {
		held[r.ID] = true
	}
	for _, r := range m.rs {
		if !held[r.ID] {
			p.runs = append(p.runs, r)
		}
	}
	cur := p.cursorID()
	sort.SliceStable(p.runs, func(i, j int) bool { return p.runs[i].ID > p.runs[j].ID })
	for i, r := range p.runs {
		if r.ID == cur {
			p.sel = i
		}
	}
	if m.left > 0 && cur == m.from {
		return p.stepRuns(m.left)
	}
	p.keepSel()
	return nil
}

// record is a held run's record.
func (p *streamsPane) record(id string) (engine.RunRecord, bool) {
	for _, r := range p.runs {
		if r.ID == id {
			return r, true
		}
	}
	return engine.RunRecord{}, false
}

// keepSel keeps the cursor on screen; the offset counts the rows the
// filter shows.
func (p *streamsPane) keepSel() {
	vis := p.visible()
	p.off = scrollOff(p.off, shownAt(vis, p.sel), p.runRows(), len(vis))
}

// runRows is how many run rows the list draws (under its title).
func (p *streamsPane) runRows() int {
	return max(p.h-1, 1)
}

// shownAt is row sel's place among the shown rows vis (the nearest shown
// row before it when the filter hides it).
func shownAt(vis []int, sel int) int {
	at := sort.SearchInts(vis, sel)
	if at < len(vis) && vis[at] == sel {
		return at
	}
	return max(at-1, 0)
}

func (p *streamsPane) mouse(msg tea.MouseMsg) tea.Cmd {
	onLeft := msg.X < p.leftW
	switch msg.Button {
	case tea.MouseButtonWheelUp, tea.MouseButtonWheelDown:
		d := 3
		if msg.Button == tea.MouseButtonWheelUp {
			d = -3
		}
		if onLeft {
			return p.stepRuns(d / 3)
		}
		return p.doLog(logKey(func(v *logView) { v.move(d) }))
	case tea.MouseButtonLeft:
		if msg.Action != tea.MouseActionPress || msg.Y < 1 {
			return nil
		}
		if onLeft {
			p.focusLog = false
			// Rows on screen are the ones the filter leaves.
			if vis := p.visible(); p.off+msg.Y-1 < len(vis) {
				p.sel = vis[p.off+msg.Y-1]
				p.keepSel()
				return p.openSelected()
			}
		} else {
			p.focusLog = true
		}
	}
	return nil
}

// view draws the runs list and the selected run's log side by side.
func (p *streamsPane) view(w, h int) string {
	if w != p.w || h != p.h {
		p.resize(w, h)
	}
	p.log.noRuns = len(p.runs) == 0
	logView := p.log.View()
	if r, ok := p.pending(); ok {
		// The question replaces the stream's last row: it cannot be
		// missed where the operator is looking.
		rows := strings.Split(logView, "\n")
		rows[len(rows)-1] = p.pendingBanner(r, p.log.width)
		logView = strings.Join(rows, "\n")
	}
	right := p.logTitle(p.log.width) + "\n" + logView
	if p.leftW == 0 {
		return right
	}
	th := p.sh.th
	sepStyle := th.Border
	if p.focusLog {
		sepStyle = th.BorderFocus
	}
	sep := strings.TrimSuffix(strings.Repeat(sepStyle.Render("│")+"\n", h), "\n")
	return lipgloss.JoinHorizontal(lipgloss.Top, p.runsView(p.leftW, h), sep, right)
}

func (p *streamsPane) runsView(w, h int) string {
	th := p.sh.th
	title := th.Title
	if p.focusLog {
		title = th.Dim
	}
	vis := p.visible()
	out := []string{fit(title.Render(p.runsTitle(len(vis), w)), w)}
	if len(p.runs) == 0 {
		out = append(out, fit(th.Dim.Render(plain("no runs yet: 4 Modules → enter on a hook", w)), w))
	} else if len(vis) == 0 {
		out = append(out, fit(th.Dim.Render("no match for "+plain(p.runQuery, max(w-13, 1))), w))
	}
	now := p.sh.now()
	for k := p.off; k < len(vis) && len(out) < h; k++ {
		i := vis[k]
		r := p.runs[i]
		glyph, st := runGlyph(th, r.Status)
		dur := runDuration(r, now)
		if w >= 28 {
			// When it started: the day too when not today.
			dur = stamp(r.Started, now) + " " + dur
		}
		name := r.Module + "/" + r.Hook
		jail := ""
		if r.JailMode == engine.JailOff {
			jail = " !jail" // never cut: it is the row's warning
		}
		nameW := max(w-4-len(dur)-len(jail), 1)
		mark := " "
		if i == p.sel {
			mark = "▸"
		}
		cell := fit(plain(name, nameW), nameW) + jail
		row := mark + st.Render(glyph) + " " + cell + " " + th.Dim.Render(dur)
		if i == p.sel && !p.focusLog {
			row = th.Selected.Render(mark + glyph + " " + cell + " " + dur)
		} else if i == p.sel {
			row = th.Selected.Render(mark) + row[len(mark):]
		}
		out = append(out, fit(row, w))
	}
	for len(out) < h {
		out = append(out, strings.Repeat(" ", w))
	}
	return strings.Join(out, "\n")
}

// runsTitle is the runs list's title: with a filter, the filter, how to
// clear it, and how many runs of those held it shows, shortened to what
// w holds (the count last to go).
func (p *streamsPane) runsTitle(shown, w int) string {
	if p.runQuery == "" {
		return fmt.Sprintf("Runs (%d)", len(p.runs))
	}
	count := fmt.Sprintf(" · %d of %d", shown, len(p.runs))
	for _, f := range []string{"Runs · filter %s (esc clears)", "filter %s (esc clears)", "/%s (esc clears)", "/%s"} {
		head := strings.Replace(f, "%s", "", 1)
		qw := w - textWidth(head) - textWidth(count)
		if qw >= min(textWidth(p.runQuery), 8) {
			return strings.Replace(f, "%s", plain(p.runQuery, qw), 1) + count
		}
	}
	return "/" + plain(p.runQuery, max(w-1-textWidth(count), 1)) + count
}

func (p *streamsPane) logTitle(w int) string {
	th := p.sh.th
	v := p.log
	if v.run == "" {
		return fit(th.Dim.Render("Stream"), w)
	}
	// Drawing reads nothing: the record is the list's (it holds every
	// run shown: show adds one it lacked).
	r, _ := p.record(v.run)
	_, st := runGlyph(th, r.Status)
	parts := []string{th.Title.Render(safe(r.Module + "/" + r.Hook)), st.Render(r.Status)}
	switch {
	case v.follow && r.Status == engine.RunRunning:
		parts = append(parts, th.StatusOK.Render(fmt.Sprintf("FOLLOW %d lines", v.end-v.first)))
	case v.follow:
		// A finished run has nothing more to follow: say it is whole.
		parts = append(parts, th.Dim.Render(fmt.Sprintf("END %d lines", v.end-v.first)))
	default:
		parts = append(parts, th.Dim.Render(fmt.Sprintf("⏸ %d/%d", v.cursor+1, v.end)))
	}
	// A finished run's outputs, next to its end: they are its answer.
	if out := inputsLine(r.Outputs); out != "" {
		parts = append(parts, th.Title.Render("outputs "+plain(out, 60)))
	}
	if v.level != levelAll {
		f := v.level.String()
		if v.invert {
			f = "!" + f
		}
		parts = append(parts, th.Pending.Render(f))
	}
	if v.wrap {
		parts = append(parts, th.Dim.Render("wrap"))
	}
	if v.query != "" {
		parts = append(parts, th.Match.Render("/"+plain(v.query, 20)))
	}
	if p.dests == nil {
		p.dests = destTracker{}
	}
	if d := p.dests.title(r.ID); d != "" {
		parts = append(parts, th.Title.Render(d))
	}
	parts = append(parts, th.Dim.Render("run "+v.run))
	if r.ID != "" {
		parts = append(parts, th.Dim.Render("started "+stamp(r.Started, p.sh.now())))
	}
	if in := inputsLine(r.Inputs); in != "" {
		parts = append(parts, th.Dim.Render(plain(in, 60)))
	}
	return fit(strings.Join(parts, th.Dim.Render(" · ")), w)
}

func runGlyph(th themeT, status string) (string, lipgloss.Style) {
	switch status {
	case engine.RunRunning:
		return "●", th.RunRunning
	case engine.RunSucceeded:
		return "✓", th.RunOK
	case engine.RunFailed:
		return "✗", th.RunFailed
	case engine.RunCancelled:
		return "⊘", th.RunCancelled
	}
	return "?", th.Dim
}

func runDuration(r engine.RunRecord, now time.Time) string {
	end := now
	if r.Ended != nil {
		end = *r.Ended
	}
	return ShortDuration(end.Sub(r.Started))
}

// streamsRole is the engine as the Streams pane needs it: the runs,
// their lines, a run's end receipt (the destinations it reached), and
// the request a run waits on (its banner decides it).
type streamsRole interface {
	engine.Runs
	engine.Streams
	engine.Receipts
	engine.Requests
}

// eng is the engine as this pane needs it.
func (p *streamsPane) eng() streamsRole { return p.sh.e }
