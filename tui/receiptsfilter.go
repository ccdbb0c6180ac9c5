package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/wardenhq/warden/engine"
)

// The receipts pane's / filter. What the operator types is text, matched
// (smart case, as in every list) against what a row shows: seq, kind,
// actor, subject and summary. A kind stays reachable: "kind=hook." or a
// token that reads as one ("hook.", "request.decide") selects by kind
// through the engine's key-range read, as `:receipts kind=hook.` does;
// the rest of the line is the text.
//
// A text filter never blocks keys: the receipts held are filtered at
// once, and older ones are read off the UI goroutine (receiptsScanMsg),
// receiptsScan at a time, until a screen of matches is found or the
// chain's start; the title says how many matched of how many were read.
// Invariant: a scan's answer is used only if the pane is still where the
// scan began (same gen, same from); any filter change or re-read bumps
// gen, so a stale answer is dropped.

// receiptFamilies are the kind families a typed token must start with to
// read as a kind: "example.com" is text, "hook.end" a kind.
var receiptFamilies = engine.KindFamilies()

// receiptsReads is the receipts pane's reads in flight (the newest page,
// the page above, a text filter's slices) and its text filter.
type receiptsReads struct {
	typed    string // the filter line as typed, offered again by /
	query    string // the text part ("" for none)
	from     uint64 // seq of the oldest receipt read; the next read is below it
	read     int    // receipts the scan read below the page(s) held in full
	scanning bool   // a read is under way
	// pending is where the cursor goes when the page above comes (no
	// text filter): an index relative to the first row held before it
	// (-1 the row above), or pendingTop; pendingAt is the cursor it was
	// asked from (a cursor moved since stays where it is).
	pending, pendingAt int
	wheelOlder         bool // the wheel went above the first row held
	loading            bool // reload's read is under way
	early              []engine.Receipt
	kindNote           bool   // say how many of the kind when the page comes
	want               int    // matches wanted before the scan pauses
	gen                int    // bumped at every change that makes a read in flight stale
	cacheKey           visKey // what vis and hide were computed for
	vis                []int
	hide               []bool
}

type visKey struct {
	n           int
	first, last uint64
	q           string
	gen         int
}

// receiptsScanMsg is one slice of older receipts read for a text filter.
type receiptsScanMsg struct {
	gen    int
	before uint64
	limit  int
	rs     []engine.Receipt
	err    error
}

// pendingTop: the page above was asked for by g (the top).
const pendingTop = -1 << 30

// parseReceiptFilter splits a filter line into a kind (engine filter
// form) and the text.
func parseReceiptFilter(s string) (kind, text string) {
	var rest []string
	for _, f := range strings.Fields(s) {
		if v, ok := strings.CutPrefix(f, "kind="); ok && kind == "" {
			kind = kindFilter(v)
			continue
		}
		if kind == "" && kindLike(f) {
			kind = f
			continue
		}
		rest = append(rest, f)
	}
	return kind, strings.Join(rest, " ")
}

// kindLike reports whether a token reads as a receipt kind or family:
// a known family, a dot, and lower-case letters after it (or nothing).
func kindLike(f string) bool {
	fam, sub, ok := strings.Cut(f, ".")
	if !ok {
		return false
	}
	known := false
	for _, k := range receiptFamilies {
		known = known || fam+"." == k
	}
	if !known {
		return false
	}
	for _, r := range sub {
		if (r < 'a' || r > 'z') && r != '_' && r != '-' {
			return false
		}
	}
	return true
}

// setFilter applies a filter line: a new kind re-reads the newest page
// (by key range); a text filters what is held and reads older receipts
// in the background until a screen of matches.
func (p *receiptsPane) setFilter(typed string) tea.Cmd {
	kind, text := parseReceiptFilter(typed)
	p.typed, p.atEnd = strings.TrimSpace(typed), true
	if kind != p.kind {
		p.query = text
		p.kindNote = kind != ""
		return p.rekind(kind) // the text is applied when the page comes
	}
	p.query = text
	p.restart()
	p.sel = p.lastShown()
	p.off = 0
	switch {
	case p.query != "":
		return p.findScreen()
	case p.kind != "":
		p.sh.setStatus(fmt.Sprintf("%d receipts of kind %s", len(p.rs), p.kind), false)
	}
	return nil
}

// clearFilter is esc: the whole newest page again, text and kind gone.
func (p *receiptsPane) clearFilter() tea.Cmd {
	if p.kind == "" && p.query == "" {
		return nil
	}
	p.query, p.typed, p.atEnd = "", "", true
	if p.kind != "" {
		return p.rekind("")
	}
	p.restart()
	p.sel = p.lastShown()
	return nil
}

// restart forgets the scan: what it held beyond the receipts read in
// full is dropped (it matched another text), and a read in flight is
// stale.
func (p *receiptsPane) restart() {
	if p.sparse > 0 {
		p.rs = p.rs[p.sparse:]
		p.sparse, p.oldest = 0, false
	}
	p.from = 0
	if len(p.rs) > 0 {
		p.from = p.rs[0].Seq
	}
	p.read, p.scanning, p.want, p.pending, p.wheelOlder = 0, false, 0, 0, false
	p.loading, p.early = false, nil
	p.gen++
}

// rowText is what a receipt's row shows, for the text filter.
func (p *receiptsPane) rowText(r *engine.Receipt) string {
	return fmt.Sprintf("%d %s %s %s %s %s", r.Seq, r.Kind, p.sh.actorShort(string(r.Actor)), r.Actor, r.Subject, OneLine(r.Summary))
}

func (p *receiptsPane) match(r *engine.Receipt) bool {
	return p.query == "" || contains(p.rowText(r), p.query)
}

// visible lists the indexes of the rows shown, in order (every row held
// without a text filter). It is computed once per change of what is held.
func (p *receiptsPane) visible() []int {
	k := visKey{n: len(p.rs), q: p.query, gen: p.gen}
	if len(p.rs) > 0 {
		k.first, k.last = p.rs[0].Seq, p.rs[len(p.rs)-1].Seq
	}
	if k != p.cacheKey || p.hide == nil {
		p.hide = make([]bool, len(p.rs))
		for i := range p.rs {
			p.hide[i] = !p.match(&p.rs[i])
		}
		p.vis = shownRows(len(p.rs), func(i int) bool { return p.hide[i] })
		p.cacheKey = k
	}
	return p.vis
}

// hidden reports whether the text filter hides row i.
func (p *receiptsPane) hidden(i int) bool {
	p.visible()
	return i < len(p.hide) && p.hide[i]
}

// selected is the receipt under the cursor; false when no row is shown
// (a filter that matched nothing leaves the cursor on a hidden one).
func (p *receiptsPane) selected() (engine.Receipt, bool) {
	if p.sel >= len(p.rs) || p.hidden(p.sel) {
		return engine.Receipt{}, false
	}
	return p.rs[p.sel], true
}

// lastShown is the newest row shown (0 when none).
func (p *receiptsPane) lastShown() int {
	if vis := p.visible(); len(vis) > 0 {
		return vis[len(vis)-1]
	}
	return max(len(p.rs)-1, 0)
}

// keyFiltered handles a key while a text filter is on: moves go among
// the matches, and going up past the first one reads older receipts in
// the background (the cursor stays; the matches found appear above it).
func (p *receiptsPane) keyFiltered(msg tea.KeyMsg, page int) tea.Cmd {
	k := p.k
	vis := p.visible()
	at := p.at(vis)
	if sel, ok := navKey(msg, k.KeyMap, at, len(vis), page, nil); ok {
		up := key.Matches(msg, k.Up, k.PageUp, k.Top)
		if len(vis) > 0 {
			p.sel, p.atEnd = vis[sel], sel == len(vis)-1
		}
		if up && (at == 0 || sel == 0) && !p.oldest {
			p.want = len(vis) + max(p.h-2, 1)
			return p.scanOlder()
		}
		return nil
	}
	return p.action(msg)
}

// at is the cursor's place among the rows shown.
func (p *receiptsPane) at(vis []int) int {
	for j, i := range vis {
		if i >= p.sel {
			return j
		}
	}
	return max(len(vis)-1, 0)
}

// moveFiltered moves the cursor d rows among the matches (the wheel).
func (p *receiptsPane) moveFiltered(d int) {
	vis := p.visible()
	if len(vis) == 0 {
		return
	}
	j := min(max(p.at(vis)+d, 0), len(vis)-1)
	p.sel, p.atEnd = vis[j], j == len(vis)-1
}

// scanOlder reads the next slice of older receipts for the text filter.
func (p *receiptsPane) scanOlder() tea.Cmd {
	if p.query == "" {
		return nil
	}
	return p.readOlder()
}

// readOlder reads the receipts above the oldest read, off the UI
// goroutine (a page without a text filter, a slice with one), unless a
// read is under way or there is nothing older.
func (p *receiptsPane) readOlder() tea.Cmd {
	if p.scanning || p.loading || p.oldest || p.from == 0 {
		return nil
	}
	p.scanning = true
	limit := receiptsLoad
	if p.query != "" {
		limit = receiptsScan
	}
	e, gen := p.eng(), p.gen
	f := engine.ReceiptFilter{Kind: p.kind, Limit: limit, Before: p.from}
	return func() tea.Msg {
		rs, err := e.Receipts(f)
		return receiptsScanMsg{gen: gen, before: f.Before, limit: limit, rs: rs, err: err}
	}
}

// paged takes the page above what is held (no text filter).
func (p *receiptsPane) paged(rs []engine.Receipt) {
	p.rs = append(rs, p.rs...)
	n := len(rs)
	if p.sel == p.pendingAt && p.pending != 0 {
		if p.pending == pendingTop {
			p.sel = 0
		} else {
			p.sel = min(max(n+p.pending, 0), max(len(p.rs)-1, 0))
		}
	} else {
		p.sel += n
	}
	p.pending = 0
	p.off += n // the rows on screen stay where they were
	p.atEnd = p.sel == len(p.rs)-1
}

// scanned takes a slice read by scanOlder: its matches go above what is
// held, and the scan goes on while a screen of matches is wanted.
func (p *receiptsPane) scanned(m receiptsScanMsg) tea.Cmd {
	if m.gen != p.gen || m.before != p.from || !p.scanning {
		return nil // the filter changed, or the list was re-read, since
	}
	p.scanning = false
	if m.err != nil {
		p.sh.errStatus(m.err)
		return nil
	}
	p.oldest = len(m.rs) < m.limit
	if len(m.rs) > 0 {
		p.from = m.rs[0].Seq
	}
	if p.query == "" {
		p.paged(m.rs)
		return nil
	}
	p.read += len(m.rs)
	var found []engine.Receipt
	for i := range m.rs {
		if p.match(&m.rs[i]) {
			found = append(found, m.rs[i])
		}
	}
	if len(found) > 0 {
		p.rs = append(found, p.rs...)
		p.sparse += len(found)
		p.sel += len(found)
		p.off += len(found) // the rows on screen stay where they were
	}
	return p.moreWanted()
}

// findScreen starts a text filter's search for a screen of matches:
// older receipts are read only if what is held shows fewer.
func (p *receiptsPane) findScreen() tea.Cmd {
	if p.query == "" {
		return nil
	}
	p.want = max(p.h-2, 1)
	return p.moreWanted()
}

// moreWanted reads the next older slice while fewer matches than wanted
// are held.
func (p *receiptsPane) moreWanted() tea.Cmd {
	if len(p.visible()) < p.want {
		return p.scanOlder()
	}
	return nil
}

// filterTitle is the title's filter part and the line an empty result
// shows.
func (p *receiptsPane) filterTitle(shown int) (title, empty string) {
	read := len(p.rs) - p.sparse + p.read
	q := plain(p.query, 40)
	title = fmt.Sprintf("Receipts · %d matching %q of %d read", shown, q, read)
	if p.kind != "" {
		title += " of kind " + plain(p.kind, 30)
	}
	var more string
	switch {
	case p.scanning:
		more = " · reading older…"
	case p.oldest:
		more = " · all read"
	default:
		more = " · ↑ reads older"
	}
	title += more + " (esc clears)"
	empty = fmt.Sprintf("  no receipts match %q in the %d read", q, read)
	switch {
	case p.scanning:
		empty += "; reading older…"
	case p.oldest:
		empty += ", back to the chain's start"
	default:
		empty += "; ↑ reads older"
	}
	return title, empty
}
