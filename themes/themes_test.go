package themes

import (
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
	for _, th := range []Theme{Dark(), Light(), Contrast()} {
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
