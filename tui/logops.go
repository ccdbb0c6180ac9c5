package tui

import (
	"errors"
	"maps"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/wardenhq/warden/engine"
)

// The log view reads storage (a page of lines, a search, a run's counts)
// only inside operations run through its pane, never in Update itself.
//
// An operation is first tried on a copy of the view that cannot read
// storage: most keys move within the window already held, and change the
// view at once. If it needed to read, the copy is dropped and
// the operation runs again on a fresh copy in a tea.Cmd, off the UI
// goroutine; its outcome (logDoneMsg) replaces the view when it lands.
//
// Invariants:
//   - One operation is out at a time. Those asked for meanwhile (keys,
//     live lines) wait in order and run on the outcome, so no key and no
//     line is lost and each acts on the view the one before it left.
//   - Opening another run supersedes: what waited is dropped and the
//     outcome of the one out (gen no longer current) is thrown away, so a
//     page read for a run no longer shown never replaces the one shown.
//   - The UI goroutine draws only views it holds; a copy run off it
//     shares no memory the operation writes (win capped, widths and
//     states copied).
//   - Layout (size, styles) belongs to the UI: an outcome keeps the
//     view's current size and paints.

// logOp changes the log view, reading storage as it must. What it
// returns, if anything, runs on the UI goroutine once the view it made
// is shown (the status line, a follow-up command).
type logOp func(v *logView) (then func() tea.Cmd)

// logDoneMsg is an operation's outcome, read off the UI goroutine.
type logDoneMsg struct {
	gen  uint64
	v    *logView
	then func() tea.Cmd
}

// lineSource is what the log view reads of storage.
type lineSource interface {
	StreamInfo(run string) (engine.StreamMeta, error)
	StreamScan(run string, from uint64, backward bool, f engine.LineFilter, max, scan int) (engine.LineScan, error)
}

// errWouldRead is localOnly's answer: the operation must read storage.
var errWouldRead = errors.New("the log view must read storage for this")

// localOnly is the storage of a try without reads: any read marks it.
type localOnly struct{ read bool }

func (l *localOnly) StreamInfo(string) (engine.StreamMeta, error) {
	l.read = true
	return engine.StreamMeta{}, errWouldRead
}

func (l *localOnly) StreamScan(string, uint64, bool, engine.LineFilter, int, int) (engine.LineScan, error) {
	l.read = true
	return engine.LineScan{}, errWouldRead
}

// store is where the view reads: its copy's source, else the engine.
func (v *logView) store() lineSource {
	if v.src != nil {
		return v.src
	}
	return v.sh.e
}

// clone is a copy of the view reading from src. A private one may be
// changed on another goroutine without touching v; a shared one (a try
// on the UI goroutine, either dropped or shown in v's place) shares the
// window and its widths cache, which only ever gain what is true.
func (v *logView) clone(src lineSource, private bool) *logView {
	c := *v
	c.src = src
	c.states = maps.Clone(v.states)
	if private {
		c.win = v.win[:len(v.win):len(v.win)] // an append copies
		c.widths = append([]int32(nil), v.widths...)
	}
	return &c
}

// doLog runs op on the log view now, or after the one out.
func (p *streamsPane) doLog(op logOp) tea.Cmd {
	if p.logBusy {
		p.logQueue = append(p.logQueue, op)
		return nil
	}
	return p.runLog(op)
}

// supersedeLog runs op in place of whatever is out or waiting (opening
// another run).
func (p *streamsPane) supersedeLog(op logOp) tea.Cmd {
	p.logQueue, p.logBusy = nil, false
	p.logGen++ // the outcome out, if any, is stale
	return p.runLog(op)
}

func (p *streamsPane) runLog(op logOp) tea.Cmd {
	try := &localOnly{}
	c := p.log.clone(try, false)
	then := op(c)
	if !try.read {
		p.applyLog(c)
		return call(then)
	}
	p.logGen++
	p.logBusy = true
	gen, c := p.logGen, p.log.clone(p.eng(), true)
	return func() tea.Msg {
		then := op(c)
		return logDoneMsg{gen: gen, v: c, then: then}
	}
}

// logDone takes an outcome: shown if current, then what waited runs.
func (p *streamsPane) logDone(m logDoneMsg) tea.Cmd {
	if m.gen != p.logGen {
		return nil // superseded: another run is shown now
	}
	p.logBusy = false
	p.applyLog(m.v)
	cmds := []tea.Cmd{call(m.then)}
	for !p.logBusy && len(p.logQueue) > 0 {
		op := p.logQueue[0]
		p.logQueue = p.logQueue[1:]
		cmds = append(cmds, p.runLog(op))
	}
	return tea.Batch(cmds...)
}

// applyLog makes c the view shown, in the view's current layout.
func (p *streamsPane) applyLog(c *logView) {
	cur := p.log
	c.src, c.paints, c.noRuns = nil, cur.paints, cur.noRuns
	resized := c.width != cur.width || c.height != cur.height
	c.width, c.height = cur.width, cur.height
	*p.log = *c
	if resized {
		p.log.placeCursor() // reads nothing
	}
}

func call(then func() tea.Cmd) tea.Cmd {
	if then == nil {
		return nil
	}
	return then()
}

// forRun is op, run only while run is the one shown (a queued op for a
// run no longer shown does nothing).
func forRun(run string, op func(v *logView)) logOp {
	return func(v *logView) func() tea.Cmd {
		if v.run == run {
			op(v)
		}
		return nil
	}
}
