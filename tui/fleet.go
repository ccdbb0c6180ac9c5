package tui

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/themes"
)

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
// (answered with the local console's keys), and Runs. Each tab is a pane
// of the console's pane contract (pane, paneBase): it moves with the
// console's KeyMap (navKey), shows its keys in the same help line and
// help screen, and draws with the Theme only. Fleet itself is the chrome
// around them, laid out as App's: header, tab bar, body, status, keys.
type Fleet struct {
	sh       *fleetShared
	keys     fleetKeys
	help     help.Model
	showHelp bool
	tab      int
	panes    [fleetTabCount]pane
	hosts    *fleetHostsPane
	requests *fleetRequestsPane
	runs     *fleetRunsPane

	width, height int
	pruned        time.Time // when the fleet last forgot what ended
}

// The fleet console's tabs.
const (
	fleetTabHosts = iota
	fleetTabRequests
	fleetTabRuns
	fleetTabCount
)

var fleetTabNames = [fleetTabCount]string{"Hosts", "Requests", "Runs"}

// fleetShared is what every fleet pane may use.
type fleetShared struct {
	src       engine.Fleet
	th        themes.Theme
	opts      FleetOptions
	status    string
	statusBad bool
}

func (s *fleetShared) now() time.Time { return s.opts.Now() }

// say shows a message in the status line; bad styles it as an error.
func (s *fleetShared) say(msg string, bad bool) { s.status, s.statusBad = msg, bad }

// fleetKeys work on every fleet tab (unless a prompt has the keyboard).
type fleetKeys struct {
	Hosts, Requests, Runs, Next, Prev key.Binding
	Help, Quit                        key.Binding
}

func newFleetKeys() fleetKeys {
	return fleetKeys{
		Hosts:    key.NewBinding(key.WithKeys("1"), key.WithHelp("1", "hosts")),
		Requests: key.NewBinding(key.WithKeys("2"), key.WithHelp("2", "requests")),
		Runs:     key.NewBinding(key.WithKeys("3"), key.WithHelp("3", "runs")),
		Next:     key.NewBinding(key.WithKeys("tab"), key.WithHelp("tab", "next tab")),
		Prev:     key.NewBinding(key.WithKeys("shift+tab"), key.WithHelp("shift+tab", "prev tab")),
		Help:     key.NewBinding(key.WithKeys("?"), key.WithHelp("?", "all keys")),
		Quit:     key.NewBinding(key.WithKeys("q", "ctrl+c"), key.WithHelp("q", "quit")),
	}
}

// tabs are the bindings that choose a tab, in tab order first.
func (k fleetKeys) tabs() []key.Binding {
	return []key.Binding{k.Hosts, k.Requests, k.Runs, k.Next, k.Prev}
}

// Messages of the fleet console.
type (
	fleetTickMsg  struct{}
	fleetHostsMsg struct {
		hs  []engine.FleetHost
		err error
	}
	fleetDecidedMsg struct {
		r   engine.FleetReply
		err error
		id  uint64
		on  string
	}
)

// maxQueueDecided is how many decided requests the queue keeps below
// the pending ones; maxFleetRuns is how many runs the Runs tab shows.
const (
	maxQueueDecided = 500
	maxFleetRuns    = 500
)

// NewFleet makes the fleet console over src.
func NewFleet(src engine.Fleet, opts FleetOptions) *Fleet {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Theme.Name == "" {
		opts.Theme, _ = themes.ByName("")
	}
	if opts.Refresh <= 0 {
		opts.Refresh = time.Second
	}
	sh := &fleetShared{src: src, th: opts.Theme, opts: opts}
	f := &Fleet{sh: sh, keys: newFleetKeys(), help: help.New(), tab: fleetTabRequests, width: 100, height: 30}
	f.hosts = newFleetHostsPane(sh)
	f.requests = newFleetRequestsPane(sh)
	f.runs = newFleetRunsPane(sh)
	f.panes = [fleetTabCount]pane{f.hosts, f.requests, f.runs}
	f.requests.refold()
	f.runs.refold()
	th := sh.th
	f.help.Styles = help.Styles{
		Ellipsis: th.HelpSep, ShortKey: th.HelpKey, ShortDesc: th.HelpDesc, ShortSeparator: th.HelpSep,
		FullKey: th.HelpKey, FullDesc: th.HelpDesc, FullSeparator: th.HelpSep,
	}
	f.layout()
	return f
}

// Init starts the refresh clock and reads the hosts.
func (f *Fleet) Init() tea.Cmd { return tea.Batch(f.tick(), f.loadHosts()) }

func (f *Fleet) tick() tea.Cmd {
	return tea.Tick(f.sh.opts.Refresh, func(time.Time) tea.Msg { return fleetTickMsg{} })
}

func (f *Fleet) loadHosts() tea.Cmd {
	src := f.sh.src
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs, err := src.Hosts(ctx)
		return fleetHostsMsg{hs, err}
	}
}

// Update handles a message.
func (f *Fleet) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		f.width, f.height = clampSize(msg.Width, msg.Height)
		f.layout()
		return f, nil
	case fleetTickMsg:
		if now := f.sh.now(); now.Sub(f.pruned) > time.Minute {
			f.pruned = now
			f.sh.src.Forget(now)
		}
		f.requests.refold()
		f.runs.refold()
		return f, tea.Batch(f.tick(), f.loadHosts())
	case tea.KeyMsg:
		if msg.Type == tea.KeyRunes && len(msg.Runes) > 1 && !msg.Paste {
			// Keys typed faster than one read are keys of their own, as
			// on the local console (App.Update).
			cmds := make([]tea.Cmd, 0, len(msg.Runes))
			for _, r := range msg.Runes {
				cmds = append(cmds, f.key(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}, Alt: msg.Alt}))
			}
			return f, tea.Batch(cmds...)
		}
		return f, f.key(msg)
	}
	// Anything else (a pane's own async result) goes to every pane.
	cmds := make([]tea.Cmd, 0, len(f.panes))
	for _, p := range f.panes {
		cmds = append(cmds, p.update(msg))
	}
	return f, tea.Batch(cmds...)
}

func (f *Fleet) key(msg tea.KeyMsg) tea.Cmd {
	if msg.String() == "ctrl+c" {
		return tea.Quit
	}
	if f.showHelp {
		// Any key closes help, q included, as on the local console.
		f.showHelp = false
		return nil
	}
	p := f.panes[f.tab]
	if !p.capturing() {
		switch {
		case key.Matches(msg, f.keys.Quit):
			return tea.Quit
		case key.Matches(msg, f.keys.Help):
			f.showHelp = true
			return nil
		case key.Matches(msg, f.keys.Next):
			f.setTab((f.tab + 1) % fleetTabCount)
			return nil
		case key.Matches(msg, f.keys.Prev):
			f.setTab((f.tab + fleetTabCount - 1) % fleetTabCount)
			return nil
		}
		for i, b := range f.keys.tabs()[:fleetTabCount] {
			if key.Matches(msg, b) {
				f.setTab(i)
				return nil
			}
		}
	}
	return p.update(msg)
}

func (f *Fleet) setTab(t int) {
	f.tab = t
	f.layout()
}

// Layout: header, tab bar, body, status line, help line (as App's).
func (f *Fleet) bodySize() (int, int) { return max(f.width, 20), max(f.height-chrome, 3) }

func (f *Fleet) layout() {
	w, h := f.bodySize()
	f.help.Width = w
	f.panes[f.tab].resize(w, h)
}

// View draws the console.
func (f *Fleet) View() string {
	w, h := f.bodySize()
	body := ""
	if f.showHelp {
		body = f.fullHelp(w, h)
	} else {
		body = f.panes[f.tab].view(w, h)
	}
	return strings.Join([]string{f.header(w), f.tabBar(w), body, f.statusLine(w), f.helpLine(w)}, "\n")
}

func (f *Fleet) header(w int) string {
	th := f.sh.th
	sep := th.Dim.Render(" │ ")
	up := 0
	for _, hs := range f.hosts.hosts {
		if hs.Up {
			up++
		}
	}
	pend := th.HeaderVal.Render("0 pending")
	if n := f.requests.pend; n > 0 {
		pend = th.Pending.Render(fmt.Sprintf("%d pending", n))
	}
	return fit(th.Brand.Render("warden fleet")+sep+th.HeaderKey.Render("as ")+th.HeaderVal.Render(safe(f.sh.opts.Role+" "+f.sh.opts.Name))+
		sep+th.HeaderVal.Render(fmt.Sprintf("%d/%d hosts up", up, len(f.hosts.hosts)))+sep+pend, w)
}

func (f *Fleet) tabBar(w int) string {
	th := f.sh.th
	var b strings.Builder
	for i, name := range fleetTabNames {
		label := fmt.Sprintf("%d %s", i+1, name)
		if n := f.requests.pend; i == fleetTabRequests && n > 0 {
			label += " " + th.Badge.Render(fmt.Sprintf(" %d ", n))
		}
		st := th.Tab
		if i == f.tab {
			st = th.TabActive
		}
		b.WriteString(st.Render(label))
		if i < fleetTabCount-1 {
			b.WriteString(th.Dim.Render("│"))
		}
	}
	return fit(b.String(), w)
}

func (f *Fleet) statusLine(w int) string {
	th := f.sh.th
	if s := f.panes[f.tab].prompt(); s != "" && !f.showHelp {
		return fit(s, w)
	}
	st := th.StatusOK
	if f.sh.statusBad {
		st = th.StatusErr
	}
	if f.sh.status == "" {
		return fit("", w)
	}
	return fit(st.Render(plain(f.sh.status, w)), w)
}

func (f *Fleet) helpLine(w int) string {
	p := f.panes[f.tab]
	short := append([]key.Binding(nil), p.keys().short...)
	if !p.capturing() {
		short = append(short, f.keys.Help, f.keys.Quit)
	}
	return fit(f.help.ShortHelpView(short), w)
}

// fullHelp lists every key of the tab shown, then the fleet's own, and
// what a decision does.
func (f *Fleet) fullHelp(w, h int) string {
	th := f.sh.th
	groups := append(append([][]key.Binding(nil), f.panes[f.tab].keys().full...), f.keys.tabs(), []key.Binding{f.keys.Help, f.keys.Quit})
	lines := []string{th.Title.Render("Keys: "+fleetTabNames[f.tab]) + th.Dim.Render("  (any key closes, q too)")}
	for _, row := range packHelp(f.help, groups, w) {
		lines = append(lines, strings.Split(row, "\n")...)
	}
	lines = append(lines, "", th.Dim.Render("y, n and a act on the selected request of the Requests tab, on its host;"),
		th.Dim.Render("the host decides, records it as fleet:"+safe(f.sh.opts.Name)+" and answers."))
	return fleetBody(lines, w, h)
}

// fleetBody is lines as a body of exactly h lines of w cells.
func fleetBody(lines []string, w, h int) string {
	for len(lines) < h {
		lines = append(lines, "")
	}
	lines = lines[:h]
	for i := range lines {
		lines[i] = fit(lines[i], w)
	}
	return strings.Join(lines, "\n")
}
