package tui

import (
	"testing"

	"github.com/charmbracelet/lipgloss"

	"github.com/wardenhq/warden/engine/termsafe"
)

// TestCellWidthsAreLipglossWidths: every rune the console draws as itself
// takes the cells lipgloss measures for it, so a pane's columns, padded
// and cut by lipgloss, line up with what cell counted when it drew them.
func TestCellWidthsAreLipglossWidths(t *testing.T) {
	bad := 0
	for r := rune(0xa0); r < 0x32000; r++ {
		if termsafe.Escapes(r) || r >= 0xd800 && r < 0xe000 {
			continue
		}
		s, w := cell(r, 0)
		if lw := lipgloss.Width(s); w != lw {
			if bad++; bad <= 10 {
				t.Errorf("%U %q: cell says %d cells, lipgloss %d", r, s, w, lw)
			}
		}
	}
	if bad > 10 {
		t.Errorf("... %d runes in all", bad)
	}
}
