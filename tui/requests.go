package tui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/wardenhq/warden/engine"
)

// maxRequests bounds the requests (history included) the console holds.
const maxRequests = 500

type requestsKeys struct {
	KeyMap
	Detail, Filter, Clear    key.Binding
	Approve, Deny, Always    key.Binding
	NextPending, PrevPending key.Binding
}

func newRequestsKeys() requestsKeys {
	return requestsKeys{
		KeyMap:      DefaultKeyMap(),
		Detail:      key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "whole request")),
		Filter:      key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "filter")),
		Clear:       key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "clear filter")),
		Approve:     key.NewBinding(key.WithKeys("y"), key.WithHelp("y", "approve once")),
		Deny:        key.NewBinding(key.WithKeys("n"), key.WithHelp("n", "deny")),
		Always:      key.NewBinding(key.WithKeys("a"), key.WithHelp("a", "approve always")),
		NextPending: key.NewBinding(key.WithKeys("]"), key.WithHelp("]", "next pending")),
		PrevPending: key.NewBinding(key.WithKeys("["), key.WithHelp("[", "prev pending")),
	}
}

type requestsPane struct {
	paneBase
	sh   *shared
	k    requestsKeys
	reqs []engine.Request
	sel  int
	off  int
	// listRows is how many rows the list showed last (a page).
	listRows int
	// filter and query: / shows only the requests whose row holds the
	// query (smart case); the cursor skips the others.
	filter promptInput
	query  string
	// dec asks a deny's reason and approve-always's yes, on a request id
	// (decision.go); rule is what approve-always would add, shown with
	// the question.
	dec  decision[uint64]
	rule string

	// history: the decided requests have been read, because the pane has
	// been on screen. Until then it holds only the pending ones (all the
	// header, the Runs tab's answer line and :approve need), so the first
	// frame does not wait on decoding up to maxRequests of history.
	history bool
	// loadGen tells the current read of the requests from stale ones.
	loadGen uint64
	// firstOut: the history's read is out; the app holds keys for the
	// pane until it lands.
	firstOut bool
	// want is a request to select once the read out brings it (a
	// drill-down to a decided request before the history was read).
	want uint64
}

func newRequestsPane(sh *shared) *requestsPane {
	return &requestsPane{sh: sh, k: newRequestsKeys(), dec: newDecision[uint64](),
		filter: newPromptInput("filter › ", "module, hook, subject or operation", 128)}
}

// show is called when the pane comes on screen: the first time, it reads
// the decided history too, off the UI goroutine.
func (p *requestsPane) show() tea.Cmd {
	if p.history {
		return nil
	}
	p.history = true
	p.firstOut = true
	return p.refresh()
}

// reload reads the requests in place: New does it, before the program
// runs. Update reads with refresh.
func (p *requestsPane) reload() {
	rs, err := listRequests(p.eng(), maxRequests, p.history)
	p.loaded(requestsLoadedMsg{gen: p.loadGen, rs: rs, err: err})
}

// requestsLoadedMsg is a read of the requests.
type requestsLoadedMsg struct {
	gen uint64
	rs  []engine.Request
	err error
}

// refresh reads the requests off the UI goroutine (the first showing, a
// decision that failed, after missed events, a take-over).
func (p *requestsPane) refresh() tea.Cmd {
	p.loadGen++
	gen, e, history := p.loadGen, p.eng(), p.history
	return func() tea.Msg {
		rs, err := listRequests(e, maxRequests, history)
		return requestsLoadedMsg{gen: gen, rs: rs, err: err}
	}
}

func (p *requestsPane) loaded(m requestsLoadedMsg) {
	if m.gen != p.loadGen {
		return // a later read is out
	}
	p.firstOut = false
	if m.err != nil {
		p.sh.errStatus(m.err)
		return
	}
	cur := p.selectedID()
	// What came as events while the read was out is newer than the
	// read: a request asked after it, a decision made after it.
	decided := map[uint64]engine.Request{}
	top := maxID(m.rs)
	var later []engine.Request
	for _, r := range p.reqs {
		switch {
		case r.ID > top:
			later = append(later, r)
		case r.Decision != nil:
			decided[r.ID] = r
		}
	}
	for i, r := range m.rs {
		if d, ok := decided[r.ID]; ok && r.Decision == nil {
			m.rs[i] = d
		}
	}
	p.reqs = append(m.rs, later...)
	p.sort()
	if p.want != 0 {
		cur, p.want = p.want, 0
	}
	p.selectID(cur)
}

// maxID is the highest request id in rs (0 for none).
func maxID(rs []engine.Request) (id uint64) {
	for _, r := range rs {
		id = max(id, r.ID)
	}
	return id
}

// sort: pending first (oldest first, the most urgent), then decided,
// newest decision first.
func (p *requestsPane) sort() {
	sort.SliceStable(p.reqs, func(i, j int) bool {
		a, b := p.reqs[i], p.reqs[j]
		if (a.Decision == nil) != (b.Decision == nil) {
			return a.Decision == nil
		}
		if a.Decision == nil {
			return a.ID < b.ID
		}
		if !a.Decision.At.Equal(b.Decision.At) {
			return a.Decision.At.After(b.Decision.At)
		}
		return a.ID > b.ID
	})
	if len(p.reqs) > maxRequests {
		p.reqs = p.reqs[:maxRequests]
	}
}

func (p *requestsPane) selectedID() uint64 {
	if p.sel >= 0 && p.sel < len(p.reqs) {
		return p.reqs[p.sel].ID
	}
	return 0
}

func (p *requestsPane) selectID(id uint64) {
	p.sel = 0
	for i, r := range p.reqs {
		if r.ID == id {
			p.sel = i
		}
	}
}

// selectOrAwait selects request id, or, when it is not held yet (its
// history is being read), once the read brings it.
func (p *requestsPane) selectOrAwait(id uint64) {
	p.selectID(id)
	if len(p.reqs) == 0 || p.reqs[p.sel].ID != id {
		p.want = id
	}
}

// upsert records a request event; it reports a new pending request.
func (p *requestsPane) upsert(r engine.Request) (isNew bool) {
	cur := p.selectedID()
	curDecided := true
	if c, ok := p.current(); ok && c.Decision == nil {
		curDecided = false
	}
	found := false
	for i := range p.reqs {
		if p.reqs[i].ID == r.ID {
			p.reqs[i], found = r, true
		}
	}
	if !found {
		p.reqs = append(p.reqs, r)
	}
	p.sort()
	if cur == 0 {
		cur = r.ID
	}
	p.selectID(cur)
	if !found && r.Decision == nil && curDecided {
		// A new question while the cursor rests on history: y must
		// answer what is waiting, not "already decided".
		if p.selectOldestPending() {
			p.sh.setStatus(p.clearedNote(), false)
		}
	}
	if p.dec.active() && p.dec.target == r.ID && r.Decision != nil {
		p.dec.cancel()
	}
	return !found && r.Decision == nil
}

// oldestPendingFor is the oldest pending request run asked.
func (p *requestsPane) oldestPendingFor(run string) (engine.Request, bool) {
	var out engine.Request
	for _, r := range p.reqs {
		if r.Decision == nil && r.Requester.Run == run && (out.ID == 0 || r.ID < out.ID) {
			out = r
		}
	}
	return out, out.ID != 0
}

// selectOldestPending puts the cursor on the oldest pending request (the
// most urgent); with none pending it stays where it is. A filter that
// hides it is cleared: the question is shown, and y never answers a
// request the list does not show. It reports that, for the caller's
// status line.
func (p *requestsPane) selectOldestPending() (cleared bool) {
	var oldest uint64
	for i, r := range p.reqs {
		if r.Decision == nil && (oldest == 0 || r.ID < oldest) {
			oldest, p.sel = r.ID, i
		}
	}
	if p.query != "" && p.sel < len(p.reqs) && p.hidden(p.sel) {
		p.query = ""
		return true
	}
	return false
}

// clearedNote is what the status line adds when selectOldestPending
// cleared the filter.
func (p *requestsPane) clearedNote() string {
	return fmt.Sprintf("filter cleared to show request %d", p.selectedID())
}

// jumpPending moves to the next (dir 1) or previous (-1) pending request
// from the cursor, wrapping around.
func (p *requestsPane) jumpPending(dir int) {
	n := len(p.reqs)
	for i := 1; i <= n; i++ {
		j := ((p.sel+dir*i)%n + n) % n
		if p.reqs[j].Decision == nil && !p.hidden(j) {
			p.sel = j
			return
		}
	}
	if p.query != "" && p.pending() > 0 {
		p.sh.setStatus("no pending request matches the filter: esc clears it", false)
		return
	}
	p.sh.setStatus("no pending requests", false)
}

func (p *requestsPane) pending() (n int) {
	for _, r := range p.reqs {
		if r.Decision == nil {
			n++
		}
	}
	return n
}

func (p *requestsPane) capturing() bool {
	return p.dec.active() || p.filter.Active()
}

// visible lists the indexes of the requests the filter leaves, in order.
func (p *requestsPane) visible() []int { return shownRows(len(p.reqs), p.hidden) }

// hidden reports whether the filter hides request i.
func (p *requestsPane) hidden(i int) bool {
	if p.query == "" {
		return false
	}
	r := p.reqs[i]
	return !contains(fmt.Sprintf("#%d %s %s/%s %s", r.ID, r.Subject, r.Requester.Module, r.Requester.Hook, operationLine(r)), p.query)
}

func (p *requestsPane) prompt() string {
	switch {
	case p.filter.Active():
		return p.filter.View()
	case p.dec.reason.Active():
		return p.dec.reason.View()
	case p.dec.confirming && p.dec.tool:
		return p.sh.th.Prompt.Render(fmt.Sprintf("approve request %d always? y: these arguments · t: this tool, any arguments · [N]", p.dec.target))
	case p.dec.confirming:
		return p.sh.th.Prompt.Render(fmt.Sprintf("approve request %d always? [y/N]", p.dec.target)) + p.sh.th.Dim.Render(" (the rule to be added is shown above)")
	}
	return ""
}

func (p *requestsPane) keys() keyMap {
	k := p.k
	switch {
	case p.filter.Active():
		return p.filter.KeyMap()
	}
	if km, ok := p.dec.keys(); ok {
		return km
	}
	nav := []key.Binding{k.Up, k.Down, k.NextPending, k.PrevPending, k.Detail}
	if p.viewer() {
		// A viewer cannot decide: no hints for keys that would refuse.
		return keyMap{short: nav, full: [][]key.Binding{nav}}
	}
	acts := []key.Binding{k.Approve, k.Deny, k.Always}
	short := append([]key.Binding{k.Up, k.Down, k.NextPending}, acts...)
	short = append(short, k.Detail)
	return keyMap{short: short, full: [][]key.Binding{{k.Up, k.Down, k.PageUp, k.PageDown, k.Top, k.Bottom, k.NextPending, k.PrevPending, k.Detail, k.Filter, k.Clear}, acts}}
}

func (p *requestsPane) update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case decidedMsg:
		return p.decided(msg)
	case requestsLoadedMsg:
		p.loaded(msg)
	case alwaysRuleMsg:
		if msg.err != nil {
			p.sh.errStatus(msg.err)
			return nil
		}
		p.rule = msg.rule
		p.dec.askAlways(msg.id, msg.tool)
	case tea.KeyMsg:
		return p.key(msg)
	case tea.MouseMsg:
		// Rows on screen are the ones the filter leaves: a click picks
		// among those, not by the unfiltered index.
		vis := p.visible()
		if k := listMouse(msg, 1, 1, p.off, len(vis), p.move); k >= 0 {
			p.sel = vis[k]
		}
	}
	return nil
}

func (p *requestsPane) key(msg tea.KeyMsg) tea.Cmd {
	k := p.k
	if cmd, ok := p.dec.key(msg, p.decide, func() { p.sh.setStatus("not approved", false) }); ok {
		return cmd
	}
	if p.filter.Active() {
		cmd, outcome, q := p.filter.Update(msg)
		if outcome == promptSubmitted {
			p.query = strings.TrimSpace(q)
			if len(p.reqs) > 0 {
				p.sel = landOn(p.sel, 1, len(p.reqs), p.hidden)
			}
		}
		return cmd
	}
	if sel, ok := navKey(msg, k.KeyMap, p.sel, len(p.reqs), max(p.listRows-1, 1), p.hidden); ok {
		p.sel = sel
		return nil
	}
	switch {
	case key.Matches(msg, k.Filter):
		return p.filter.Open(p.query)
	case key.Matches(msg, k.Clear) && p.query != "":
		p.query = ""
	case key.Matches(msg, k.NextPending):
		p.jumpPending(1)
	case key.Matches(msg, k.PrevPending):
		p.jumpPending(-1)
	case key.Matches(msg, k.Detail):
		if r, ok := p.current(); ok {
			// The detail's lines are styled for the pane; the overlay
			// escapes what it draws (every hostile string in them was
			// escaped once already), so it gets them plain: styled, its
			// escaping showed warden's own colours as ␛[1;38;5;75m.
			return openOverlay(textOverlay(p.sh, fmt.Sprintf("request %d", r.ID), ansi.Strip(strings.Join(p.detail(r), "\n"))))
		}
	case key.Matches(msg, k.Approve):
		if r, ok := p.currentPending(); ok {
			return p.decide(r.ID, engine.ApproveOnce, "")
		}
	case key.Matches(msg, k.Deny):
		if r, ok := p.currentPending(); ok {
			return p.dec.askReason(r.ID)
		}
	case key.Matches(msg, k.Always):
		if r, ok := p.currentPending(); ok {
			e := p.eng()
			return func() tea.Msg {
				rule, err := alwaysRule(e, r)
				return alwaysRuleMsg{id: r.ID, rule: rule, tool: r.Operation == engine.OpMCPCall, err: err}
			}
		}
	}
	return nil
}

func (p *requestsPane) move(d int) {
	if len(p.reqs) == 0 {
		return
	}
	dir := 1
	if d < 0 {
		dir = -1
	}
	// The wheel moves among the rows the filter shows.
	p.sel = landOn(p.sel+d, dir, len(p.reqs), p.hidden)
}

func (p *requestsPane) current() (engine.Request, bool) {
	// A row the filter hides is never acted on, even when the cursor is
	// left on it because nothing matches.
	if p.sel >= 0 && p.sel < len(p.reqs) && !p.hidden(p.sel) {
		return p.reqs[p.sel], true
	}
	return engine.Request{}, false
}

// viewer is true when this console may look but not decide: it shows no
// decision hints. The keys still reach the engine, which refuses a
// viewer and receipts the attempt (access.refused).
func (p *requestsPane) viewer() bool { return p.sh.opts.Viewer }

func (p *requestsPane) currentPending() (engine.Request, bool) {
	r, ok := p.current()
	if !ok {
		p.sh.setStatus("no request selected", true)
		return r, false
	}
	if r.Decision != nil {
		p.sh.setStatus(fmt.Sprintf("request %d was already decided (%s by %s)", r.ID, r.Decision.Verdict, p.sh.actorLabel(r.Decision.By)), true)
		return r, false
	}
	return r, true
}

// Messages of the requests pane's engine calls.
type (
	decidedMsg struct {
		id      uint64
		verdict string
		r       engine.Request
		err     error
	}
	// alwaysRuleMsg is the rule approve-always would add, to confirm.
	alwaysRuleMsg struct {
		id   uint64
		rule string
		tool bool // an MCP tool call: t may approve the whole tool
		err  error
	}
)

// decide records a decision through the engine, off the UI goroutine.
func (p *requestsPane) decide(id uint64, verdict, reason string) tea.Cmd {
	e, actor := p.eng(), p.sh.opts.Actor
	return func() tea.Msg {
		r, err := decideRequest(e, actor, id, verdict, reason)
		return decidedMsg{id: id, verdict: verdict, r: r, err: err}
	}
}

// decided shows a decision's outcome.
func (p *requestsPane) decided(m decidedMsg) tea.Cmd {
	if m.err != nil {
		p.sh.errStatus(m.err)
		return p.refresh()
	}
	p.upsert(m.r)
	p.selectID(m.id)
	// On to the next question, if there is one: the cursor never rests
	// on a request just decided while another waits.
	cleared := p.selectOldestPending()
	msg := fmt.Sprintf("request %d: %s", m.id, m.verdict)
	if n := p.pending(); n > 0 {
		msg += fmt.Sprintf(" · %d more to answer", n)
	}
	if cleared {
		msg += " · " + p.clearedNote()
	}
	p.sh.setStatus(msg, false)
	return nil
}

// requesterField names who asked: a hook's run, or an MCP client's tool
// call (client, tool, session).
func requesterField(r engine.Request, field func(k, v string) string) string {
	if q := r.Requester; q.Client != "" {
		return field("requester", fmt.Sprintf("MCP client %s, tool %s, session %s", OneLine(q.Client), OneLine(q.Hook), OneLine(q.Session)))
	}
	return field("requester", fmt.Sprintf("%s/%s, run %s", r.Requester.Module, r.Requester.Hook, r.Requester.Run))
}

// operationLine is a request's operation on one line.
func operationLine(r engine.Request) string {
	if dest, ok := connectDest(r); ok {
		return "CONNECT " + dest
	}
	var m map[string]any
	if json.Unmarshal(r.Content, &m) == nil {
		if msg, ok := m["message"].(string); ok && len(m) == 1 {
			return r.Operation + ": " + OneLine(msg)
		}
		if argv, ok := m["argv"].([]any); ok {
			parts := make([]string, len(argv))
			for i, a := range argv {
				parts[i] = fmt.Sprint(a)
			}
			return r.Operation + ": " + strings.Join(parts, " ")
		}
		if path, ok := m["path"].(string); ok {
			return r.Operation + ": " + path
		}
	}
	return r.Operation + " " + OneLine(string(r.Content))
}

func (p *requestsPane) view(w, h int) string {
	th := p.sh.th
	listH := max(min(len(p.reqs)+1, h/2), 3)
	if len(p.reqs) == 0 {
		listH = 2
	}
	out := []string{fit(th.Title.Render(fmt.Sprintf("Requests · %d pending · %d decided", p.pending(), len(p.reqs)-p.pending())), w)}
	if len(p.reqs) == 0 {
		out = append(out, fit(th.Dim.Render("no requests: a hook asking the operator or a denied effect shows up here"), w))
	}
	rows := listH - 1
	p.listRows = rows
	// The rows the filter leaves, and the cursor's place among them.
	vis, at := make([]int, 0, len(p.reqs)), 0
	for i := range p.reqs {
		if !p.hidden(i) {
			if i == p.sel {
				at = len(vis)
			}
			vis = append(vis, i)
		}
	}
	if p.query != "" {
		out[0] = fit(th.Title.Render(fmt.Sprintf("Requests · filter %s (esc clears) · %d of %d", plain(p.query, 30), len(vis), len(p.reqs))), w)
		if len(vis) == 0 && len(p.reqs) > 0 {
			out = append(out, fit(th.Dim.Render("no match for "+plain(p.query, w-13)), w))
		}
	}
	p.off = scrollOff(p.off, at, rows, len(vis))
	now := p.sh.now()
	for k := p.off; k < len(vis) && len(out) < listH; k++ {
		i := vis[k]
		out = append(out, p.row(p.reqs[i], i == p.sel, now, w))
	}
	for len(out) < listH {
		out = append(out, "")
	}
	out = append(out, th.Border.Render(strings.Repeat("─", w)))
	if p.dec.confirming {
		what := "This adds one exact rule to the policy:"
		if strings.HasPrefix(p.rule, "add ") {
			what = "This changes the policy:" // a network name joins the list
		}
		out = append(out, th.Pending.Render(fmt.Sprintf("Approve request %d always?", p.dec.target)), what)
		for _, l := range wrapRows(p.rule, w-4, 0, 8) {
			out = append(out, "    "+th.Title.Render(l))
		}
		out = append(out, "", th.Dim.Render("Every later identical operation is then allowed without asking. y adds the rule; n or esc goes back."), "")
	}
	if r, ok := p.current(); ok {
		for _, l := range p.detail(r) {
			if len(out) >= h {
				break
			}
			out = append(out, l)
		}
	}
	for len(out) < h {
		out = append(out, "")
	}
	for i := range out {
		out[i] = fit(out[i], w)
	}
	return strings.Join(out[:h], "\n")
}

func (p *requestsPane) row(r engine.Request, sel bool, now time.Time, w int) string {
	th := p.sh.th
	var state, when string
	st := th.Pending
	if r.Decision == nil {
		state = "pending"
		left := r.Expires.Sub(now)
		if left <= 0 {
			when = "expired"
		} else {
			when = "exp " + ShortDuration(left)
		}
	} else {
		state = r.Decision.Verdict
		when = "by " + midCut(p.sh.actorShort(r.Decision.By), 24) + " " + stamp(r.Decision.At, now)
		st = th.Approved
		if r.Decision.Verdict == engine.Deny {
			st = th.Denied
		}
	}
	mark := " "
	if sel {
		mark = "▸"
	}
	head := fmt.Sprintf("%s#%-4d %-14s %5s ", mark, r.ID, safe(state), ShortDuration(now.Sub(r.Created)))
	rest := fmt.Sprintf("%-10s %s  %s/%s  %s", when, r.Subject, r.Requester.Module, r.Requester.Hook, operationLine(r))
	if r.Decision != nil {
		rest = fmt.Sprintf("%s  %s  %s", when, r.Subject, operationLine(r))
	}
	restW := max(w-textWidth(head), 1)
	if sel {
		// The highlight spans the whole row, not only its head.
		return th.Selected.Render(fit(head+plain(rest, restW), w))
	}
	return head[:1] + st.Render(head[1:]) + plain(rest, restW)
}

// detail is every field of a request, content exactly as sent.
func (p *requestsPane) detail(r engine.Request) []string {
	th := p.sh.th
	now := p.sh.now()
	field := func(k, v string) string { return th.Dim.Render(fmt.Sprintf("%-10s ", k)) + safe(v) }
	state := th.Pending.Render("pending")
	exp := r.Expires.Local().Format("15:04:05")
	if left := r.Expires.Sub(now); left > 0 {
		exp = "in " + ShortDuration(left) + " (" + exp + ")"
	} else {
		exp = "expired " + exp
	}
	out := []string{th.Title.Render(fmt.Sprintf("Request %d", r.ID)) + "  " + state}
	if d := r.Decision; d != nil {
		st := th.Approved
		if d.Verdict == engine.Deny {
			st = th.Denied
		}
		dec := st.Render(safe(d.Verdict)) + " by " + p.sh.actorLabel(d.By) + " at " + d.At.Local().Format("2006-01-02 15:04:05")
		if d.Reason != "" {
			dec += ": " + safe(OneLine(d.Reason))
		}
		out[0] = th.Title.Render(fmt.Sprintf("Request %d", r.ID)) + "  " + dec
	}
	out = append(out,
		field("subject", r.Subject),
		requesterField(r, field),
		field("operation", r.Operation),
		field("created", r.Created.Local().Format("2006-01-02 15:04:05")+" ("+ShortDuration(now.Sub(r.Created))+" ago)"),
	)
	if r.Decision == nil {
		out = append(out, field("expires", exp))
	}
	out = append(out, field("revision", fmt.Sprint(r.Revision)), field("digest", r.Digest), th.Dim.Render("content"))
	var buf bytes.Buffer
	if json.Indent(&buf, r.Content, "", "  ") == nil {
		for _, l := range strings.Split(buf.String(), "\n") {
			out = append(out, "  "+safe(l))
		}
	} else {
		out = append(out, "  "+safe(string(r.Content)))
	}
	return append(out[:1:1], append(p.connectBanner(r), out[1:]...)...)
}

// eng is the engine as this pane needs it: the requests and policies.
func (p *requestsPane) eng() engine.Requests { return p.sh.e }
