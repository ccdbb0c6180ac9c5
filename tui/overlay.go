package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
)

// overlay is a scrollable box over the body: a whole stream line, a
// receipt's detail, the full help. Its rows are laid out for the width it
// is shown at, and only the visible rows are drawn.
type overlay struct {
	sh     *shared
	title  string
	layout func(width int) []string // rows for a content width
	rows   []string
	width  int
	off    int
	height int
	keys   overlayKeys
	// toEnd opens the overlay scrolled to its last row (a log).
	toEnd bool
}

func newOverlay(sh *shared, title string, layout func(width int) []string) *overlay {
	return &overlay{sh: sh, title: title, layout: layout, keys: newOverlayKeys()}
}

// textOverlay shows text (with newlines), wrapped to the box.
func textOverlay(sh *shared, title, text string) *overlay {
	return newOverlay(sh, title, func(w int) []string {
		var out []string
		for _, l := range strings.Split(text, "\n") {
			rows := wrapRows(l, w, 0, 1<<30)
			if len(rows) == 0 {
				rows = []string{""}
			}
			out = append(out, rows...)
		}
		return out
	})
}

func (o *overlay) contentSize(w, h int) (int, int) { return max(w-4, 1), max(h-3, 1) }

func (o *overlay) Update(msg tea.Msg) (closed bool) {
	page := max(o.height-1, 1)
	switch msg := msg.(type) {
	case tea.KeyMsg:
		switch {
		case key.Matches(msg, o.keys.Close):
			return true
		case key.Matches(msg, o.keys.Up):
			o.off--
		case key.Matches(msg, o.keys.Down):
			o.off++
		case key.Matches(msg, o.keys.PageUp):
			o.off -= page
		case key.Matches(msg, o.keys.PageDown):
			o.off += page
		case key.Matches(msg, o.keys.Top):
			o.off = 0
		case key.Matches(msg, o.keys.Bottom):
			o.off = len(o.rows)
		}
	case tea.MouseMsg:
		switch msg.Button {
		case tea.MouseButtonWheelUp:
			o.off -= 3
		case tea.MouseButtonWheelDown:
			o.off += 3
		}
	}
	o.clamp()
	return false
}

func (o *overlay) clamp() {
	o.off = min(o.off, len(o.rows)-o.height)
	o.off = max(o.off, 0)
}

func (o *overlay) View(w, h int) string {
	cw, ch := o.contentSize(w, h)
	if cw != o.width || o.rows == nil {
		o.rows = o.layout(cw)
		o.width = cw
	}
	o.height = ch
	if o.toEnd {
		o.off, o.toEnd = len(o.rows), false
	}
	o.clamp()
	th := o.sh.th
	end := min(o.off+ch, len(o.rows))
	pos := ""
	if len(o.rows) > ch {
		pos = fmt.Sprintf(" %d-%d of %d ", o.off+1, end, len(o.rows))
	}
	var b strings.Builder
	title := " " + o.title + " "
	top := "╭─" + th.Title.Render(plain(title, max(cw-len(pos), 1))) + th.Border.Render(strings.Repeat("─", max(cw+1-textWidth(plain(title, max(cw-len(pos), 1)))-len(pos), 0))) + th.Dim.Render(pos) + "╮"
	b.WriteString(fit(top, w))
	for i := 0; i < ch; i++ {
		b.WriteByte('\n')
		row := ""
		if o.off+i < end {
			row = o.rows[o.off+i]
		}
		b.WriteString(fit(th.Border.Render("│")+" "+fit(row, cw)+" "+th.Border.Render("│"), w))
	}
	b.WriteByte('\n')
	hint := " esc close · ↑↓ pgup pgdn g G scroll "
	b.WriteString(fit(th.Border.Render("╰─")+th.Dim.Render(plain(hint, cw))+th.Border.Render(strings.Repeat("─", max(cw-textWidth(hint), 0))+"─╯"), w))
	return b.String()
}
