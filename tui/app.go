// Package tui is warden's console: a Bubble Tea program over the engine
// facade. It talks to the engine only (never to storage) and draws with
// the styles of a themes.Theme (no colour literals here).
package tui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/themes"
)

// Options configure the console.
type Options struct {
	Theme themes.Theme
	// Actor is who the console's decisions and runs are recorded as
	// (default engine.LocalActor()).
	Actor engine.Actor
	// Jail is the jail mode of runs started here: "" (bubblewrap) or
	// engine.JailOff, which the header then shouts about.
	Jail string
	// Bell rings the terminal when a request arrives (default: write BEL
	// to stdout). Tests count rings.
	Bell func()
	// Now is the clock (tests fix it).
	Now func() time.Time
	// NoAttach leaves the engine without an attached operator (a viewer).
	NoAttach bool
	// Viewer: this console may look but not decide (an SSH viewer key);
	// it shows no decision hints.
	Viewer bool
	// Role is the role the header shows next to who you are ("operator",
	// "viewer"; "" for the local console).
	Role string
	// ActorName names an actor (an SSH key's comment in the operators
	// file), or "". Actors are shown as that name next to a short
	// fingerprint.
	ActorName func(engine.Actor) string
	// AttachedPID is the process serving the engine when the console is
	// attached to another warden's engine (the header says so); 0 when
	// the engine is this process's own.
	AttachedPID int
	// MakeTheme builds a theme by name for :theme (default
	// themes.ByName); an SSH session builds it for its own renderer.
	MakeTheme func(name string) (themes.Theme, error)
	// OnTheme, when set, is told the theme the operator chose with
	// :theme (an SSH session remembers it for the key).
	OnTheme func(name string)
	// Copy writes an OSC 52 clipboard sequence to the terminal: an SSH
	// session writes it to its channel. Unset (the local console), c goes
	// to the console's own terminal, through tmux or screen when it runs
	// in one (clipboard.go).
	Copy func(seq string)
	// CopyNote, when set, follows "copied …" in the status line: what the
	// operator's terminal needs for the copy to arrive (an SSH client in
	// tmux: ForTerminal's note).
	CopyNote string
	// clip, in tests, stands for the local console's environment, tmux
	// and terminal (default: os.Getenv, tmux on PATH, stdout).
	clip *localClipboard
	// NoPager refuses o (an SSH session: a pager would run on the
	// server).
	NoPager bool
	// Takeover, when set, opens the data dir after the serving process
	// went away: it returns the new engine (and the pid serving it, if
	// another console got there first). The console closes what it
	// returns.
	Takeover func() (e engine.Facade, attachedPID int, err error)
}

// Tabs.
const (
	tabStreams = iota
	tabRequests
	tabReceipts
	tabModules
	tabHands
	tabCount
)

var tabNames = [tabCount]string{"Streams", "Requests", "Receipts", "Modules", "Hands"}

// shared is what every pane may use.
type shared struct {
	e        engine.Facade
	th       themes.Theme
	opts     Options
	status   string
	statusOK bool
	statusAt time.Time
	// ctx ends when the console closes: work it started stops with it.
	ctx context.Context
	// messages is every status message of the session, in full (the
	// status line cuts them to its width): :messages shows them.
	messages []message
	// jail is the backend runs started here get ("" when none can run).
	jail string
}

// message is one status message, kept for :messages.
type message struct {
	at   time.Time
	text string
	err  bool
}

// maxMessages bounds the messages a session keeps.
const maxMessages = 500

func (s *shared) now() time.Time { return s.opts.Now() }

// context is the console's life (Background when unset, in tests).
func (s *shared) context() context.Context {
	if s.ctx == nil {
		return context.Background()
	}
	return s.ctx
}

// setStatus shows a message in the status line; isErr styles it as one.
func (s *shared) setStatus(msg string, isErr bool) {
	s.status, s.statusOK, s.statusAt = msg, !isErr, s.now()
	if msg == "" {
		return
	}
	if n := len(s.messages); n > 0 && s.messages[n-1].text == msg {
		return // a progress line said again
	}
	s.messages = append(s.messages, message{at: s.statusAt, text: msg, err: isErr})
	if len(s.messages) > maxMessages {
		s.messages = append([]message(nil), s.messages[len(s.messages)-maxMessages/2:]...)
	}
}

// errStatus shows an error on one line; the message log keeps it whole
// (the status line cuts it to the width).
func (s *shared) errStatus(err error) {
	s.status, s.statusOK, s.statusAt = OneLine(err.Error()), false, s.now()
	s.note(err.Error(), true)
}

// pane is one tab: everything the app calls on it. A pane embeds
// paneBase for the calls it has no use for. It talks back to the app only
// with messages (jumpToRunMsg, openOverlayMsg), returned as commands.
type pane interface {
	update(msg tea.Msg) tea.Cmd
	view(w, h int) string
	// keys is what the help footer shows.
	keys() keyMap
	// capturing is true while a prompt or a form has the keyboard: the
	// app's own keys (tabs, help, q) then go to the pane.
	capturing() bool
	// prompt is the prompt line the status line shows ("" for none).
	prompt() string
	// wantsCtrlC is true while the pane runs something it must wind
	// down (a hands init): ctrl+c then asks whether to cancel it instead
	// of quitting the console under it.
	wantsCtrlC() bool
	// resize tells the pane the size of the body.
	resize(w, h int)
}

// paneBase is the no-op half of pane, for panes to embed.
type paneBase struct{}

func (paneBase) wantsCtrlC() bool { return false }
func (paneBase) resize(w, h int)  {}

// Messages panes send the app.
type (
	// jumpToRunMsg shows a run's stream on the Streams tab.
	jumpToRunMsg struct{ run string }
	// openOverlayMsg shows an overlay over the frame.
	openOverlayMsg struct{ ov *overlay }
)

func jumpToRun(run string) tea.Cmd { return func() tea.Msg { return jumpToRunMsg{run} } }

func openOverlay(o *overlay) tea.Cmd { return func() tea.Msg { return openOverlayMsg{o} } }

// Messages.
type (
	eventsMsg    struct{ evs []engine.Event }
	subClosedMsg struct{ err error }
	takeoverMsg  struct {
		e   engine.Facade
		pid int
		err error
	}
	tickMsg      time.Time
	toastDoneMsg struct{ id int }
	// quitNowMsg: the operator confirmed quitting.
	quitNowMsg struct{}
)

// App is the console's root model.
type App struct {
	clip   localClipboard // where c goes on the local console (clipboard.go)
	sh     *shared
	sub    *engine.Subscription
	ctx    context.Context
	cancel context.CancelFunc
	detach func()

	width, height int
	tab           int
	panes         [tabCount]pane
	streams       *streamsPane
	requests      *requestsPane
	receipts      *receiptsPane
	modules       *modulesPane
	hands         *handsPane

	keys     globalKeys
	cmd      cmdline // the : command line
	trail    []crumb // where enter drilled down from (esc goes back)
	help     help.Model
	showHelp bool
	overlay  *overlay
	// confirm is the yes/no question open (it has the keyboard).
	confirm *confirmation

	toast    string
	toastID  int
	toastReq uint64 // the request the toast announces
	// jailName is the backend runs get here (Facade.JailBackend), or
	// jailErr why none can run.
	jailName string
	jailErr  string
	// limitsErr: jailed runs' memory, pids and cpu limits cannot be
	// enforced by a cgroup here (rlimits only); the header says so.
	limitsErr string
	tabX      [tabCount][2]int // each tab's cells on the tab bar
	closed    bool
	// eventMsgs counts event messages (tests check lines are batched).
	eventMsgs int
	// attachedPID is the process serving the engine (0: this one). When
	// it stops serving, exactly one of two things is set until the data
	// dir is ours or the operator quits: gone, if it died (the operator
	// is told and decides), or stopped, if it let go on purpose (the
	// console takes over by itself and never shows a crash).
	attachedPID int
	gone        error
	stopped     error
	takingOver  bool
	owned       []engine.Facade // engines opened by a takeover, closed by Close

	// mcpClients is how many MCP clients are connected (header count);
	// mcpGen tells the current count's read from stale ones.
	mcpClients int
	mcpGen     uint64

	// quitChecking: q asked the engine which runs a quit would cancel;
	// heldKeys are the keys typed since, for when it answers, or typed
	// while the shown pane's first read is out (see holdingKeys).
	quitChecking bool
	heldKeys     []tea.KeyMsg
}

// holdingKeys: keys wait, in order, while a quit is being checked or the
// shown pane's first read is out, so that keys typed together ("3c",
// "q y") act on what they were typed for.
func (a *App) holdingKeys() bool {
	switch {
	case a.quitChecking:
		return true
	case a.tab == tabReceipts:
		return a.receipts.loading && len(a.receipts.rs) == 0
	case a.tab == tabRequests:
		return a.requests.firstOut
	}
	return false
}

// replayHeld gives the held keys their turn, once nothing holds them.
func (a *App) replayHeld() tea.Cmd {
	if a.holdingKeys() {
		return nil
	}
	held := a.heldKeys
	a.heldKeys = nil
	cmds := make([]tea.Cmd, 0, len(held))
	for _, k := range held {
		cmds = append(cmds, a.key(k))
	}
	return tea.Batch(cmds...)
}

// New makes the console for an open engine. It subscribes to events and
// attaches as an operator at once; Close lets go of both.
func New(e engine.Facade, opts Options) *App {
	if opts.Actor == "" {
		opts.Actor = engine.LocalActor()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Bell == nil {
		opts.Bell = func() { io.WriteString(os.Stdout, "\a") }
	}
	if opts.Theme.Name == "" {
		opts.Theme, _ = themes.ByName("")
	}
	sh := &shared{e: e, th: opts.Theme, opts: opts}
	a := &App{sh: sh, keys: newGlobalKeys(), width: 80, height: 24, attachedPID: opts.AttachedPID, clip: defaultClipboard()}
	if opts.clip != nil {
		a.clip = *opts.clip
	}
	// Subscribe before the first reads: nothing that happens between is lost.
	a.sub = e.Subscribe()
	a.ctx, a.cancel = context.WithCancel(context.Background())
	sh.ctx = a.ctx
	if !opts.NoAttach {
		a.detach = e.AttachOperator()
	}
	if opts.Jail != engine.JailOff {
		var err error
		a.jailName, err = e.JailBackend(opts.Jail)
		sh.jail = a.jailName
		if err != nil {
			a.jailErr = err.Error()
		} else if err := e.LimitsReady(); err != nil {
			a.limitsErr = err.Error()
		}
	}
	a.streams = newStreamsPane(sh)
	a.requests = newRequestsPane(sh)
	a.receipts = newReceiptsPane(sh)
	a.modules = newModulesPane(sh)
	a.hands = newHandsPane(sh)
	a.panes = [tabCount]pane{a.streams, a.requests, a.receipts, a.modules, a.hands}
	a.streams.pendingFor = a.requests.oldestPendingFor
	a.reload()
	a.help = help.New()
	a.cmd = newCmdline()
	a.applyThemeStyles()
	a.layout()
	return a
}

// applyThemeStyles styles the help line with the theme.
func (a *App) applyThemeStyles() {
	th := a.sh.th
	a.help.Styles = help.Styles{
		Ellipsis: th.HelpSep, ShortKey: th.HelpKey, ShortDesc: th.HelpDesc, ShortSeparator: th.HelpSep,
		FullKey: th.HelpKey, FullDesc: th.HelpDesc, FullSeparator: th.HelpSep,
	}
}

// reload reads everything from storage in place: New does it, before
// the program runs.
func (a *App) reload() {
	if ss, err := a.sh.e.MCPSessions(); err == nil {
		a.mcpClients = len(ss)
	}
	a.streams.reload()
	a.requests.reload()
	// The receipts pane reads nothing until it is first shown.
	a.modules.reload(a.streams.runs)
	a.hands.reload()
}

// refresh re-reads everything off the UI goroutine (after missed
// events, a take-over); each pane shows its part as it lands.
func (a *App) refresh() tea.Cmd {
	return tea.Batch(a.countMCP(), a.streams.refresh(), a.requests.refresh(), a.receipts.reload(),
		a.modules.refresh(nil), a.hands.refresh(""))
}

// mcpCountMsg is how many MCP clients are connected.
type mcpCountMsg struct {
	gen uint64
	n   int
	err error
}

// countMCP re-reads how many MCP clients are connected (`warden mcp
// serve` sessions), for the header.
func (a *App) countMCP() tea.Cmd {
	a.mcpGen++
	gen, e := a.mcpGen, a.sh.e
	return func() tea.Msg {
		ss, err := e.MCPSessions()
		return mcpCountMsg{gen: gen, n: len(ss), err: err}
	}
}

// Close detaches the operator and ends the subscription.
func (a *App) Close() {
	if a.closed {
		return
	}
	a.closed = true
	a.cancel()
	// A hands init cancelled by this still stops its container and
	// writes its evidence: let it.
	a.hands.wait(90 * time.Second)
	a.sub.Close()
	if a.detach != nil {
		a.detach()
	}
	for _, e := range a.owned {
		e.Close()
	}
}

// Init starts waiting for events and the clock.
func (a *App) Init() tea.Cmd {
	// New read what is shown in place; what the run shown's title
	// needs beyond it is read now, off the UI goroutine.
	return tea.Batch(a.waitEvents(), tick(), a.streams.lookUpDests(a.streams.want))
}

func tick() tea.Cmd {
	return tea.Tick(time.Second, func(t time.Time) tea.Msg { return tickMsg(t) })
}

// frame is how long the event reader gathers events into one message.
const frame = 16 * time.Millisecond

// waitEvents waits for the next event, then gathers whatever else arrives
// within a frame into one message: a flood of lines costs one update (and
// one redraw) per frame, never one per line.
func (a *App) waitEvents() tea.Cmd {
	sub, ctx := a.sub, a.ctx
	return func() tea.Msg {
		ev, err := sub.Next(ctx)
		if err != nil {
			return subClosedMsg{err}
		}
		evs := []engine.Event{ev}
		deadline := time.Now().Add(frame)
		for len(evs) < 4096 {
			if sub.Pending() == 0 {
				if time.Now().After(deadline) || ev.Kind != engine.EventLines {
					break
				}
				wait, stop := context.WithDeadline(ctx, deadline)
				next, err := sub.Next(wait)
				stop()
				if err != nil {
					break
				}
				evs = append(evs, next)
				continue
			}
			next, err := sub.Next(ctx)
			if err != nil {
				break
			}
			evs = append(evs, next)
		}
		return eventsMsg{evs}
	}
}

// Update handles a message.
func (a *App) Update(msg tea.Msg) (_ tea.Model, cmd tea.Cmd) {
	if _, isKey := msg.(tea.KeyMsg); !isKey && len(a.heldKeys) > 0 {
		defer func() { cmd = tea.Batch(cmd, a.replayHeld()) }()
	}
	var cmds []tea.Cmd
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		a.width, a.height = clampSize(msg.Width, msg.Height)
		a.layout()
		return a, nil
	case eventsMsg:
		a.eventMsgs++
		cmds = append(cmds, a.handleEvents(msg.evs), a.waitEvents())
		return a, tea.Batch(cmds...)
	case subClosedMsg:
		var gone *engine.EngineGoneError
		switch {
		case a.closed || !errors.As(msg.err, &gone):
		case gone.Closed && a.sh.opts.Takeover != nil:
			// It let go on purpose (a command that finished, a stopped
			// serve): carry on without bothering the operator, and
			// without ever drawing it as a crash.
			a.stopped = msg.err
			return a, a.takeover()
		default:
			a.engineGone(msg.err)
		}
		return a, nil
	case takeoverMsg:
		return a, a.tookOver(msg)
	case copiedMsg:
		a.copied(msg)
		return a, nil
	case jumpToRunMsg:
		a.setTab(tabStreams)
		return a, a.streams.show(msg.run)
	case openOverlayMsg:
		a.overlay = msg.ov
		return a, nil
	case askMsg:
		a.confirm = msg.c
		return a, nil
	case quitNowMsg:
		return a, a.quit()
	case quitCheckedMsg:
		return a, a.quitChecked(msg)
	case recheckQuitMsg:
		return a, a.checkQuit(msg.going, msg.tries)
	case mcpCountMsg:
		if msg.gen == a.mcpGen && msg.err == nil {
			a.mcpClients = msg.n
		}
		return a, nil
	case drillMsg:
		return a, a.drillTo(msg)
	case pagerDoneMsg:
		if msg.err != nil {
			a.sh.setStatus("the pager failed: "+OneLine(msg.err.Error())+" (set $PAGER to one that works)", true)
		}
		return a, nil
	case tickMsg:
		if a.sh.status != "" && a.sh.now().Sub(a.sh.statusAt) > 10*time.Second {
			a.sh.status = ""
		}
		if a.tab == tabHands && a.sh.now().Sub(a.hands.liveAt) > liveEvery {
			// The Hands tab shows live state: re-read it while shown.
			return a, tea.Batch(tick(), a.hands.refreshLive())
		}
		return a, tick()
	case toastDoneMsg:
		if msg.id == a.toastID {
			a.toast = ""
		}
		return a, nil
	case tea.MouseMsg:
		return a, a.mouse(msg)
	case tea.KeyMsg:
		if msg.Type == tea.KeyRunes && len(msg.Runes) > 1 && !msg.Paste {
			// Keys typed faster than one read (over SSH, or a terminal
			// that batches) arrive as one message of several runes. Each
			// is a key of its own: ":theme" opens the command line and
			// then types "theme" into it, it does not fall through as a
			// key nothing binds.
			cmds := make([]tea.Cmd, 0, len(msg.Runes))
			for _, r := range msg.Runes {
				cmds = append(cmds, a.key(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}, Alt: msg.Alt}))
			}
			return a, tea.Batch(cmds...)
		}
		return a, a.key(msg)
	}
	// Anything else (a pane's own async result) goes to every pane.
	for _, p := range a.panes {
		cmds = append(cmds, p.update(msg))
	}
	return a, tea.Batch(cmds...)
}

func (a *App) key(msg tea.KeyMsg) tea.Cmd {
	if a.holdingKeys() {
		if msg.String() == "ctrl+c" && slices.ContainsFunc(a.heldKeys, func(k tea.KeyMsg) bool { return k.String() == "ctrl+c" }) {
			return a.quit() // twice, and the engine has not answered: the operator means it
		}
		a.heldKeys = append(a.heldKeys, msg)
		return nil
	}
	if a.gone != nil && msg.String() == "t" && !a.takingOver {
		return a.takeover()
	}
	if a.confirm != nil {
		c := a.confirm
		if msg.String() == "ctrl+c" && c.quitting {
			// ctrl+c twice: the operator means it.
			return a.quit()
		}
		cmd := c.answer(msg)
		a.confirm = nil
		if cmd == nil {
			a.sh.setStatus("nothing done", false)
		}
		return cmd
	}
	if msg.String() == "ctrl+c" {
		// A pane running something it must wind down (a hands init)
		// takes ctrl+c to ask whether to cancel it, instead of quitting
		// the console under it.
		if !a.panes[a.tab].wantsCtrlC() || a.overlay != nil {
			return a.askQuit()
		}
	}
	if a.overlay != nil {
		if key.Matches(msg, a.keys.Quit) {
			return a.askQuit()
		}
		if a.overlay.Update(msg) {
			a.overlay = nil
		}
		return nil
	}
	if a.showHelp {
		// Any key closes help, q and esc included: q here never quits
		// the console under the operator reading about it.
		a.showHelp = false
		return nil
	}
	if a.cmd.in.Active() {
		return a.cmdlineKey(msg)
	}
	p := a.panes[a.tab]
	if !p.capturing() {
		switch {
		case key.Matches(msg, a.keys.Command):
			return a.openCmdline()
		case key.Matches(msg, a.keys.Back) && len(a.trail) > 0:
			a.back()
			return nil
		case key.Matches(msg, a.keys.Copy):
			return a.copySelected()
		case key.Matches(msg, a.keys.Pager):
			return a.openPager()
		case key.Matches(msg, a.keys.Quit):
			return a.askQuit()
		case key.Matches(msg, a.keys.Help):
			a.showHelp = true
			return nil
		case key.Matches(msg, a.keys.Messages):
			a.OpenMessages()
			return nil
		case key.Matches(msg, a.keys.Tab2):
			// 2 lands on the request that needs an answer: the oldest
			// pending one, whatever was selected before.
			show := a.setTab(tabRequests)
			if a.requests.selectOldestPending() {
				a.sh.setStatus(a.requests.clearedNote(), false)
			}
			return show
		case key.Matches(msg, a.keys.Next):
			return a.setTab((a.tab + 1) % tabCount)
		case key.Matches(msg, a.keys.Prev):
			return a.setTab((a.tab + tabCount - 1) % tabCount)
		}
		for i, b := range a.keys.tabs()[:tabCount] {
			if key.Matches(msg, b) {
				return a.setTab(i)
			}
		}
	}
	return p.update(msg)
}

// quit closes the console and ends the program.
func (a *App) quit() tea.Cmd {
	a.Close()
	return tea.Quit
}

// askQuit quits at once when nothing would be lost, and asks first when
// runs this console's engine is running would be cancelled by it (a
// console attached to another warden's engine leaves its runs alone).
//
// Whether they are still going is the engine's word, not the list's (the
// event that a run ended may not have been drawn yet), asked off the UI
// goroutine. Keys typed meanwhile wait for the answer, so a y typed
// right after q answers the question; ctrl+c twice quits at once.
func (a *App) askQuit() tea.Cmd {
	if a.attachedPID != 0 || a.gone != nil {
		return a.quit()
	}
	going := a.streams.runningRuns()
	if len(going) == 0 {
		return a.quit()
	}
	a.quitChecking = true
	return a.checkQuit(going, 0)
}

// quitHearing bounds how many frames a quit waits to hear that runs the
// engine says ended did end, so that the last frame drawn is true.
const quitHearing = 30

// checkQuit asks the engine which of going still run.
func (a *App) checkQuit(going []engine.RunRecord, tries int) tea.Cmd {
	e := a.sh.e
	return func() tea.Msg {
		var runs []engine.RunRecord
		for _, r := range going {
			if now, err := e.Run(r.ID); err != nil || now.Status == engine.RunRunning {
				runs = append(runs, r)
			}
		}
		return quitCheckedMsg{runs: runs, tries: tries}
	}
}

// quitCheckedMsg: the runs a quit would cancel, as the engine says.
type quitCheckedMsg struct {
	runs  []engine.RunRecord
	tries int
}

// recheckQuitMsg: a frame has passed; ask the engine again. (The tick
// only waits: the engine is asked by a command of its own.)
type recheckQuitMsg struct {
	going []engine.RunRecord
	tries int
}

// quitChecked quits, or asks first about the runs still going; then the
// keys typed meanwhile act.
func (a *App) quitChecked(m quitCheckedMsg) tea.Cmd {
	if !a.quitChecking {
		return nil // quit already (ctrl+c)
	}
	if len(m.runs) == 0 {
		if going := a.streams.runningRuns(); len(going) > 0 && m.tries < quitHearing {
			// Ended, the engine says, but the events saying so are not
			// drawn yet: a frame more for them.
			return tea.Tick(frame, func(time.Time) tea.Msg { return recheckQuitMsg{going: going, tries: m.tries + 1} })
		}
		return a.quit()
	}
	a.quitChecking = false
	a.confirm = a.quitQuestion(m.runs)
	return a.replayHeld()
}

// quitQuestion asks whether to quit and cancel runs.
func (a *App) quitQuestion(runs []engine.RunRecord) *confirmation {
	names := make([]string, 0, 3)
	for i, r := range runs {
		if i == 3 {
			names = append(names, fmt.Sprintf("and %d more", len(runs)-3))
			break
		}
		names = append(names, safe(r.Module+"/"+r.Hook))
	}
	what := "1 run"
	if len(runs) > 1 {
		what = fmt.Sprintf("%d runs", len(runs))
	}
	e, actor := a.sh.e, a.sh.opts.Actor
	// Yes cancels them as the operator's own act first (each run's
	// record then says who: "cancelled by local:root"), rather than
	// leaving them to the engine's close ("the engine is shutting down").
	yes := func() tea.Msg {
		for _, r := range runs {
			e.CancelRun(actor, r.ID)
		}
		return quitNowMsg{}
	}
	return &confirmation{question: fmt.Sprintf("quit and cancel %s (%s)?", what, strings.Join(names, ", ")),
		detail: "they are going in this console's engine", yes: yes, quitting: true}
}

// setTab shows tab t. A tab chosen by hand starts a new trail. The
// command is the tab's first read, when it has not been shown before.
func (a *App) setTab(t int) tea.Cmd {
	a.tab = t
	var cmd tea.Cmd
	switch t {
	case tabRequests:
		cmd = a.requests.show()
	case tabReceipts:
		cmd = a.receipts.show()
	}
	a.trail = nil
	a.layout()
	return cmd
}

func (a *App) mouse(msg tea.MouseMsg) tea.Cmd {
	if a.confirm != nil {
		return nil // a question is open: it is answered with keys
	}
	if a.overlay != nil {
		a.overlay.Update(msg)
		return nil
	}
	if msg.Y == 1 && msg.Action == tea.MouseActionPress && msg.Button == tea.MouseButtonLeft {
		for i, r := range a.tabX {
			if msg.X >= r[0] && msg.X < r[1] {
				return a.setTab(i)
			}
		}
		return nil
	}
	// Body coordinates for the pane.
	msg.Y -= bodyTop
	return a.panes[a.tab].update(msg)
}

// Layout: header, tab bar, body, status line, help line.
const (
	bodyTop = 2
	chrome  = 4
)

func (a *App) bodySize() (int, int) { return max(a.width, 20), max(a.height-chrome, 3) }

func (a *App) layout() {
	w, h := a.bodySize()
	a.help.Width = w
	a.panes[a.tab].resize(w, h)
}

// handleEvents applies a batch of engine events.
func (a *App) handleEvents(evs []engine.Event) tea.Cmd {
	var cmds []tea.Cmd
	refreshModules, refreshHands := false, false
	for _, ev := range evs {
		switch ev.Kind {
		case engine.EventMissed:
			cmds = append(cmds, a.refresh())
			a.sh.setStatus(fmt.Sprintf("caught up from storage (missed %d events)", ev.Missed), false)
		case engine.EventLines:
			cmds = append(cmds, a.streams.lines(ev.Lines))
		case engine.EventRun:
			cmds = append(cmds, a.streams.runEvent(*ev.Run))
			a.modules.runEvent(*ev.Run)
		case engine.EventReceipt:
			a.receipts.add(*ev.Receipt)
			a.streams.receipt(*ev.Receipt)
			// Modules and Hands are views over these: a module added or
			// removed, a hands phase written, by this console or any
			// other warden on the data dir.
			switch kind := ev.Receipt.Kind; {
			case strings.HasPrefix(kind, engine.KindFamilyModule):
				refreshModules = true
			case strings.HasPrefix(kind, engine.KindFamilyHands):
				refreshHands = true
			case kind == engine.KindMCPConnect || kind == engine.KindMCPDisconnect:
				cmds = append(cmds, a.countMCP())
			}
		case engine.EventRequest:
			if a.requests.upsert(*ev.Request) {
				cmds = append(cmds, a.ring(*ev.Request))
			} else if ev.Request.Decision != nil && ev.Request.ID == a.toastReq {
				a.toast = "" // answered: the announcement is stale
			}
		}
	}
	if refreshModules {
		cmds = append(cmds, a.modules.refresh(nil))
	}
	if refreshHands {
		cmds = append(cmds, a.hands.refresh(""))
	}
	return tea.Batch(cmds...)
}

// ring announces a new request whichever tab is open.
func (a *App) ring(r engine.Request) tea.Cmd {
	a.sh.opts.Bell()
	a.toastID++
	id := a.toastID
	a.toastReq = r.ID
	// What to do comes first, so that a narrow line cuts the detail,
	// never the instruction.
	what := "press 2 to answer"
	if a.sh.opts.Viewer {
		what = "press 2 to see" // a viewer does not decide
	}
	if n := a.requests.pending(); n > 1 {
		what += fmt.Sprintf(" (%d pending)", n)
	}
	a.toast = fmt.Sprintf("🔔 request %d · %s · %s/%s: %s", r.ID, what, r.Requester.Module, r.Requester.Hook, OneLine(operationLine(r)))
	a.sh.note(a.toast, false)
	return tea.Tick(8*time.Second, func(time.Time) tea.Msg { return toastDoneMsg{id} })
}

// engineGone: the process serving an attached console went away. Nothing
// shown is lost (storage is the truth); the operator may take over the
// data dir or quit.
func (a *App) engineGone(err error) {
	a.gone, a.stopped = err, nil
	a.overlay = textOverlay(a.sh, "The engine went away", fmt.Sprintf(
		"%v.\n\nNothing is lost: runs, requests and receipts are in the data dir. "+
			"Runs that process was running were cancelled or failed with it; their receipts say which.\n\n"+
			"  t  take over the data dir: this console opens it and serves other warden commands\n"+
			"  q  quit", err))
	a.sh.setStatus("the engine went away: t takes over the data dir, q quits", true)
}

// takeover opens the data dir (Options.Takeover) off the update loop.
func (a *App) takeover() tea.Cmd {
	if a.sh.opts.Takeover == nil {
		a.sh.setStatus("this console cannot take over the data dir; quit (q) and start warden again", true)
		return nil
	}
	a.takingOver = true
	a.sh.setStatus("taking over the data dir…", false)
	open := a.sh.opts.Takeover
	return func() tea.Msg {
		e, pid, err := open()
		return takeoverMsg{e: e, pid: pid, err: err}
	}
}

// tookOver switches every pane to the new engine and re-reads it all.
func (a *App) tookOver(m takeoverMsg) tea.Cmd {
	a.takingOver = false
	if m.err != nil {
		if a.gone == nil {
			// A clean hand-over that could not be completed: now the
			// operator has to decide, as after a crash.
			a.engineGone(a.stopped)
		}
		a.sh.setStatus("taking over failed: "+OneLine(m.err.Error())+"; t tries again", true)
		return nil
	}
	if a.closed {
		m.e.Close()
		return nil
	}
	a.sub.Close()
	if a.detach != nil {
		a.detach()
		a.detach = nil
	}
	a.owned = append(a.owned, m.e)
	a.sh.e, a.attachedPID, a.gone, a.stopped, a.overlay = m.e, m.pid, nil, nil, nil
	a.sub = m.e.Subscribe()
	if !a.sh.opts.NoAttach {
		a.detach = m.e.AttachOperator()
	}
	cmd := a.refresh()
	if m.pid != 0 {
		a.sh.setStatus(fmt.Sprintf("attached to pid %d, which took the data dir over first", m.pid), false)
	} else {
		a.sh.setStatus("took over the data dir: this console holds it and serves other warden commands", false)
	}
	return tea.Batch(cmd, a.waitEvents())
}

// View draws the whole frame.
func (a *App) View() string {
	w, h := a.bodySize()
	var b strings.Builder
	b.WriteString(a.header(w))
	b.WriteByte('\n')
	b.WriteString(a.tabBar(w))
	b.WriteByte('\n')
	switch {
	case a.overlay != nil:
		b.WriteString(a.overlay.View(w, h))
	case a.showHelp:
		b.WriteString(a.fullHelp(w, h))
	default:
		b.WriteString(a.panes[a.tab].view(w, h))
	}
	b.WriteByte('\n')
	b.WriteString(a.statusLine(w))
	b.WriteByte('\n')
	b.WriteString(a.helpLine(w))
	return b.String()
}

func (a *App) header(w int) string {
	th := a.sh.th
	sep := th.Dim.Render(" │ ")
	jail := th.JailOn.Render("jail " + a.jailName)
	switch {
	case a.sh.opts.Jail == engine.JailOff:
		jail = th.JailOff.Render(" ⚠ JAIL OFF ")
	case a.jailErr != "":
		jail = th.JailOff.Render(" ⚠ JAIL UNAVAILABLE ")
	case a.jailName == engine.JailLandlock:
		// weaker than bwrap: said as a warning (docs/jail.md)
		jail = th.JailOff.Render(" ⚠ JAIL landlock ")
	}
	if a.limitsErr != "" && a.jailErr == "" && a.sh.opts.Jail != engine.JailOff {
		jail += " " + th.JailOff.Render(" ⚠ LIMITS: RLIMIT ")
	}
	if n := a.streams.unjailedRunning(); n > 0 && a.sh.opts.Jail != engine.JailOff {
		jail += " " + th.JailOff.Render(fmt.Sprintf(" ⚠ %d UNJAILED ", n))
	}
	if n := a.streams.landlockRunning(); n > 0 && a.jailName != engine.JailLandlock {
		// auto fell back: bwrap cannot run here (warden doctor says why).
		jail += " " + th.JailOff.Render(fmt.Sprintf(" ⚠ %d JAIL landlock ", n))
	}
	if n := a.streams.hostNetworkRunning(); n > 0 {
		jail += " " + th.JailOff.Render(fmt.Sprintf(" ⚠ %d ON HOST NETWORK ", n))
	}
	running := a.streams.running()
	pending := a.requests.pending()
	counts := th.HeaderVal.Render(fmt.Sprintf("%d running", running)) + sep
	if pending > 0 {
		counts += th.Pending.Render(fmt.Sprintf("%d pending", pending))
	} else {
		counts += th.HeaderVal.Render("0 pending")
	}
	if a.mcpClients > 0 {
		counts += sep + th.HeaderVal.Render(fmt.Sprintf("%d mcp", a.mcpClients))
	}
	right := sep + jail + sep + counts
	switch {
	case a.gone != nil:
		right = sep + th.JailOff.Render(fmt.Sprintf(" ⚠ ENGINE (pid %d) GONE: t takes over ", a.attachedPID)) + right
	case a.stopped != nil:
		right = sep + th.HeaderVal.Render(fmt.Sprintf("pid %d stopped: taking over", a.attachedPID)) + right
	case a.attachedPID != 0:
		right = sep + th.HeaderVal.Render(fmt.Sprintf("attached to pid %d", a.attachedPID)) + right
	}
	// The counts and the jail never give way; who you are gets up to
	// two thirds of what is left, the data dir the rest (cut from the middle,
	// or left out when nothing useful fits).
	avail := w - textWidth("warden") - 3 - widthOf(right)
	who := a.sh.who()
	if lim := max(avail*2/3, 12); textWidth(who) > lim {
		who = plain(who, lim)
	}
	left := th.Brand.Render("warden") + sep + th.HeaderVal.Render(who)
	room := avail - 3 - textWidth(who) - 3 - 5
	if room < 8 {
		return fit(left+right, w)
	}
	dir := sep + th.HeaderKey.Render("data ") + th.HeaderVal.Render(elideMiddlePath(safe(a.sh.e.DataDir()), room))
	return fit(left+dir+right, w)
}

func widthOf(s string) int { return lipgloss.Width(s) }

func (a *App) tabBar(w int) string {
	th := a.sh.th
	var b strings.Builder
	x := 0
	for i, name := range tabNames {
		label := fmt.Sprintf("%d %s", i+1, name)
		if i == tabRequests {
			if n := a.requests.pending(); n > 0 {
				label += " " + th.Badge.Render(fmt.Sprintf(" %d ", n))
			}
		}
		st := th.Tab
		if i == a.tab {
			st = th.TabActive
		}
		cell := st.Render(label)
		cw := widthOf(cell)
		a.tabX[i] = [2]int{x, x + cw}
		b.WriteString(cell)
		x += cw
		if i < tabCount-1 {
			b.WriteString(th.Dim.Render("│"))
			x++
		}
	}
	if bc := a.breadcrumb(); bc != "" && x+3 < w {
		b.WriteString("  " + th.Dim.Render(plain(bc, w-x-2)))
	}
	return fit(b.String(), w)
}

func (a *App) statusLine(w int) string {
	th := a.sh.th
	if a.confirm != nil {
		return fit(th.Prompt.Render(plain(a.confirm.prompt(), w)), w)
	}
	if a.cmd.in.Active() {
		return fit(a.cmd.in.View(), w)
	}
	if s := a.panes[a.tab].prompt(); s != "" && a.overlay == nil {
		return fit(s, w)
	}
	var parts []string
	if a.toast != "" {
		room := w - 2
		if a.sh.status != "" {
			// The status keeps what it needs (up to half the line); the
			// toast takes the rest.
			room = w - 4 - min(len([]rune(a.sh.status)), w/2)
		}
		parts = append(parts, th.Toast.Render(plain(a.toast, room)))
	}
	if a.sh.status != "" {
		st := th.StatusErr
		if a.sh.statusOK {
			st = th.StatusOK
		}
		parts = append(parts, st.Render(plain(a.sh.status, w)))
	}
	if len(parts) == 0 && a.jailErr != "" && a.tab == tabModules {
		parts = append(parts, th.StatusErr.Render(plain(OneLine(a.jailErr), w)))
	}
	return fit(strings.Join(parts, " "), w)
}

func (a *App) currentKeys() keyMap {
	if a.confirm != nil {
		k := newConfirmKeys(a.confirm.enterIsYes)
		return keyMap{short: []key.Binding{k.Yes, k.No}}
	}
	if a.cmd.in.Active() {
		return a.cmdlineKeys()
	}
	if a.overlay != nil {
		k := a.overlay.keys
		return keyMap{short: []key.Binding{k.Close, k.Up, k.Down, k.PageUp, k.PageDown}}
	}
	return a.panes[a.tab].keys()
}

func (a *App) helpLine(w int) string {
	k := a.currentKeys()
	short := append([]key.Binding(nil), k.short...)
	if a.confirm == nil && !a.cmd.in.Active() && (a.overlay != nil || !a.panes[a.tab].capturing()) {
		short = append(short, a.keys.Help, a.keys.Quit)
	}
	return fit(a.help.ShortHelpView(short), w)
}

func (a *App) fullHelp(w, h int) string {
	k := a.currentKeys()
	groups := append(append([][]key.Binding(nil), k.full...), a.keys.tabs(),
		[]key.Binding{a.keys.Command, a.keys.Copy, a.keys.Pager, a.keys.Back, a.keys.Help, a.keys.Messages, a.keys.Quit})
	rows := packHelp(a.help, groups, w)
	title := a.sh.th.Title.Render("Keys: "+tabNames[a.tab]) + a.sh.th.Dim.Render("  (any key closes, q too)")
	// A blank line between rows of columns, when the height allows it.
	body := strings.Join(rows, "\n\n")
	if n := strings.Count(body, "\n") + 1; n+1 > h {
		body = strings.Join(rows, "\n")
	}
	lines := append([]string{title}, strings.Split(body, "\n")...)
	for len(lines) < h {
		lines = append(lines, "")
	}
	lines = lines[:h]
	for i := range lines {
		lines[i] = fit(lines[i], w)
	}
	return strings.Join(lines, "\n")
}

// packHelp lays the key groups out in columns as wide as w allows, and
// the rest in further rows of columns below (one string per row): a narrow terminal still
// shows every key (the help bubble alone cuts the columns past w with
// "…", and with them the global keys: c, o, :, M).
func packHelp(hm help.Model, groups [][]key.Binding, w int) []string {
	hm.Width = 0 // measured here, not cut
	var rows []string
	var row [][]key.Binding
	for _, g := range groups {
		if len(row) > 0 && widthOf(hm.FullHelpView(append(row[:len(row):len(row)], g))) > w {
			rows = append(rows, hm.FullHelpView(row))
			row = nil
		}
		row = append(row, g)
	}
	if len(row) > 0 {
		rows = append(rows, hm.FullHelpView(row))
	}
	return rows
}

// elideMiddlePath cuts a path to width cells from the middle: its start
// (where it is) and its end (which data dir) both stay readable.
func elideMiddlePath(p string, width int) string {
	r := []rune(p)
	if textWidth(p) <= width || len(r) != textWidth(p) || width < 8 {
		return plain(p, width)
	}
	head := (width - 1) / 2
	tail := width - 1 - head
	return string(r[:head]) + "…" + string(r[len(r)-tail:])
}
