package themes

import (
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/charmbracelet/lipgloss"
)

// styles returns every lipgloss.Style field of t by name.
func styles(t Theme) map[string]lipgloss.Style {
	out := map[string]lipgloss.Style{}
	v := reflect.ValueOf(t)
	for i := 0; i < v.NumField(); i++ {
		if s, ok := v.Field(i).Interface().(lipgloss.Style); ok {
			out[v.Type().Field(i).Name] = s
		}
	}
	return out
}

func TestByName(t *testing.T) {
	t.Setenv("NO_COLOR", "")
	for _, n := range []string{"dark", "light", "contrast", "DARK", ""} {
		th, err := ByName(n)
		if err != nil {
			t.Fatalf("ByName(%q): %v", n, err)
		}
		if th.Name == "" {
			t.Errorf("ByName(%q) has no name", n)
		}
	}
	if _, err := ByName("neon"); err == nil {
		t.Error("ByName(neon) did not fail")
	}
}

func TestColoursAreAdaptive(t *testing.T) {
	for _, th := range []Theme{Dark(), Contrast()} {
		n := 0
		for name, s := range styles(th) {
			for _, c := range []lipgloss.TerminalColor{s.GetForeground(), s.GetBackground()} {
				switch c.(type) {
				case lipgloss.AdaptiveColor:
					n++
				case lipgloss.NoColor:
				default:
					t.Errorf("%s.%s uses %T, want lipgloss.AdaptiveColor", th.Name, name, c)
				}
			}
		}
		if n < 20 {
			t.Errorf("%s: only %d adaptive colours", th.Name, n)
		}
	}
}

func TestNoColor(t *testing.T) {
	t.Setenv("NO_COLOR", "1")
	th, err := ByName("contrast")
	if err != nil {
		t.Fatal(err)
	}
	if th.Name != "none" {
		t.Fatalf("NO_COLOR=1: got theme %q, want none", th.Name)
	}
	for name, s := range styles(th) {
		for _, c := range []lipgloss.TerminalColor{s.GetForeground(), s.GetBackground(), s.GetBorderTopForeground()} {
			if _, ok := c.(lipgloss.NoColor); !ok {
				t.Errorf("NoColor.%s has colour %v", name, c)
			}
		}
	}
	if !th.Selected.GetReverse() {
		t.Error("NoColor: the selected row must still stand out (reverse)")
	}
}

// luminance is a colour's WCAG relative luminance.
func luminance(hex string) float64 {
	var r, g, b int
	fmt.Sscanf(hex, "#%02x%02x%02x", &r, &g, &b)
	lin := func(v int) float64 {
		c := float64(v) / 255
		if c <= 0.03928 {
			return c / 12.92
		}
		return math.Pow((c+0.055)/1.055, 2.4)
	}
	return 0.2126*lin(r) + 0.7152*lin(g) + 0.0722*lin(b)
}

func contrastRatio(a, b string) float64 {
	la, lb := luminance(a), luminance(b)
	if la < lb {
		la, lb = lb, la
	}
	return (la + 0.05) / (lb + 0.05)
}

// TestLightIsReadableOnBothBackgrounds: --theme light asks nothing of the
// terminal's background (no adaptive colour), draws text in the
// terminal's own foreground, and every colour on the default background
// reads on white and on black; a colour on a background of its own has a
// foreground that reads on it.
func TestLightIsReadableOnBothBackgrounds(t *testing.T) {
	for name, s := range styles(Light()) {
		fg, bg := s.GetForeground(), s.GetBackground()
		for _, c := range []lipgloss.TerminalColor{fg, bg} {
			if _, ok := c.(lipgloss.AdaptiveColor); ok {
				t.Errorf("light.%s follows the detected background (%T)", name, c)
			}
		}
		fc, fok := fg.(lipgloss.Color)
		bc, bok := bg.(lipgloss.Color)
		switch {
		case bok && !fok:
			t.Errorf("light.%s has a background (%s) and the terminal's foreground: unreadable somewhere", name, bc)
		case bok && fok:
			if r := contrastRatio(string(fc), string(bc)); r < 3 {
				t.Errorf("light.%s: %s on %s, contrast %.1f", name, fc, bc, r)
			}
		case fok:
			for _, back := range []string{"#ffffff", "#000000"} {
				if r := contrastRatio(string(fc), back); r < 3 {
					t.Errorf("light.%s: %s on %s, contrast %.1f", name, fc, back, r)
				}
			}
		}
	}
}
