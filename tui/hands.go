package tui

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/wardenhq/warden/engine"
)

type handsKeys struct {
	KeyMap
	Status, Reload, Init, Finish, Filter, Clear key.Binding
}

// handsPane lists the hands roots this data dir knows, with their phase;
// s asks the Docker engine for live status and drift, i opens the init
// wizard and x the finish wizard.
type handsPane struct {
	sh    *shared
	k     handsKeys
	roots []engine.HandsRecord
	sel   int
	off   int // the first row drawn (scrollOff keeps it valid)
	busy  string
	wiz   *handsWizard
	w, h  int
	// filter and query: / shows only the roots whose row holds the query
	// (smart case), as in the other lists; the cursor skips the others.
	filter promptInput
	query  string
	// lastInit is the last init wizard that did not end ready: i starts
	// over from what was typed there.
	lastInit *handsWizard
	// notice says on the pane (not only in the status line, which fades)
	// that a wizard was cancelled; the next wizard clears it.
	notice string
	// jobs are the wizards' engine calls still running (Close waits).
	jobs []*progressJob
	// live is each root's state as the engine last reported it (s, r,
	// the tab shown, every liveEvery while it is); liveAt is when.
	live   map[string]liveState
	liveAt time.Time
	liveOn bool // a live read is under way
	// liveAgain: a read was asked for while one was under way (the
	// roots changed since it began), so its answer may be stale: another
	// follows it.
	liveAgain bool
}

// liveState is a root's container state and drift, read from the engine.
type liveState struct {
	state string // the container's state ("running", "exited", …)
	drift int
	err   string
}

// liveEvery is how often the Hands tab re-reads live state while shown.
const liveEvery = 15 * time.Second

// handsLiveMsg is a fresh read of every unfinished root's live state.
type handsLiveMsg struct{ live map[string]liveState }

// refreshLive asks the engine about every unfinished root, off the UI
// goroutine (an unreachable engine takes its timeout).
func (p *handsPane) refreshLive() tea.Cmd {
	if p.liveOn {
		p.liveAgain = true
		return nil
	}
	var roots []string
	for _, r := range p.roots {
		if r.Phase != engine.HandsPhaseFinished {
			roots = append(roots, r.Root)
		}
	}
	if len(roots) == 0 {
		return nil
	}
	p.liveOn, p.liveAt = true, p.sh.now()
	e, ctx := p.eng(), p.sh.context()
	return func() tea.Msg {
		out := map[string]liveState{}
		for _, root := range roots {
			c, cancel := context.WithTimeout(ctx, 5*time.Second)
			rep, err := e.HandsStatus(c, root)
			cancel()
			if err != nil {
				out[root] = liveState{err: OneLine(err.Error())}
				continue
			}
			out[root] = liveState{state: rep.Container.State, drift: len(rep.Drift)}
		}
		if ctx.Err() != nil {
			// The console is closing: a read it cut short says nothing
			// about the roots (the engine could not be asked).
			return nil
		}
		return handsLiveMsg{out}
	}
}

type handsStatusMsg struct {
	root string
	text string
	live liveState
	err  error
}

func newHandsPane(sh *shared) *handsPane {
	return &handsPane{sh: sh, k: handsKeys{
		KeyMap: DefaultKeyMap(),
		Status: key.NewBinding(key.WithKeys("s", "enter"), key.WithHelp("s", "status & drift")),
		Reload: key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "reload")),
		Init:   key.NewBinding(key.WithKeys("i"), key.WithHelp("i", "init")),
		Finish: key.NewBinding(key.WithKeys("x"), key.WithHelp("x", "finish")),
		Filter: key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "filter")),
		Clear:  key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "clear filter")),
	}, filter: newPromptInput("filter › ", "root, phase, engine, image or access", 128)}
}

// hidden reports whether the filter hides root i. The text matched is
// what the row shows of the record (live state aside: it changes under
// the operator's eyes).
func (p *handsPane) hidden(i int) bool {
	if p.query == "" {
		return false
	}
	r := p.roots[i]
	return !contains(strings.Join([]string{r.Phase, r.Root, r.EngineName(), imageLabel(r), "access " + r.Access}, " "), p.query)
}

// visible lists the indexes of the roots the filter leaves, in order.
func (p *handsPane) visible() []int { return shownRows(len(p.roots), p.hidden) }

// current is the selected root, when the filter shows it.
func (p *handsPane) current() (engine.HandsRecord, bool) {
	if p.sel >= len(p.roots) || p.hidden(p.sel) {
		return engine.HandsRecord{}, false
	}
	return p.roots[p.sel], true
}

// setQuery filters the list ("" shows it all); the cursor moves to the
// nearest root the filter leaves.
func (p *handsPane) setQuery(q string) {
	p.query = q
	if len(p.roots) > 0 {
		p.sel = landOn(p.sel, 1, len(p.roots), p.hidden)
	}
}

func (p *handsPane) resize(w, h int) {
	p.w, p.h = w, h
	if p.wiz != nil {
		p.wiz.resize(w, h)
	}
}

// wantsCtrlC: a running init or finish takes ctrl+c (to ask to cancel).
func (p *handsPane) wantsCtrlC() bool { return p.wiz != nil && p.wiz.wantsCtrlC() }

// wait waits (at most d) for the wizards' engine calls to end: after the
// console's context is cancelled, an init's failure path still stops its
// container and writes evidence.
func (p *handsPane) wait(d time.Duration) {
	deadline := time.After(d)
	for _, j := range p.jobs {
		select {
		case <-j.ended:
		case <-deadline:
			return
		}
	}
}

func (p *handsPane) reload() {
	rs, err := p.eng().HandsList()
	if err != nil {
		p.sh.errStatus(err)
		return
	}
	p.apply(rs, "")
}

// handsLoadedMsg is a fresh read of the hands roots; sel, when set, is
// the root to select.
type handsLoadedMsg struct {
	roots []engine.HandsRecord
	err   error
	sel   string
}

// refresh re-reads the roots off the UI goroutine: on r, when a wizard's
// job ends or the wizard closes, and on every hands.* receipt (a phase
// written by any warden on this data dir).
func (p *handsPane) refresh(sel string) tea.Cmd {
	e := p.eng()
	return func() tea.Msg {
		rs, err := e.HandsList()
		return handsLoadedMsg{roots: rs, err: err, sel: sel}
	}
}

func (p *handsPane) apply(rs []engine.HandsRecord, sel string) {
	p.roots = rs
	p.sel = min(p.sel, max(len(rs)-1, 0))
	for i, r := range rs {
		if sel != "" && r.Root == sel {
			p.sel = i
			if p.hidden(i) {
				// The root a wizard just made or finished is shown,
				// whatever the filter was.
				p.query = ""
			}
		}
	}
	if len(rs) > 0 {
		p.sel = landOn(p.sel, 1, len(rs), p.hidden)
	}
}

// capturing: an open wizard has the keyboard, except on its outcome,
// where tabs, help and q work again.
func (p *handsPane) capturing() bool {
	return (p.wiz != nil && p.wiz.stage != wsDone) || p.filter.Active()
}

func (p *handsPane) prompt() string {
	if p.wiz != nil {
		return ""
	}
	return p.filter.View()
}

func (p *handsPane) keys() keyMap {
	if p.wiz != nil {
		return p.wiz.keys()
	}
	if p.filter.Active() {
		return p.filter.KeyMap()
	}
	k := p.k
	return keyMap{short: []key.Binding{k.Up, k.Down, k.Init, k.Finish, k.Status, k.Reload},
		full: [][]key.Binding{{k.Up, k.Down, k.PageUp, k.PageDown, k.Top, k.Bottom}, {k.Init, k.Finish, k.Status, k.Reload, k.Filter, k.Clear}}}
}

func (p *handsPane) update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case handsLiveMsg:
		p.live, p.liveOn = msg.live, false
		if p.liveAgain {
			p.liveAgain = false
			return p.refreshLive()
		}
		return nil
	case handsStatusMsg:
		p.busy = ""
		if msg.err != nil {
			p.sh.errStatus(msg.err)
			return nil
		}
		if p.live == nil {
			p.live = map[string]liveState{}
		}
		p.live[msg.root] = msg.live
		return openOverlay(textOverlay(p.sh, "hands status · "+msg.root, msg.text))
	case handsLoadedMsg:
		if msg.err != nil {
			p.sh.errStatus(msg.err)
			return nil
		}
		p.apply(msg.roots, msg.sel)
		return p.refreshLive()
	}
	if p.wiz != nil {
		return p.wizard(msg)
	}
	switch msg := msg.(type) {
	case tea.KeyMsg:
		if p.filter.Active() {
			cmd, outcome, q := p.filter.Update(msg)
			if outcome == promptSubmitted {
				p.setQuery(strings.TrimSpace(q))
			}
			return cmd
		}
		switch {
		case key.Matches(msg, p.k.Filter):
			return p.filter.Open(p.query)
		case key.Matches(msg, p.k.Clear) && p.query != "":
			p.setQuery("")
		case key.Matches(msg, p.k.Init):
			if p.sh.opts.NoAttach {
				// A viewer: refused here, not after five steps.
				p.sh.setStatus("setting up a hands root needs an operator; this console is a viewer (ask an operator, or add your key as operator)", true)
				return nil
			}
			w, cmd := newInitWizard(p.sh, p.lastInit, p.w, p.h)
			p.wiz, p.notice = w, ""
			return cmd
		case key.Matches(msg, p.k.Finish):
			sel := ""
			if r, ok := p.current(); ok {
				sel = r.Root
			}
			w, cmd := newFinishWizard(p.sh, p.roots, sel, p.w, p.h)
			if w == nil {
				p.sh.setStatus("no hands root to finish: every known root is finished (i starts a new one)", false)
				return nil
			}
			p.wiz, p.notice = w, ""
			return cmd
		case key.Matches(msg, p.k.Up, p.k.Down, p.k.PageUp, p.k.PageDown, p.k.Top, p.k.Bottom):
			p.sel, _ = navKey(msg, p.k.KeyMap, p.sel, len(p.roots), max(p.h-3, 1), p.hidden)
		case key.Matches(msg, p.k.Reload):
			return p.refresh("")
		case key.Matches(msg, p.k.Status):
			if r, ok := p.current(); ok {
				return p.status(r.Root)
			}
		}
	}
	return nil
}

// wizard feeds the open wizard, and takes it down when it closes.
func (p *handsPane) wizard(msg tea.Msg) tea.Cmd {
	w := p.wiz
	job := w.job
	cmd := w.update(msg)
	if w.job != nil && w.job != job {
		p.jobs = append(p.jobs, w.job)
	}
	if m, ok := msg.(jobProgressMsg); ok && m.done {
		cmd = tea.Batch(cmd, p.refresh("")) // the list shows the new phase at once
	}
	if !w.closed {
		return cmd
	}
	p.wiz = nil
	if w.kind == wizInit {
		p.lastInit = w
		if w.stage == wsDone && w.err == nil {
			p.lastInit = nil // ready: the next root is another one
		}
	}
	if w.aborted {
		p.notice = "✗ hands " + w.kind + " cancelled: nothing was done"
		if w.kind == wizInit {
			p.notice += " · i starts again with what you typed"
		}
	}
	cmd = tea.Batch(cmd, p.refresh(w.root))
	switch {
	case w.showStatus && w.root != "":
		return tea.Batch(cmd, p.status(w.root))
	case w.showFinish:
		known := false
		for _, r := range p.roots {
			known = known || (r.Root == w.root && r.Phase != engine.HandsPhaseFinished)
		}
		fw, fcmd := newFinishWizard(p.sh, p.roots, w.root, p.w, p.h)
		if !known || fw == nil {
			p.sh.setStatus("nothing to finish: "+w.root+" was never set up", false)
			return cmd
		}
		p.wiz = fw
		return tea.Batch(cmd, fcmd)
	}
	return cmd
}

// status asks the engine for a root's status and drift.
func (p *handsPane) status(root string) tea.Cmd {
	if p.busy != "" {
		return nil
	}
	p.busy = root
	e, ctx := p.eng(), p.sh.context()
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		rep, err := e.HandsStatus(ctx, root)
		if err != nil {
			return handsStatusMsg{root: root, err: err}
		}
		return handsStatusMsg{root: root, text: HandsStatusText(rep), live: liveState{state: rep.Container.State, drift: len(rep.Drift)}}
	}
}

func (p *handsPane) view(w, h int) string {
	if p.wiz != nil {
		return p.wiz.view(w, h)
	}
	th := p.sh.th
	out := []string{fit(th.Title.Render(fmt.Sprintf("Hands roots (%d)", len(p.roots))), w)}
	if len(p.roots) == 0 {
		out = append(out, th.Dim.Render(plain("no hands roots yet: press i to set one up (or use `warden hands init`)", w)))
	}
	// The rows the filter leaves, and the cursor's place among them.
	vis, at := p.visible(), 0
	for k, i := range vis {
		if i == p.sel {
			at = k
		}
	}
	if p.query != "" {
		out[0] = fit(th.Title.Render(fmt.Sprintf("Hands roots · filter %s (esc clears) · %d of %d", plain(p.query, 30), len(vis), len(p.roots))), w)
		if len(vis) == 0 && len(p.roots) > 0 {
			out = append(out, fit(th.Dim.Render("no match for "+plain(p.query, max(w-13, 1))), w))
		}
	}
	// Rows between the title and the footer (and the busy line).
	rows := max(h-3, 1)
	p.off = scrollOff(p.off, at, rows, len(vis))
	now := p.sh.now()
	for _, i := range vis[min(p.off, len(vis)):] {
		r := p.roots[i]
		if len(out) >= h-2 {
			break
		}
		mark := " "
		if i == p.sel {
			mark = "▸"
		}
		st := th.Dim
		switch r.Phase {
		case engine.HandsPhaseReady:
			st = th.RunOK
		case engine.HandsPhaseFailed:
			st = th.RunFailed
		case engine.HandsPhasePrepared, engine.HandsPhaseCreating, engine.HandsPhaseRunning:
			st = th.RunRunning
		}
		row := fmt.Sprintf("%s %-9s %s", mark, safe(r.Phase), safe(r.Root))
		tail := fmt.Sprintf("  %s · %s · access %s · updated %s ago", r.EngineName(), imageLabel(r), r.Access, ShortDuration(now.Sub(r.Updated)))
		if ls, ok := p.live[r.Root]; ok && r.Phase != engine.HandsPhaseFinished {
			switch {
			case ls.err != "":
				tail = "  ⚠ engine: " + ls.err + tail
			case ls.drift > 0:
				tail = fmt.Sprintf("  ⚠ DRIFT %d · container %s (s shows it)", ls.drift, ls.state) + tail
			default:
				tail = "  container " + ls.state + tail
			}
		}
		if i == p.sel {
			out = append(out, fit(th.Selected.Render(row)+th.Dim.Render(plain(tail, max(w-textWidth(row), 1))), w))
		} else {
			out = append(out, fit(mark+" "+st.Render(fmt.Sprintf("%-9s", safe(r.Phase)))+" "+safe(r.Root)+th.Dim.Render(plain(tail, max(w-textWidth(row), 1))), w))
		}
	}
	if p.busy != "" {
		out = append(out, th.Dim.Render("asking the Docker engine about "+safe(p.busy)+" …"))
	}
	foot := h - 1
	if p.notice != "" {
		foot--
	}
	for len(out) < foot {
		out = append(out, "")
	}
	if p.notice != "" {
		out = append(out[:min(len(out), max(foot, 0))], th.StatusErr.Render(plain(p.notice, w)))
	}
	out = append(out, th.Dim.Render(plain("i sets up a new root · x finishes one · s shows live status and drift", w)))
	return strings.Join(out[:h], "\n")
}

// eng is the engine as this pane needs it: the hands roots.
func (p *handsPane) eng() engine.Hands { return p.sh.e }
