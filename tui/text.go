package tui

import (
	"fmt"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/wardenhq/warden/engine/termsafe"
)

// Stream text comes from hooks: it may hold tabs, escape sequences and
// other control characters, and lines may be a megabyte long. Everything
// here works on display cells and stops as soon as it has what it needs,
// so the cost of drawing a line follows the view, not the line.

// cutMarker ends a line cut at the view's edge.
const cutMarker = "…→"

// cell is one rune as drawn: termsafe's rule, the one the CLI uses too.
// Control characters become their visible "control picture" (ESC shows as
// ␛), so a hook cannot drive the terminal.
func cell(r rune, col int) (s string, w int) { return termsafe.Rune(r, col) }

// safe is a hook's or module author's string escaped for one line of the
// console, whole (plain also cuts it to a width). Every such string goes
// through one of the two before lipgloss or the terminal sees it:
// lipgloss measures and cuts escape sequences as styling, it does not
// neutralise them.
func safe(s string) string { return termsafe.String(s) }

// textWidth is the display width of s as cells would draw it.
func textWidth(s string) int {
	col := 0
	for _, r := range s {
		if r < 0x80 && r >= 0x20 && r != 0x7f {
			col++
			continue
		}
		_, w := cell(r, col)
		col += w
	}
	return col
}

// segment draws the cells of s from cell skip on, at most width cells wide.
// more reports that s goes on past the returned cells.
func segment(s string, skip, width int) (out string, w int, more bool) {
	var b strings.Builder
	col := 0
	for i, r := range s {
		if col >= skip+width {
			return b.String(), w, i < len(s)
		}
		if r >= 0x20 && r < 0x7f { // fast path: printable ASCII
			if col >= skip {
				b.WriteByte(byte(r))
				w++
			}
			col++
			continue
		}
		c, cw := cell(r, col)
		if col >= skip && col+cw <= skip+width {
			b.WriteString(c)
			w += cw
		} else if col+cw > skip+width && col >= skip {
			// A wide rune that does not fit: stop here.
			return b.String(), w, true
		}
		col += cw
	}
	return b.String(), w, false
}

// cutMarkerWidth is the cells cutMarker takes.
const cutMarkerWidth = 2

// cutLine draws s in width cells; a longer s is cut and ends with the
// marker (which the caller adds). w is the cells of text.
func cutLine(s string, width int) (text string, w int, cut bool) {
	if width <= 0 {
		return "", 0, s != ""
	}
	out, w, more := segment(s, 0, width)
	if !more {
		return out, w, false
	}
	if width <= cutMarkerWidth {
		return "", 0, true
	}
	out, w, _ = segment(s, 0, width-cutMarkerWidth)
	return out, w, true
}

// paint is a style as the escape codes around its text, measured once:
// applying it is two concatenations. Only for styles without padding,
// margins, borders or widths (colours and attributes).
type paint struct{ pre, post string }

func newPaint(st styleT) paint {
	r := st.Render("\x00")
	i := strings.IndexByte(r, 0)
	if i < 0 {
		return paint{}
	}
	return paint{pre: r[:i], post: r[i+1:]}
}

func (p paint) s(text string) string {
	if text == "" || (p.pre == "" && p.post == "") {
		return text
	}
	return p.pre + text + p.post
}

// wrapRows splits s into rows of width cells and returns rows
// [from, from+n). It scans s only as far as those rows reach.
func wrapRows(s string, width, from, n int) []string {
	if width <= 0 || n <= 0 {
		return nil
	}
	// Printable ASCII (the common case, and a long line's usual shape):
	// rows are byte ranges, found without walking the line.
	if end := min(len(s), (from+n)*width); isPrintable(s[:end]) {
		var rows []string
		for r := from; r < from+n; r++ {
			lo := r * width
			if lo >= len(s) && !(r == 0 && len(s) == 0) {
				break
			}
			rows = append(rows, s[lo:min(lo+width, len(s))])
		}
		return rows
	}
	var rows []string
	var b strings.Builder
	col, row, rowCol := 0, 0, 0
	flush := func() {
		if row >= from {
			rows = append(rows, b.String())
		}
		b.Reset()
		row++
		rowCol = 0
	}
	for _, r := range s {
		c, cw := cell(r, col)
		if rowCol+cw > width && rowCol > 0 {
			flush()
			if len(rows) >= n {
				return rows
			}
		}
		if row >= from {
			b.WriteString(c)
		}
		col += cw
		rowCol += cw
	}
	if row >= from && len(rows) < n {
		rows = append(rows, b.String())
	}
	return rows
}

// rowsFor is how many rows of width cells a line of w cells takes.
func rowsFor(w, width int) int {
	if width <= 0 || w <= width {
		return 1
	}
	return (w + width - 1) / width
}

// fit pads or cuts a short, already styled string to exactly width cells.
func fit(s string, width int) string {
	w := lipgloss.Width(s)
	if w == width {
		return s
	}
	if w < width {
		return s + strings.Repeat(" ", width-w)
	}
	return truncate(s, width)
}

// truncate cuts a plain or styled string to width cells, ending in "…".
func truncate(s string, width int) string {
	if width <= 0 {
		return ""
	}
	if lipgloss.Width(s) <= width {
		return s
	}
	return ansiTruncate(s, width-1) + "…"
}

// plain cuts an unstyled string (which may be long or hold control
// characters) to width cells with "…".
func plain(s string, width int) string {
	if width <= 0 {
		return ""
	}
	out, _, more := segment(s, 0, width)
	if !more {
		return out
	}
	out, _, _ = segment(s, 0, width-1)
	return out + "…"
}

// OneLine folds whitespace runs (newlines included) into single spaces.
func OneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// highlight paints every occurrence of q in seg with m, and the rest with
// base. q is matched without regard to case when it is all lower case.
func highlight(seg, q string, base, m paint) string {
	if q == "" || len(seg) < len(q) {
		return base.s(seg)
	}
	hay := seg
	if isLower(q) {
		hay = strings.ToLower(seg)
		if len(hay) != len(seg) { // case folding changed lengths: no highlight
			return base.s(seg)
		}
	}
	j := strings.Index(hay, q)
	if j < 0 {
		return base.s(seg)
	}
	var b strings.Builder
	i := 0
	for j >= 0 {
		if j > 0 {
			b.WriteString(base.s(seg[i : i+j]))
		}
		b.WriteString(m.s(seg[i+j : i+j+len(q)]))
		i += j + len(q)
		j = strings.Index(hay[i:], q)
	}
	if i < len(seg) {
		b.WriteString(base.s(seg[i:]))
	}
	return b.String()
}

func isLower(s string) bool { return strings.ToLower(s) == s }

// contains reports whether text holds q (smart case, as highlight).
func contains(text, q string) bool {
	if q == "" {
		return false
	}
	if isLower(q) {
		return indexFold(text, q) >= 0
	}
	return strings.Contains(text, q)
}

// indexFold is a case-insensitive Index for a lower-case needle that does
// not allocate a lowered copy of a long haystack.
func indexFold(s, lowerQ string) int {
	if isASCII(lowerQ) {
		n := len(lowerQ)
		first := lowerQ[0]
		for i := 0; i+n <= len(s); i++ {
			c := s[i]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != first {
				continue
			}
			ok := true
			for k := 1; k < n; k++ {
				d := s[i+k]
				if 'A' <= d && d <= 'Z' {
					d += 'a' - 'A'
				}
				if d != lowerQ[k] {
					ok = false
					break
				}
			}
			if ok {
				return i
			}
		}
		return -1
	}
	return strings.Index(strings.ToLower(s), lowerQ)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func ansiTruncate(s string, width int) string { return ansi.Truncate(s, width, "") }

// isPrintable reports whether s is printable ASCII only.
func isPrintable(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			return false
		}
	}
	return true
}

// listMouse applies the mouse to a list pane: the wheel moves the
// selection by step, and a left press selects the row under the pointer
// (rows start top lines down, scrolled by off). It returns the clicked
// row's index, or -1 when the event selected nothing.
func listMouse(msg tea.MouseMsg, step, top, off, n int, move func(int)) int {
	switch msg.Button {
	case tea.MouseButtonWheelUp:
		move(-step)
	case tea.MouseButtonWheelDown:
		move(step)
	case tea.MouseButtonLeft:
		if msg.Action == tea.MouseActionPress && msg.Y >= top {
			if i := off + msg.Y - top; i < n {
				return i
			}
		}
	}
	return -1
}

// ShortDuration is a compact duration for a column or a line: 0s, 42s,
// 3m05s, 2h07m, 3d04h; a negative one is 0s. The console and the CLI both
// use it, so a request's age reads the same in either.
func ShortDuration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int(d / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	case s < 86400:
		return fmt.Sprintf("%dh%02dm", s/3600, s%3600/60)
	}
	return fmt.Sprintf("%dd%02dh", s/86400, s%86400/3600)
}

// noteText escapes what huh's note would read as markup.
func noteText(s string) string {
	r := strings.NewReplacer(`\`, `\\`, "_", `\_`, "*", `\*`, "`", "\\`")
	return r.Replace(s)
}

// wrapStyled wraps plain text to width and styles each row.
func wrapStyled(st styleT, s string, width int) []string {
	return wrapHanging(st, "", "", s, width)
}

// wrapHanging wraps s to width after a first-row prefix, later rows
// indented by rest.
func wrapHanging(st styleT, first, rest, s string, width int) []string {
	var out []string
	for i, l := range wordWrap(safe(s), max(width-textWidth(rest), 10)) {
		pre := rest
		if i == 0 {
			pre = first
		}
		out = append(out, pre+st.Render(l))
	}
	return out
}

// wordWrap breaks s at spaces into rows of at most width cells (a word
// longer than that is cut into pieces).
func wordWrap(s string, width int) []string {
	var rows []string
	for _, para := range strings.Split(s, "\n") {
		line := ""
		for _, word := range strings.Fields(para) {
			for textWidth(word) > width {
				if line != "" {
					rows = append(rows, line)
					line = ""
				}
				cut := wrapRows(word, width, 0, 1)[0]
				rows = append(rows, cut)
				word = word[len(cut):]
			}
			switch {
			case line == "":
				line = word
			case textWidth(line)+1+textWidth(word) <= width:
				line += " " + word
			default:
				rows = append(rows, line)
				line = word
			}
		}
		rows = append(rows, line)
	}
	return rows
}
