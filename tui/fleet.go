package tui

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/engine/fleet"
	"github.com/wardenhq/warden/themes"
)

// FleetSource is the fleet as the fleet console sees it: a
// *fleet.Client. Events arrive in the View the console is given (the
// caller follows the stream into it).
type FleetSource interface {
	Hosts(ctx context.Context, v *fleet.View) ([]fleet.HostStatus, error)
	Decide(ctx context.Context, host string, d fleet.Decision) (fleet.DecisionReply, error)
}

// FleetOptions configure the fleet console.
type FleetOptions struct {
	Theme themes.Theme
	// Name and Role are the member's, shown in the header.
	Name, Role string
	Now        func() time.Time
	// Refresh is how often hosts are re-read and the view re-folded
	// (default 1 s; the view is re-sorted only when it changed).
	Refresh time.Duration
}

// Fleet is the fleet console: Hosts, one Requests queue across hosts
// (answered with the local console's keys), and Runs.
type Fleet struct {
	src  FleetSource
	v    *fleet.View
	opts FleetOptions
	th   themes.Theme
	w, h int
	tab  int // 0 hosts, 1 requests, 2 runs

	rev   uint64
	reqs  []fleet.FleetRequest
	runs  []fleet.HostRun
	hosts []fleet.HostStatus
	pend  int
	sel   int
	off   int

	denying    bool
	confirming bool
	target     fleet.FleetRequest
	reason     textinput.Model

	pruned    time.Time // when the view was last pruned
	help      bool      // the keys list is open
	status    string
	statusBad bool
	busy      bool
}

type fleetTick struct{}
type fleetHosts struct {
	hs  []fleet.HostStatus
	err error
}
type fleetDecided struct {
	r   fleet.DecisionReply
	err error
	id  uint64
	on  string
}

// NewFleet makes the fleet console over src and v.
func NewFleet(src FleetSource, v *fleet.View, opts FleetOptions) *Fleet {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Theme.Name == "" {
		opts.Theme, _ = themes.ByName("")
	}
	if opts.Refresh <= 0 {
		opts.Refresh = time.Second
	}
	ti := textinput.New()
	ti.Prompt = "deny: reason (optional, enter to deny) › "
	ti.CharLimit = 500
	f := &Fleet{src: src, v: v, opts: opts, th: opts.Theme, tab: 1, reason: ti, w: 100, h: 30}
	f.refold()
	return f
}

// Init starts the refresh clock and reads the hosts.
func (f *Fleet) Init() tea.Cmd { return tea.Batch(f.tick(), f.loadHosts()) }

func (f *Fleet) tick() tea.Cmd {
	return tea.Tick(f.opts.Refresh, func(time.Time) tea.Msg { return fleetTick{} })
}

func (f *Fleet) loadHosts() tea.Cmd {
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs, err := f.src.Hosts(ctx, f.v)
		return fleetHosts{hs, err}
	}
}

// refold re-reads the view's lists when it changed (the sort of 10,000
// requests happens here, never per frame).
func (f *Fleet) refold() {
	rev := f.v.Rev()
	if rev == f.rev && f.reqs != nil {
		return
	}
	var keep fleet.FleetRequest
	had := f.sel >= 0 && f.sel < len(f.reqs)
	if had {
		keep = f.reqs[f.sel]
	}
	now := f.opts.Now()
	f.rev = rev
	f.reqs = f.v.Queue(now, maxQueueDecided)
	f.runs = f.v.Runs(500)
	f.pend = 0
	for i := range f.reqs {
		if f.reqs[i].Pending(now) {
			f.pend++
		}
	}
	if had {
		for i := range f.reqs {
			if f.reqs[i].Host == keep.Host && f.reqs[i].Request.ID == keep.Request.ID {
				f.sel = i
				break
			}
		}
	}
	f.sel = min(f.sel, max(len(f.reqs)-1, 0))
}

// maxQueueDecided is how many decided requests the queue keeps below
// the pending ones.
const maxQueueDecided = 500

var fleetKeys = struct {
	Hosts, Requests, Runs, Next, Quit, Up, Down, Approve, Deny, Always, Yes, Help key.Binding
}{
	Help:     key.NewBinding(key.WithKeys("?"), key.WithHelp("?", "all keys")),
	Hosts:    key.NewBinding(key.WithKeys("1"), key.WithHelp("1", "hosts")),
	Requests: key.NewBinding(key.WithKeys("2"), key.WithHelp("2", "requests")),
	Runs:     key.NewBinding(key.WithKeys("3"), key.WithHelp("3", "runs")),
	Next:     key.NewBinding(key.WithKeys("tab"), key.WithHelp("tab", "next tab")),
	Quit:     key.NewBinding(key.WithKeys("q", "ctrl+c"), key.WithHelp("q", "quit")),
	Up:       key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "up")),
	Down:     key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "down")),
	Approve:  key.NewBinding(key.WithKeys("y"), key.WithHelp("y", "approve once")),
	Deny:     key.NewBinding(key.WithKeys("n"), key.WithHelp("n", "deny")),
	Always:   key.NewBinding(key.WithKeys("a"), key.WithHelp("a", "approve always")),
	Yes:      key.NewBinding(key.WithKeys("y"), key.WithHelp("y", "yes")),
}

// Update handles a message.
func (f *Fleet) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		f.w, f.h = clampSize(msg.Width, msg.Height)
	case fleetTick:
		if now := f.opts.Now(); now.Sub(f.pruned) > time.Minute {
			f.pruned = now
			f.v.Prune(now.Add(-fleet.Window))
		}
		f.refold()
		return f, tea.Batch(f.tick(), f.loadHosts())
	case fleetHosts:
		if msg.err != nil {
			f.say("hosts: "+msg.err.Error(), true)
		} else {
			f.hosts = msg.hs
		}
	case fleetDecided:
		f.busy = false
		switch {
		case msg.err != nil:
			f.say(msg.err.Error(), true)
		case msg.r.Code != fleet.CodeOK:
			f.say(msg.r.Message, true)
		default:
			f.say(msg.r.Message, false)
			// A queue: the next pending request comes up.
			for i, r := range f.reqs {
				if r.Pending(f.opts.Now()) && (r.Host != msg.on || r.Request.ID != msg.id) {
					f.sel = i
					break
				}
			}
		}
		f.refold()
	case tea.KeyMsg:
		return f, f.key(msg)
	}
	return f, nil
}

func (f *Fleet) say(s string, bad bool) { f.status, f.statusBad = s, bad }

func (f *Fleet) key(msg tea.KeyMsg) tea.Cmd {
	k := fleetKeys
	if f.denying {
		switch msg.Type {
		case tea.KeyEnter:
			f.denying = false
			f.reason.Blur()
			return f.decide(f.target, engine.Deny, strings.TrimSpace(f.reason.Value()))
		case tea.KeyEsc:
			f.denying = false
			f.reason.Blur()
			return nil
		}
		var cmd tea.Cmd
		f.reason, cmd = f.reason.Update(msg)
		return cmd
	}
	if f.confirming {
		f.confirming = false
		if key.Matches(msg, k.Yes) {
			return f.decide(f.target, engine.ApproveAlways, "")
		}
		f.say("not approved", false)
		return nil
	}
	if f.help {
		f.help = false // any key closes the keys list
		if !key.Matches(msg, k.Quit) {
			return nil
		}
	}
	switch {
	case key.Matches(msg, k.Help):
		f.help = true
	case key.Matches(msg, k.Quit):
		return tea.Quit
	case key.Matches(msg, k.Hosts):
		f.tab = 0
	case key.Matches(msg, k.Requests):
		f.tab = 1
	case key.Matches(msg, k.Runs):
		f.tab = 2
	case key.Matches(msg, k.Next):
		f.tab = (f.tab + 1) % 3
	case key.Matches(msg, k.Up):
		f.sel = max(f.sel-1, 0)
	case key.Matches(msg, k.Down):
		f.sel = min(f.sel+1, max(f.listLen()-1, 0))
	case f.tab == 1 && key.Matches(msg, k.Approve):
		if r, ok := f.pendingSel(); ok {
			return f.decide(r, engine.ApproveOnce, "")
		}
	case f.tab == 1 && key.Matches(msg, k.Deny):
		if r, ok := f.pendingSel(); ok {
			f.denying, f.target = true, r
			f.reason.Reset()
			return f.reason.Focus()
		}
	case f.tab == 1 && key.Matches(msg, k.Always):
		if r, ok := f.pendingSel(); ok {
			f.confirming, f.target = true, r
		}
	}
	return nil
}

func (f *Fleet) listLen() int {
	switch f.tab {
	case 0:
		return len(f.hosts)
	case 2:
		return len(f.runs)
	}
	return len(f.reqs)
}

func (f *Fleet) pendingSel() (fleet.FleetRequest, bool) {
	if f.sel < 0 || f.sel >= len(f.reqs) {
		f.say("no request selected", true)
		return fleet.FleetRequest{}, false
	}
	r := f.reqs[f.sel]
	if d := r.Request.Decision; d != nil {
		f.say(fmt.Sprintf("request %d on %s was already decided (%s by %s)", r.Request.ID, r.Host, d.Verdict, d.By), true)
		return r, false
	}
	if f.busy {
		f.say("a decision is on its way; wait for its answer", true)
		return r, false
	}
	return r, true
}

func (f *Fleet) decide(r fleet.FleetRequest, verdict, reason string) tea.Cmd {
	f.busy = true
	f.say(fmt.Sprintf("sending %s of request %d to %s…", verdict, r.Request.ID, r.Host), false)
	return func() tea.Msg {
		rep, err := f.src.Decide(context.Background(), r.Host, fleet.Decision{Request: r.Request.ID, Verdict: verdict, Reason: reason})
		return fleetDecided{r: rep, err: err, id: r.Request.ID, on: r.Host}
	}
}

// View draws the console.
func (f *Fleet) View() string {
	th := f.th
	w, h := max(f.w, 20), max(f.h, 8)
	tabs := []string{"1 Hosts", "2 Requests", "3 Runs"}
	var hdr []string
	for i, t := range tabs {
		if i == 1 && f.pend > 0 {
			t += " " + th.Badge.Render(fmt.Sprint(f.pend))
		}
		if i == f.tab {
			hdr = append(hdr, th.TabActive.Render(t))
		} else {
			hdr = append(hdr, th.Tab.Render(t))
		}
	}
	up := 0
	for _, hs := range f.hosts {
		if hs.Up {
			up++
		}
	}
	head := th.Brand.Render("warden fleet") + "  " + th.HeaderKey.Render("as ") + th.HeaderVal.Render(safe(f.opts.Role+" "+f.opts.Name)) +
		"  " + th.HeaderVal.Render(fmt.Sprintf("%d/%d hosts up · %d pending", up, len(f.hosts), f.pend))
	out := []string{fit(head, w), fit(strings.Join(hdr, " "), w)}
	body := h - 4
	var lines []string
	switch {
	case f.help:
		lines = f.helpView()
	case f.tab == 0:
		lines = f.hostsView(w, body)
	case f.tab == 1:
		lines = f.requestsView(w, body)
	default:
		lines = f.runsView(w, body)
	}
	for len(lines) < body {
		lines = append(lines, "")
	}
	out = append(out, lines[:body]...)
	st := th.Status
	if f.statusBad {
		st = th.StatusErr
	}
	status := safe(f.status)
	if f.denying {
		status = f.reason.View()
	} else if f.confirming {
		status = fmt.Sprintf("Approve request %d on %s ALWAYS (an exact rule in its policy)? y adds it; any other key goes back", f.target.Request.ID, safe(f.target.Host))
	}
	out = append(out, fit(st.Render(status), w))
	keys := "y approve · n deny · a always · ↑↓ select · 1 hosts · 3 runs · ? keys · q quit"
	if f.tab != 1 {
		keys = "1 hosts · 2 requests · 3 runs · ↑↓ select · ? keys · q quit"
	}
	out = append(out, fit(th.Dim.Render(keys), w))
	for i := range out {
		out[i] = fit(out[i], w)
	}
	return strings.Join(out, "\n")
}

// helpView lists every key.
func (f *Fleet) helpView() []string {
	k := fleetKeys
	out := []string{f.th.Title.Render("Keys (any key closes)")}
	for _, b := range []key.Binding{k.Hosts, k.Requests, k.Runs, k.Next, k.Up, k.Down, k.Approve, k.Deny, k.Always, k.Help, k.Quit} {
		h := b.Help()
		out = append(out, fmt.Sprintf("  %-8s %s", h.Key, h.Desc))
	}
	return append(out, "", f.th.Dim.Render("  y, n and a act on the selected request of the Requests tab, on its host;"),
		f.th.Dim.Render("  the host decides, records it as fleet:"+safe(f.opts.Name)+" and answers."))
}

// window keeps sel visible in rows lines and returns the first index.
func (f *Fleet) window(n, rows int) int {
	if f.sel < f.off {
		f.off = f.sel
	}
	if f.sel >= f.off+rows {
		f.off = f.sel - rows + 1
	}
	f.off = max(min(f.off, n-rows), 0)
	return f.off
}

func (f *Fleet) hostsView(w, h int) []string {
	th := f.th
	out := []string{th.TableHead.Render(fit(fmt.Sprintf(" %-20s %-5s %-18s %7s %7s  %s", "HOST", "STATE", "HEARTBEAT", "RUNNING", "PENDING", "LAST CHECKPOINT"), w))}
	if len(f.hosts) == 0 {
		return append(out, th.Dim.Render(" no host has joined (on a host: warden serve --fleet URL --fleet-creds FILE --fleet-host NAME)"))
	}
	now := f.opts.Now()
	start := f.window(len(f.hosts), h-1)
	for i := start; i < len(f.hosts) && len(out) < h; i++ {
		hs := f.hosts[i]
		state, stStyle := "down", th.Denied
		if hs.Up {
			state, stStyle = "up", th.Approved
		}
		beat, running, cp := "never", "-", "-"
		if hb := hs.Heartbeat; hb != nil {
			beat = ShortDuration(now.Sub(hb.At)) + " ago"
			running = fmt.Sprint(hb.Running)
		}
		if c := hs.LastCheckpoint; c != nil {
			cp = fmt.Sprintf("seq %d, %s ago", c.Seq, ShortDuration(now.Sub(c.At)))
		}
		mark := " "
		if i == f.sel {
			mark = "▸"
		}
		line := fmt.Sprintf("%s%-20s ", mark, plain(safe(hs.Host), 20)) + stStyle.Render(fmt.Sprintf("%-5s", state)) +
			fmt.Sprintf(" %-18s %7s %7d  %s", beat, running, hs.Pending, cp)
		out = append(out, fit(line, w))
	}
	return out
}

func (f *Fleet) requestsView(w, h int) []string {
	th := f.th
	listH := max(h/2, 3)
	out := []string{th.Title.Render(fmt.Sprintf("Requests across the fleet · %d pending · %d decided", f.pend, len(f.reqs)-f.pend))}
	if len(f.reqs) == 0 {
		out = append(out, th.Dim.Render("no requests: a hook on any host asking the operator shows up here"))
		return out
	}
	now := f.opts.Now()
	rows := listH - 1
	start := f.window(len(f.reqs), rows)
	for i := start; i < len(f.reqs) && len(out) < listH; i++ {
		out = append(out, f.requestRow(f.reqs[i], i == f.sel, now, w))
	}
	for len(out) < listH {
		out = append(out, "")
	}
	out = append(out, th.Border.Render(strings.Repeat("─", w)))
	if f.sel < len(f.reqs) {
		out = append(out, f.requestDetail(f.reqs[f.sel], w, now)...)
	}
	return out
}

// hostBanner is the host name, large: a request's host is what an
// operator answering a fleet queue must never misread.
func (f *Fleet) hostBanner(host string) string {
	return lipgloss.NewStyle().Bold(true).Reverse(true).Padding(0, 2).Render(strings.ToUpper(safe(host)))
}

func (f *Fleet) requestRow(r fleet.FleetRequest, sel bool, now time.Time, w int) string {
	th := f.th
	state, st := "pending", th.Pending
	if d := r.Request.Decision; d != nil {
		state, st = d.Verdict+" by "+d.By, th.Approved
		if d.Verdict == engine.Deny {
			st = th.Denied
		}
	} else if !r.Request.Pending(now) {
		state, st = "expired", th.Denied
	}
	mark := " "
	if sel {
		mark = th.Selected.Render("▸")
	}
	host := lipgloss.NewStyle().Bold(true).Render(fmt.Sprintf("%-12s", plain(strings.ToUpper(safe(r.Host)), 12)))
	id := fmt.Sprintf(" #%-4d ", r.Request.ID)
	rest := fmt.Sprintf(" %5s  %s/%s  %s", ShortDuration(now.Sub(r.Request.Created)), r.Request.Requester.Module, r.Request.Requester.Hook, operationLine(r.Request))
	stateCell := st.Render(fmt.Sprintf("%-22s", plain(safe(state), 22)))
	used := 1 + 12 + textWidth(id) + 22
	return mark + host + id + stateCell + plain(rest, max(w-used, 1))
}

func (f *Fleet) requestDetail(r fleet.FleetRequest, w int, now time.Time) []string {
	th := f.th
	field := func(k, v string) string {
		return th.Dim.Render(fmt.Sprintf("%-10s ", k)) + plain(safe(v), max(w-11, 1))
	}
	out := []string{f.hostBanner(r.Host) + "  " + th.Title.Render(fmt.Sprintf("request %d", r.Request.ID))}
	q := r.Request
	out = append(out,
		field("asks", operationLine(q)),
		field("from", q.Requester.Module+"/"+q.Requester.Hook+" (run "+q.Requester.Run+")"),
		field("subject", q.Subject),
		field("created", q.Created.Local().Format("2006-01-02 15:04:05")+" ("+ShortDuration(now.Sub(q.Created))+" ago)"))
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

func (f *Fleet) runsView(w, h int) []string {
	th := f.th
	out := []string{th.TableHead.Render(fit(fmt.Sprintf(" %-12s %-24s %-24s %-10s %s", "HOST", "RUN", "HOOK", "STATUS", "STARTED"), w))}
	if len(f.runs) == 0 {
		return append(out, th.Dim.Render(" no runs yet"))
	}
	now := f.opts.Now()
	start := f.window(len(f.runs), h-1)
	for i := start; i < len(f.runs) && len(out) < h; i++ {
		r := f.runs[i]
		mark := " "
		if i == f.sel {
			mark = "▸"
		}
		out = append(out, fit(fmt.Sprintf("%s%-12s %-24s %-24s %-10s %s ago", mark, plain(strings.ToUpper(safe(r.Host)), 12), plain(safe(r.Run.ID), 24),
			plain(safe(r.Run.Module+"/"+r.Run.Hook), 24), plain(safe(r.Run.Status), 10), ShortDuration(now.Sub(r.Run.Started))), w))
	}
	return out
}
