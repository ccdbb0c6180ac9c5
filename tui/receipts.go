package tui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/wardenhq/warden/engine"
)

// The receipts pane holds the newest receipts of the chosen kind, read a
// page at a time by key range: the first page when the pane is first
// shown (not at open: the console's first frame does not wait on a
// pane it does not draw), older pages as the cursor goes above the first
// one held. New receipts are added as they come, up to maxReceipts; the
// whole log stays in storage.
//
// / filters by text too (receiptsfilter.go): the rows held are filtered
// at once, and older receipts are read off the UI goroutine, receiptsScan
// at a time, until a screen of matches is found or the chain's start.
const (
	receiptsLoad = 100
	maxReceipts  = 2000
	receiptsScan = 500
)

type receiptsKeys struct {
	KeyMap
	Detail, Drill, Filter, Clear, Verify key.Binding
}

func newReceiptsKeys() receiptsKeys {
	return receiptsKeys{
		KeyMap: DefaultKeyMap().withEnds("oldest", "newest"),
		Detail: key.NewBinding(key.WithKeys("d"), key.WithHelp("d", "detail")),
		Drill:  key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "open run/request")),
		Filter: key.NewBinding(key.WithKeys("/", "K"), key.WithHelp("/", "filter")),
		Clear:  key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "clear filter")),
		Verify: key.NewBinding(key.WithKeys("v"), key.WithHelp("v", "verify chain")),
	}
}

type receiptsPane struct {
	paneBase
	sh *shared
	k  receiptsKeys
	// rs is what the pane holds, oldest first. rs[sparse:] is every
	// receipt of the kind from rs[sparse].Seq to the newest; rs[:sparse]
	// are only the text filter's matches among the older receipts the
	// background scan read (it does not hold what did not match).
	rs     []engine.Receipt
	sparse int
	kind   string // filter: exact kind, or a prefix ending in "."
	sel    int    // index into rs; with a text filter, a row it shows
	off    int    // index into the rows shown (visible())
	receiptsReads
	atEnd  bool // the cursor follows new receipts
	oldest bool // no receipt of the kind is older than the oldest read (from)
	// shown: the pane has been on screen, so it holds the newest page and
	// keeps it current. Until then it holds nothing and reads nothing.
	shown  bool
	filter promptInput
	h      int
}

func newReceiptsPane(sh *shared) *receiptsPane {
	return &receiptsPane{sh: sh, k: newReceiptsKeys(), filter: newPromptInput("filter › ", "text (smart case), or a kind: hook. request.decide kind=mcp.", 128), atEnd: true, h: 20}
}

// kindFilter turns what the operator typed into an engine filter: a bare
// word ("hook") means the family ("hook.").
func kindFilter(s string) string {
	s = strings.TrimSpace(s)
	if s != "" && !strings.Contains(s, ".") {
		s += "."
	}
	return s
}

// show is called when the pane comes on screen: the first time, it reads
// the newest page (every receipt until then included).
func (p *receiptsPane) show() tea.Cmd {
	if !p.shown {
		p.shown = true
		return p.reload()
	}
	return nil
}

// receiptsPageMsg is the newest page of the kind, read by reload.
type receiptsPageMsg struct {
	gen int
	rs  []engine.Receipt
	err error
}

// reload reads the newest page of the kind off the UI goroutine. What is
// held stays on screen until it comes (receipts appended meanwhile are
// kept aside and added after it); a scan or page read in flight is stale.
func (p *receiptsPane) reload() tea.Cmd {
	if !p.shown {
		return nil // read when first shown
	}
	p.restart()
	p.loading = true
	e, gen, f := p.eng(), p.gen, engine.ReceiptFilter{Kind: p.kind, Limit: receiptsLoad}
	return func() tea.Msg {
		rs, err := e.Receipts(f)
		return receiptsPageMsg{gen: gen, rs: rs, err: err}
	}
}

// rekind shows another kind: what is held is of the old one, so it goes
// at once; the newest page of the new kind is read.
func (p *receiptsPane) rekind(kind string) tea.Cmd {
	p.kind, p.rs, p.sparse, p.sel, p.off, p.atEnd = kind, nil, 0, 0, 0, true
	return p.reload()
}

// loaded takes the newest page read by reload.
func (p *receiptsPane) loaded(m receiptsPageMsg) tea.Cmd {
	if m.gen != p.gen || !p.loading {
		return nil // another read was asked for since
	}
	p.loading = false
	early := p.early
	p.early = nil
	if m.err != nil {
		p.sh.errStatus(m.err)
		return nil
	}
	p.rs, p.oldest, p.sparse = m.rs, len(m.rs) < receiptsLoad, 0
	p.from = 0
	if len(p.rs) > 0 {
		p.from = p.rs[0].Seq
	}
	for _, r := range early {
		p.add(r)
	}
	if p.atEnd || p.sel >= len(p.rs) {
		p.sel = p.lastShown()
	}
	p.sel = max(p.sel, 0)
	if p.kindNote && p.query == "" {
		p.sh.setStatus(fmt.Sprintf("%d receipts of kind %s", len(p.rs), p.kind), false)
	}
	p.kindNote = false
	return p.findScreen()
}

func (p *receiptsPane) matches(r *engine.Receipt) bool {
	if p.kind == "" {
		return true
	}
	if strings.HasSuffix(p.kind, ".") {
		return strings.HasPrefix(r.Kind, p.kind)
	}
	return r.Kind == p.kind
}

// add takes a receipt just appended.
func (p *receiptsPane) add(r engine.Receipt) {
	if !p.shown || !p.matches(&r) {
		return
	}
	if p.loading {
		p.early = append(p.early, r) // added after the page being read
		return
	}
	if n := len(p.rs); n > 0 && p.rs[n-1].Seq >= r.Seq {
		return // already read from storage
	}
	p.rs = append(p.rs, r)
	if len(p.rs) > maxReceipts {
		drop := len(p.rs) - receiptsLoad
		p.rs = append([]engine.Receipt(nil), p.rs[drop:]...)
		p.oldest = false
		p.sparse = max(p.sparse-drop, 0)
		p.from = p.rs[0].Seq // what was dropped is read again if wanted
		p.sel = max(p.sel-drop, 0)
		p.off = 0
	}
	if p.atEnd {
		p.sel = p.lastShown()
	}
}

func (p *receiptsPane) capturing() bool { return p.filter.Active() }

func (p *receiptsPane) prompt() string { return p.filter.View() }

func (p *receiptsPane) keys() keyMap {
	k := p.k
	if p.filter.Active() {
		return p.filter.KeyMap()
	}
	short := []key.Binding{k.Up, k.Down, k.Drill, k.Detail, k.Filter, k.Verify}
	if p.kind != "" || p.query != "" {
		short = append(short, k.Clear)
	}
	return keyMap{short: short, full: [][]key.Binding{{k.Up, k.Down, k.PageUp, k.PageDown, k.Top, k.Bottom}, {k.Drill, k.Detail, k.Filter, k.Clear, k.Verify}}}
}

func (p *receiptsPane) update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case verifiedMsg:
		p.verified(msg)
	case receiptsScanMsg:
		return p.scanned(msg)
	case receiptsPageMsg:
		return p.loaded(msg)
	case tea.KeyMsg:
		return p.key(msg)
	case tea.MouseMsg:
		vis := p.visible()
		if i := listMouse(msg, 3, 2, p.off, len(vis), p.move); i >= 0 {
			p.sel = vis[i]
			p.atEnd = i == len(vis)-1
		}
		if p.wheelOlder {
			p.wheelOlder = false
			return p.readOlder()
		}
	}
	return nil
}

func (p *receiptsPane) key(msg tea.KeyMsg) tea.Cmd {
	k := p.k
	if p.filter.Active() {
		cmd, outcome, typed := p.filter.Update(msg)
		if outcome == promptSubmitted {
			return tea.Batch(cmd, p.setFilter(typed))
		}
		return cmd
	}
	page := max(p.h-3, 1)
	if p.query != "" {
		return p.keyFiltered(msg, page)
	}
	if sel, ok := navKey(msg, k.KeyMap, p.sel, len(p.rs), page, nil); ok {
		// Up past the first receipt held reads the page above, off the
		// UI goroutine; when it comes, the cursor goes where the key
		// meant (the row above, a page up, the top), unless it was moved
		// meanwhile.
		var cmd tea.Cmd
		if sel == 0 && key.Matches(msg, k.Up, k.PageUp, k.Top) && (p.sel == 0 || key.Matches(msg, k.Top) || p.sel-page < 0) {
			want := p.sel - 1
			switch {
			case key.Matches(msg, k.Top):
				want = pendingTop
			case key.Matches(msg, k.PageUp):
				want = p.sel - page
			}
			cmd = p.readOlder()
			if cmd != nil {
				p.pending, p.pendingAt = want, 0
			}
		}
		p.sel, p.atEnd = sel, sel == len(p.rs)-1
		return cmd
	}
	return p.action(msg)
}

// action handles the keys that are not moves.
func (p *receiptsPane) action(msg tea.KeyMsg) tea.Cmd {
	k := p.k
	switch {
	case key.Matches(msg, k.Filter):
		return p.filter.Open(p.typed)
	case key.Matches(msg, k.Clear):
		return p.clearFilter()
	case key.Matches(msg, k.Drill) && p.sel < len(p.rs) && !p.hidden(p.sel):
		r, _ := p.selected()
		if run, req := receiptTarget(r); run != "" || req != 0 {
			return drill(drillMsg{from: "#" + fmt.Sprint(r.Seq), run: run, request: req})
		}
		fallthrough // nothing to open: its detail
	case key.Matches(msg, k.Detail):
		if r, ok := p.selected(); ok {
			return openOverlay(textOverlay(p.sh, fmt.Sprintf("receipt %d · %s", r.Seq, r.Kind), receiptDetail(r)))
		}
	case key.Matches(msg, k.Verify):
		return p.verify()
	}
	return nil
}

// verifiedMsg is the outcome of a chain verification.
type verifiedMsg struct {
	v   engine.Verification
	err error
}

// verify checks the chain from the newest checkpoint (a full walk the
// first time), so pressing v costs what was appended since, not the log's
// length; the status line says where it started. It runs off the UI
// goroutine: a long walk takes a while, and the console must keep
// drawing meanwhile.
func (p *receiptsPane) verify() tea.Cmd {
	e := p.eng()
	p.sh.setStatus("verifying the receipt chain…", false)
	return func() tea.Msg {
		v, err := e.VerifyReceiptsSince(0)
		return verifiedMsg{v: v, err: err}
	}
}

// verified shows a verification's outcome.
func (p *receiptsPane) verified(m verifiedMsg) {
	v, err := m.v, m.err
	switch {
	case err != nil:
		p.sh.errStatus(err)
	case v.Intact && v.From > 0:
		p.sh.setStatus(fmt.Sprintf("receipt chain intact, %d receipts since the checkpoint at seq %d (`warden receipts verify --full` re-checks all)", v.Count, v.From), false)
	case v.Intact:
		p.sh.setStatus(fmt.Sprintf("receipt chain intact, %d receipts", v.Count), false)
	default:
		p.sh.setStatus(fmt.Sprintf("receipt chain BROKEN at seq %d: %s (%d receipts checked)", v.BrokenSeq, v.Reason, v.Count), true)
	}
}

// move is the mouse wheel: d rows among those shown. Past the first
// receipt held it asks for the page above (update sends the read).
func (p *receiptsPane) move(d int) {
	if len(p.rs) == 0 {
		return
	}
	if p.query != "" {
		p.moveFiltered(d)
		return
	}
	if p.sel+d < 0 && !p.oldest {
		p.wheelOlder = true
	}
	p.sel = min(max(p.sel+d, 0), len(p.rs)-1)
	p.atEnd = p.sel == len(p.rs)-1
}

// receiptDetail is a receipt in full, details pretty-printed.
func receiptDetail(r engine.Receipt) string {
	var b strings.Builder
	fmt.Fprintf(&b, "seq      %d\n", r.Seq)
	fmt.Fprintf(&b, "at       %s\n", r.At.Local().Format("2006-01-02 15:04:05.000 MST"))
	fmt.Fprintf(&b, "kind     %s\n", r.Kind)
	fmt.Fprintf(&b, "actor    %s\n", r.Actor)
	fmt.Fprintf(&b, "subject  %s\n", r.Subject)
	fmt.Fprintf(&b, "summary  %s\n", r.Summary)
	fmt.Fprintf(&b, "prev     %s\n", r.Prev)
	fmt.Fprintf(&b, "hash     %s\n", r.Hash)
	if len(r.Details) > 0 {
		var buf bytes.Buffer
		if json.Indent(&buf, r.Details, "  ", "  ") == nil {
			fmt.Fprintf(&b, "details\n  %s", buf.String())
		} else {
			fmt.Fprintf(&b, "details  %s", r.Details)
		}
	}
	return b.String()
}

// receiptCols are the receipts table's column widths at a width: the
// fixed columns grow with the terminal (up to what their text needs),
// the summary takes the rest.
type receiptCols struct{ seq, at, ago, kind, actor, subj, sum int }

func receiptWidths(w int) receiptCols {
	c := receiptCols{seq: 6, at: 12, kind: 14, actor: 11, subj: 14}
	if w >= 120 {
		c.ago = 9
	}
	if extra := w - 120; extra > 0 {
		c.kind += min(extra/4, 8)
		c.actor += min(extra/3, 30)
		c.subj += min(extra/3, 24)
	}
	used := 2 + c.seq + c.at + c.kind + c.actor + c.subj + 5
	if c.ago > 0 {
		used += c.ago + 1
	}
	c.sum = max(w-used, 8)
	return c
}

func (p *receiptsPane) view(w, h int) string {
	p.h = h
	th := p.sh.th
	vis := p.visible()
	title := fmt.Sprintf("Receipts · newest %d", len(p.rs))
	if p.loading {
		title = "Receipts · reading the newest…"
	}
	if p.kind != "" {
		title += " of kind " + plain(p.kind, 30)
	}
	empty := "  no receipts" + map[bool]string{true: " of kind " + plain(p.kind, 30), false: ""}[p.kind != ""]
	if p.loading {
		empty = "  reading…"
	} else if p.query != "" {
		title, empty = p.filterTitle(len(vis))
	} else if p.scanning {
		title += " · reading older…"
	}
	c := receiptWidths(w)
	cols := func(seq, at, rel, kind, actor, subj, sum string) string {
		s := fmt.Sprintf("%*s %s ", c.seq, plain(seq, c.seq), fit(plain(at, c.at), c.at))
		if c.ago > 0 {
			s += fmt.Sprintf("%*s ", c.ago, plain(rel, c.ago))
		}
		return s + fmt.Sprintf("%s %s %s %s", fit(plain(kind, c.kind), c.kind),
			fit(midCut(actor, c.actor), c.actor), fit(midCut(subj, c.subj), c.subj), plain(sum, c.sum))
	}
	out := []string{fit(th.Title.Render(title), w), fit("  "+th.TableHead.Render(cols("seq", "time", "", "kind", "actor", "subject", "summary")), w)}
	rows := max(h-2, 1)
	if len(vis) > 0 && p.hidden(p.sel) {
		p.sel = vis[p.at(vis)] // the cursor rests on a row shown
	}
	p.off = scrollOff(p.off, p.at(vis), rows, len(vis))
	if len(vis) == 0 {
		out = append(out, th.Dim.Render(empty))
	}
	now := p.sh.now()
	for j := p.off; j < len(vis) && len(out) < h; j++ {
		i := vis[j]
		r := p.rs[i]
		line := cols(fmt.Sprint(r.Seq), stamp(r.At, now), ago(r.At, now), r.Kind, p.sh.actorShort(string(r.Actor)), r.Subject, OneLine(r.Summary))
		if i == p.sel {
			out = append(out, th.Selected.Render(fit("▸ "+line, w)))
		} else {
			out = append(out, "  "+receiptStyle(th, r.Kind).Render(line))
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

func receiptStyle(th themeT, kind string) (s styleT) {
	switch {
	case strings.HasPrefix(kind, engine.KindFamilyRequest), strings.HasPrefix(kind, engine.KindFamilyPolicy):
		return th.Pending
	case strings.HasSuffix(kind, ".error"), strings.HasSuffix(kind, ".failed"):
		return th.LevelError
	}
	return th.LevelInfo
}

// eng is the engine as this pane needs it: the receipts.
func (p *receiptsPane) eng() engine.Receipts { return p.sh.e }
