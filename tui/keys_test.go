package tui

import (
	"fmt"
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
)

// One navigation KeyMap: b, ctrl+b and pgup page up (space, ctrl+f and
// pgdown page down) in a list pane exactly as in the overlay. They used
// to disagree: b paged the overlay, ctrl+b the Receipts list.
func TestNavigationKeysAgree(t *testing.T) {
	e := newEngine(t)
	for i := range 40 {
		if err := e.SetConfig("local:test", "mod", fmt.Sprintf("k%02d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	keys := map[string]tea.KeyMsg{
		"b": {Type: tea.KeyRunes, Runes: []rune("b")}, "ctrl+b": {Type: tea.KeyCtrlB}, "pgup": {Type: tea.KeyPgUp},
		"space": {Type: tea.KeySpace, Runes: []rune(" ")}, "ctrl+f": {Type: tea.KeyCtrlF}, "pgdown": {Type: tea.KeyPgDown},
	}
	for _, up := range []string{"b", "ctrl+b", "pgup"} {
		p := newReceiptsPane(testShared(e))
		p.update(p.show()()) // the newest page, read as the console would
		last := p.sel
		p.update(keys[up])
		if want := last - (p.h - 3); p.sel != want {
			t.Errorf("receipts: %s moved the cursor from %d to %d, want %d (a page up)", up, last, p.sel, want)
		}
	}
	for _, down := range []string{"space", "ctrl+f", "pgdown"} {
		p := newReceiptsPane(testShared(e))
		p.update(p.show()()) // the newest page, read as the console would
		p.sel = 0
		p.update(keys[down])
		if p.sel != p.h-3 {
			t.Errorf("receipts: %s moved the cursor from 0 to %d, want %d (a page down)", down, p.sel, p.h-3)
		}
	}
	// The overlay: the same keys page a long text.
	for _, k := range []string{"b", "ctrl+b", "pgup", "space", "ctrl+f", "pgdown"} {
		o := textOverlay(testShared(e), "long", strings.Repeat("line\n", 200))
		o.View(80, 24)
		o.off = 100
		o.Update(keys[k])
		if o.off == 100 {
			t.Errorf("overlay: %s did not page", k)
		}
	}
}
