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

// The fleet console's three tabs, as panes. Each keeps its own cursor
// and moves it with the console's KeyMap (navKey); the selected row is
// drawn as on the local console (the Theme's Selected, across the row).

// navOnly is the help of a pane whose only keys are the KeyMap's.
func navOnly(k KeyMap) keyMap {
	return keyMap{short: []key.Binding{k.Up, k.Down}, full: [][]key.Binding{{k.Up, k.Down, k.PageUp, k.PageDown, k.Top, k.Bottom}}}
}

// fleetTable draws a fleet tab's table: its head, a dim line when there
// are no rows, else the rows from the scroll offset down, the selected
// one marked ▸ and highlighted. row draws row i, after the mark. off and
// rows are the pane's, kept for scrolling and paging.
func fleetTable(th themeT, head, empty string, n, sel int, off, rows *int, w, h int, row func(i int, sel bool) string) string {
	out := []string{th.TableHead.Render(fit(head, w))}
	if n == 0 {
		out = append(out, th.Dim.Render(empty))
		return fleetBody(out, w, h)
	}
	*rows = h - 1
	*off = scrollOff(*off, sel, *rows, n)
	for i := *off; i < n && len(out) < h; i++ {
		mark := " "
		if i == sel {
			mark = "▸"
		}
		out = append(out, selRow(th, mark+row(i, i == sel), i == sel, w))
	}
	return fleetBody(out, w, h)
}

// selRow draws a list row: the selected one highlighted across the row.
func selRow(th themeT, line string, sel bool, w int) string {
	if sel {
		return th.Selected.Render(fit(line, w))
	}
	return fit(line, w)
}

// fleetHostsPane is the Hosts tab: every host, up or down, with its
// heartbeat, running count, pending count and newest checkpoint.
type fleetHostsPane struct {
	paneBase
	sh       *fleetShared
	k        KeyMap
	hosts    []engine.FleetHost
	sel, off int
	rows     int // rows the list showed last (a page)
}

func newFleetHostsPane(sh *fleetShared) *fleetHostsPane {
	return &fleetHostsPane{sh: sh, k: DefaultKeyMap().withEnds("first host", "last host")}
}

func (p *fleetHostsPane) capturing() bool { return false }
func (p *fleetHostsPane) prompt() string  { return "" }
func (p *fleetHostsPane) keys() keyMap    { return navOnly(p.k) }

func (p *fleetHostsPane) update(msg tea.Msg) tea.Cmd {
	switch m := msg.(type) {
	case fleetHostsMsg:
		if m.err != nil {
			p.sh.say("hosts: "+m.err.Error(), true)
			return nil
		}
		p.hosts = m.hs
		p.sel = min(p.sel, max(len(p.hosts)-1, 0))
	case tea.KeyMsg:
		if sel, ok := navKey(m, p.k, p.sel, len(p.hosts), max(p.rows, 1), nil); ok {
			p.sel = sel
		}
	}
	return nil
}

func (p *fleetHostsPane) view(w, h int) string {
	th, now := p.sh.th, p.sh.now()
	head := fmt.Sprintf(" %-20s %-5s %-18s %7s %7s  %s", "HOST", "STATE", "HEARTBEAT", "RUNNING", "PENDING", "LAST CHECKPOINT")
	empty := " no host has joined (on a host: warden serve --fleet URL --fleet-creds FILE --fleet-host NAME)"
	return fleetTable(th, head, empty, len(p.hosts), p.sel, &p.off, &p.rows, w, h, func(i int, sel bool) string {
		hs := p.hosts[i]
		state, stStyle := "down", th.Denied
		if hs.Up {
			state, stStyle = "up", th.Approved
		}
		beat, running, cp := "never", "-", "-"
		if b := hs.Beat; b != nil {
			beat = ago(b.At, now)
			running = fmt.Sprint(b.Running)
		}
		if c := hs.Checkpoint; c != nil {
			cp = fmt.Sprintf("seq %d, %s", c.Seq, ago(c.At, now))
		}
		cell := fmt.Sprintf("%-5s", state)
		if !sel { // the selected row's highlight is its style
			cell = stStyle.Render(cell)
		}
		return fmt.Sprintf("%-20s ", plain(safe(hs.Host), 20)) + cell + fmt.Sprintf(" %-18s %7s %7d  %s", beat, running, hs.Pending, cp)
	})
}

// fleetRunsPane is the Runs tab: runs across the fleet, newest first.
type fleetRunsPane struct {
	paneBase
	sh       *fleetShared
	k        KeyMap
	rev      uint64
	read     bool
	runs     []engine.FleetRun
	sel, off int
	rows     int
}

func newFleetRunsPane(sh *fleetShared) *fleetRunsPane {
	return &fleetRunsPane{sh: sh, k: DefaultKeyMap().withEnds("newest", "oldest")}
}

func (p *fleetRunsPane) capturing() bool { return false }
func (p *fleetRunsPane) prompt() string  { return "" }
func (p *fleetRunsPane) keys() keyMap    { return navOnly(p.k) }

// refold re-reads the runs when the fleet changed.
func (p *fleetRunsPane) refold() {
	rev := p.sh.src.Rev()
	if p.read && rev == p.rev {
		return
	}
	p.read, p.rev = true, rev
	p.runs = p.sh.src.Runs(maxFleetRuns)
	p.sel = min(p.sel, max(len(p.runs)-1, 0))
}

func (p *fleetRunsPane) update(msg tea.Msg) tea.Cmd {
	if m, ok := msg.(tea.KeyMsg); ok {
		if sel, ok := navKey(m, p.k, p.sel, len(p.runs), max(p.rows, 1), nil); ok {
			p.sel = sel
		}
	}
	return nil
}

func (p *fleetRunsPane) view(w, h int) string {
	th, now := p.sh.th, p.sh.now()
	head := fmt.Sprintf(" %-12s %-24s %-24s %-10s %s", "HOST", "RUN", "HOOK", "STATUS", "STARTED")
	return fleetTable(th, head, " no runs yet", len(p.runs), p.sel, &p.off, &p.rows, w, h, func(i int, sel bool) string {
		r := p.runs[i]
		status := fmt.Sprintf("%-10s", plain(safe(r.Status), 10))
		if !sel {
			_, st := runGlyph(th, r.Status)
			status = st.Render(status)
		}
		return fmt.Sprintf("%-12s %-24s %-24s ", plain(strings.ToUpper(safe(r.Host)), 12), plain(safe(r.ID), 24), plain(safe(r.Module+"/"+r.Hook), 24)) +
			status + " " + ago(r.Started, now)
	})
}

// fleetRequestsKeys answer the fleet's queue with the local console's
// keys (requestsKeys).
type fleetRequestsKeys struct {
	KeyMap
	Approve, Deny, Always key.Binding
}

func newFleetRequestsKeys() fleetRequestsKeys {
	k := newRequestsKeys()
	return fleetRequestsKeys{
		KeyMap:  DefaultKeyMap().withEnds("oldest pending", "oldest decided"),
		Approve: k.Approve, Deny: k.Deny, Always: k.Always,
	}
}

// fleetRequestsPane is the Requests tab: one queue across the fleet,
// pending first (oldest first), each request naming its host large.
type fleetRequestsPane struct {
	paneBase
	sh   *fleetShared
	k    fleetRequestsKeys
	rev  uint64
	reqs []engine.FleetRequest
	pend int
	sel  int
	off  int
	rows int // rows the list showed last (a page)

	dec  decision[engine.FleetRequest] // a deny's reason, approve-always's yes
	busy bool                          // a decision is on its way
}

func newFleetRequestsPane(sh *fleetShared) *fleetRequestsPane {
	return &fleetRequestsPane{sh: sh, k: newFleetRequestsKeys(), dec: newDecision[engine.FleetRequest]()}
}

func (p *fleetRequestsPane) capturing() bool { return p.dec.active() }

func (p *fleetRequestsPane) prompt() string {
	switch {
	case p.dec.reason.Active():
		return p.dec.reason.View()
	case p.dec.confirming:
		return p.sh.th.Prompt.Render(fmt.Sprintf("Approve request %d on %s ALWAYS (an exact rule in its policy)? y adds it; any other key goes back",
			p.dec.target.Request.ID, safe(p.dec.target.Host)))
	}
	return ""
}

func (p *fleetRequestsPane) keys() keyMap {
	k := p.k
	if km, ok := p.dec.keys(); ok {
		return km
	}
	acts := []key.Binding{k.Approve, k.Deny, k.Always}
	return keyMap{short: append([]key.Binding{k.Up, k.Down}, acts...),
		full: [][]key.Binding{{k.Up, k.Down, k.PageUp, k.PageDown, k.Top, k.Bottom}, acts}}
}

// refold re-reads the queue when the fleet changed (the sort of 10,000
// requests happens here, never per frame), keeping the selected request
// selected.
func (p *fleetRequestsPane) refold() {
	rev := p.sh.src.Rev()
	if rev == p.rev && p.reqs != nil {
		return
	}
	var keep engine.FleetRequest
	had := p.sel >= 0 && p.sel < len(p.reqs)
	if had {
		keep = p.reqs[p.sel]
	}
	now := p.sh.now()
	p.rev = rev
	p.reqs = p.sh.src.Queue(now, maxQueueDecided)
	if p.reqs == nil {
		p.reqs = []engine.FleetRequest{}
	}
	p.pend = 0
	for i := range p.reqs {
		if p.reqs[i].Pending(now) {
			p.pend++
		}
	}
	if had {
		for i := range p.reqs {
			if p.reqs[i].Host == keep.Host && p.reqs[i].Request.ID == keep.Request.ID {
				p.sel = i
				break
			}
		}
	}
	p.sel = min(p.sel, max(len(p.reqs)-1, 0))
}

func (p *fleetRequestsPane) update(msg tea.Msg) tea.Cmd {
	switch m := msg.(type) {
	case fleetDecidedMsg:
		p.decided(m)
	case tea.KeyMsg:
		return p.key(m)
	}
	return nil
}

func (p *fleetRequestsPane) decided(m fleetDecidedMsg) {
	p.busy = false
	switch {
	case m.err != nil:
		p.sh.say(m.err.Error(), true)
	case !m.r.OK:
		p.sh.say(m.r.Message, true)
	default:
		p.sh.say(m.r.Message, false)
		// A queue: the next pending request comes up.
		now := p.sh.now()
		for i, r := range p.reqs {
			if r.Pending(now) && (r.Host != m.on || r.Request.ID != m.id) {
				p.sel = i
				break
			}
		}
	}
	p.refold()
}

func (p *fleetRequestsPane) key(msg tea.KeyMsg) tea.Cmd {
	k := p.k
	if cmd, ok := p.dec.key(msg, p.decide, func() { p.sh.say("not approved", false) }); ok {
		return cmd
	}
	if sel, ok := navKey(msg, k.KeyMap, p.sel, len(p.reqs), max(p.rows, 1), nil); ok {
		p.sel = sel
		return nil
	}
	switch {
	case key.Matches(msg, k.Approve):
		if r, ok := p.pendingSel(); ok {
			return p.decide(r, engine.ApproveOnce, "")
		}
	case key.Matches(msg, k.Deny):
		if r, ok := p.pendingSel(); ok {
			return p.dec.askReason(r)
		}
	case key.Matches(msg, k.Always):
		if r, ok := p.pendingSel(); ok {
			p.dec.askAlways(r, false)
		}
	}
	return nil
}

// pendingSel is the selected request, when a decision may be sent on it
// (the status line says why not).
func (p *fleetRequestsPane) pendingSel() (engine.FleetRequest, bool) {
	if p.sel < 0 || p.sel >= len(p.reqs) {
		p.sh.say("no request selected", true)
		return engine.FleetRequest{}, false
	}
	r := p.reqs[p.sel]
	if d := r.Request.Decision; d != nil {
		p.sh.say(fmt.Sprintf("request %d on %s was already decided (%s by %s)", r.Request.ID, safe(r.Host), d.Verdict, safe(d.By)), true)
		return r, false
	}
	if p.busy {
		p.sh.say("a decision is on its way; wait for its answer", true)
		return r, false
	}
	return r, true
}

func (p *fleetRequestsPane) decide(r engine.FleetRequest, verdict, reason string) tea.Cmd {
	p.busy = true
	p.sh.say(fmt.Sprintf("sending %s of request %d to %s…", verdict, r.Request.ID, safe(r.Host)), false)
	src := p.sh.src
	return func() tea.Msg {
		rep, err := src.Decide(context.Background(), r.Host, engine.FleetDecision{Request: r.Request.ID, Verdict: verdict, Reason: reason})
		return fleetDecidedMsg{r: rep, err: err, id: r.Request.ID, on: r.Host}
	}
}

func (p *fleetRequestsPane) view(w, h int) string {
	th := p.sh.th
	listH := max(h/2, 3)
	out := []string{th.Title.Render(fmt.Sprintf("Requests across the fleet · %d pending · %d decided", p.pend, len(p.reqs)-p.pend))}
	if len(p.reqs) == 0 {
		out = append(out, th.Dim.Render("no requests: a hook on any host asking the operator shows up here"))
		return fleetBody(out, w, h)
	}
	now := p.sh.now()
	p.rows = listH - 1
	p.off = scrollOff(p.off, p.sel, p.rows, len(p.reqs))
	for i := p.off; i < len(p.reqs) && len(out) < listH; i++ {
		out = append(out, p.row(p.reqs[i], i == p.sel, now, w))
	}
	for len(out) < listH {
		out = append(out, "")
	}
	out = append(out, th.Border.Render(strings.Repeat("─", w)))
	if p.sel < len(p.reqs) {
		out = append(out, p.detail(p.reqs[p.sel], w, now)...)
	}
	return fleetBody(out, w, h)
}

// hostBanner is the host name, large: a request's host is what an
// operator answering a fleet queue must never misread.
func (p *fleetRequestsPane) hostBanner(host string) string {
	return p.sh.th.Badge.Render("  " + strings.ToUpper(safe(host)) + "  ")
}

func (p *fleetRequestsPane) row(r engine.FleetRequest, sel bool, now time.Time, w int) string {
	th := p.sh.th
	state, st := "pending", th.Pending
	if d := r.Request.Decision; d != nil {
		state, st = d.Verdict+" by "+d.By, th.Approved
		if d.Verdict == engine.Deny {
			st = th.Denied
		}
	} else if !r.Request.Pending(now) {
		state, st = "expired", th.Denied
	}
	host := fmt.Sprintf("%-12s", plain(strings.ToUpper(safe(r.Host)), 12))
	id := fmt.Sprintf(" #%-4d ", r.Request.ID)
	rest := fmt.Sprintf(" %5s  %s/%s  %s", ShortDuration(now.Sub(r.Request.Created)), r.Request.Requester.Module, r.Request.Requester.Hook, operationLine(r.Request))
	stateCell := fmt.Sprintf("%-22s", plain(safe(state), 22))
	rest = plain(rest, max(w-(1+12+textWidth(id)+22), 1))
	if sel {
		return selRow(th, "▸"+host+id+stateCell+rest, true, w)
	}
	return " " + th.Title.Render(host) + id + st.Render(stateCell) + rest
}

func (p *fleetRequestsPane) detail(r engine.FleetRequest, w int, now time.Time) []string {
	th := p.sh.th
	field := func(k, v string) string {
		return th.Dim.Render(fmt.Sprintf("%-10s ", k)) + plain(safe(v), max(w-11, 1))
	}
	out := []string{p.hostBanner(r.Host) + "  " + th.Title.Render(fmt.Sprintf("request %d", r.Request.ID))}
	q := r.Request
	out = append(out,
		field("asks", operationLine(q)),
		field("from", q.Requester.Module+"/"+q.Requester.Hook+" (run "+q.Requester.Run+")"),
		field("subject", q.Subject),
		field("created", q.Created.Local().Format("2006-01-02 15:04:05")+" ("+ago(q.Created, now)+")"))
	if d := q.Decision; d != nil {
		dec := d.Verdict + " by " + d.By + " at " + d.At.Local().Format("15:04:05")
		if d.Reason != "" {
			dec += ": " + d.Reason
		}
		out = append(out, field("decided", dec))
	} else {
		out = append(out, field("expires", "in "+ShortDuration(q.Expires.Sub(now))))
	}
	for _, l := range wrapRows(string(q.Content), max(w-11, 10), 0, 6) {
		out = append(out, th.Dim.Render(fmt.Sprintf("%-10s ", "content"))+l)
	}
	return out
}
