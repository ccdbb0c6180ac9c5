package tui

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/themes"
)

// fleetWithRuns is a fleet of three pending requests, two hosts and
// three runs.
func fleetWithRuns() *fakeFleet {
	f := newFakeFleet()
	f.ask("hostb", 3, "deploy", "Restart nginx?", 3*time.Minute)
	f.ask("hostc", 4, "backup", "Prune old snapshots?", 2*time.Minute)
	f.ask("hosta", 9, "audit", "Rotate keys?", time.Minute)
	now := time.Now()
	f.hosts = []engine.FleetHost{{Host: "hosta", Up: true, Beat: &engine.FleetBeat{At: now, Running: 1}},
		{Host: "hostb", Up: true, Beat: &engine.FleetBeat{At: now}}}
	f.runs = []engine.FleetRun{
		{Host: "hosta", ID: "run-newest", Module: "audit", Hook: "go", Status: engine.RunRunning, Started: now},
		{Host: "hostb", ID: "run-middle", Module: "deploy", Hook: "go", Status: engine.RunSucceeded, Started: now.Add(-time.Minute)},
		{Host: "hostc", ID: "run-oldest", Module: "backup", Hook: "go", Status: engine.RunFailed, Started: now.Add(-2 * time.Minute)},
	}
	return f
}

// TestFleetKeysAreTheConsoles: every fleet tab moves with the console's
// KeyMap, and ? shows those keys (and the fleet's own) in the console's
// help, as the footer does.
func TestFleetKeysAreTheConsoles(t *testing.T) {
	f := fleetWithRuns()
	m := NewFleet(f, FleetOptions{Theme: themes.NoColor(), Name: "alice", Role: "operator"})
	nav := DefaultKeyMap()
	want := []key.Binding{nav.Up, nav.Down, nav.PageUp, nav.PageDown, nav.Top, nav.Bottom}
	for i, k := range []KeyMap{m.hosts.k, m.requests.k.KeyMap, m.runs.k} {
		for j, b := range []key.Binding{k.Up, k.Down, k.PageUp, k.PageDown, k.Top, k.Bottom} {
			if !slices.Equal(b.Keys(), want[j].Keys()) {
				t.Errorf("%s tab: nav key %q is %q, the console's KeyMap has %q", fleetTabNames[i], want[j].Help().Desc, b.Keys(), want[j].Keys())
			}
		}
	}

	tm := startFleet(t, f)
	// The footer is the console's help line: the tab's keys, ? and q.
	waitScreen(t, tm, "↑/k up", "y approve once", "n deny", "a approve always", "? all keys", "q quit")
	tm.Type("?")
	shown := []string{"Keys: Requests"}
	rk := m.requests.k
	for _, b := range []key.Binding{rk.Up, rk.Down, rk.PageUp, rk.PageDown, rk.Top, rk.Bottom, rk.Approve, rk.Deny, rk.Always} {
		shown = append(shown, b.Help().Key, b.Help().Desc)
	}
	for _, b := range append(m.keys.tabs(), m.keys.Help, m.keys.Quit) {
		shown = append(shown, b.Help().Key, b.Help().Desc)
	}
	waitScreen(t, tm, shown...)
	tm.Type("q") // closes the help, as on the console; it does not quit
	tm.Type("1")
	waitScreen(t, tm, "LAST CHECKPOINT")
	tm.Type("?")
	waitScreen(t, tm, "Keys: Hosts", "first host", "last host", "page down")
}

// TestFleetNavKeys: tab and shift+tab go round the tabs, the KeyMap's
// keys move each tab's own cursor (j, G, g, page down).
func TestFleetNavKeys(t *testing.T) {
	f := fleetWithRuns()
	tm := startFleet(t, f)
	// Requests: oldest pending first; G the last, g the first again,
	// page down the last.
	waitScreen(t, tm, "HOSTB    request 3", "Restart nginx?")
	tm.Type("G")
	waitScreen(t, tm, "HOSTA    request 9", "Rotate keys?")
	tm.Type("g")
	waitScreen(t, tm, "HOSTB    request 3")
	tm.Send(tea.KeyMsg{Type: tea.KeyPgDown})
	waitScreen(t, tm, "HOSTA    request 9")
	tm.Send(tea.KeyMsg{Type: tea.KeyUp})
	waitScreen(t, tm, "HOSTC    request 4")
	// tab: Runs, newest first; j moves down.
	tm.Send(tea.KeyMsg{Type: tea.KeyTab})
	waitScreen(t, tm, "STATUS", "▸HOSTA        run-newest")
	tm.Type("j")
	waitScreen(t, tm, "▸HOSTB        run-middle")
	tm.Type("G")
	waitScreen(t, tm, "▸HOSTC        run-oldest")
	// shift+tab twice: back past Requests (its cursor where it was) to
	// Hosts, where j moves down.
	tm.Send(tea.KeyMsg{Type: tea.KeyShiftTab})
	waitScreen(t, tm, "HOSTC    request 4")
	tm.Send(tea.KeyMsg{Type: tea.KeyShiftTab})
	waitScreen(t, tm, "LAST CHECKPOINT", "▸hosta")
	tm.Type("j")
	waitScreen(t, tm, "▸hostb")
	// tab from Runs wraps round to Hosts.
	tm.Type("3")
	waitScreen(t, tm, "▸HOSTC        run-oldest")
	tm.Send(tea.KeyMsg{Type: tea.KeyTab})
	waitScreen(t, tm, "LAST CHECKPOINT")
}

// TestFleetDrawsWithTheThemeOnly: the fleet console's code has no
// lipgloss style of its own, and every frame, in every state, is drawn
// with the Theme's styles: with the colourless theme on a true-colour
// terminal no colour reaches the screen, with a coloured one the
// theme's colours do.
func TestFleetDrawsWithTheThemeOnly(t *testing.T) {
	srcs, _ := filepath.Glob("fleet*.go")
	for _, name := range srcs {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, bad := range []string{"lipgloss", "Color(", `\x1b[`, "termenv"} {
			if strings.Contains(string(b), bad) {
				t.Errorf("%s holds %q: the fleet console draws with the Theme's styles only", name, bad)
			}
		}
	}
	if len(srcs) < 2 {
		t.Fatalf("found %q: run from tui/", srcs)
	}

	// Styles made inline would be drawn with lipgloss's default renderer:
	// give it colours too, so that one would show.
	oldProfile, oldDark := lipgloss.ColorProfile(), lipgloss.HasDarkBackground()
	lipgloss.SetColorProfile(termenv.TrueColor)
	lipgloss.SetHasDarkBackground(true)
	t.Cleanup(func() { lipgloss.SetColorProfile(oldProfile); lipgloss.SetHasDarkBackground(oldDark) })
	r := lipgloss.NewRenderer(io.Discard)
	r.SetColorProfile(termenv.TrueColor)
	r.SetHasDarkBackground(true)

	frames := func(th themes.Theme) map[string]string {
		f := fleetWithRuns()
		m := NewFleet(f, FleetOptions{Theme: th, Name: "alice", Role: "operator"})
		m.Update(tea.WindowSizeMsg{Width: 120, Height: 30})
		m.Update(fleetHostsMsg{hs: f.hosts})
		m.requests.decided(fleetDecidedMsg{r: engine.FleetReply{Message: "request 3 on hostb: refused"}})
		out := map[string]string{"requests": m.View()}
		for _, step := range []struct {
			name string
			keys []tea.KeyMsg
		}{
			{"deny prompt", []tea.KeyMsg{keyRune('n')}},
			{"always prompt", []tea.KeyMsg{{Type: tea.KeyEsc}, keyRune('a')}},
			{"help", []tea.KeyMsg{{Type: tea.KeyEsc}, keyRune('?')}},
			{"hosts", []tea.KeyMsg{keyRune('x'), keyRune('1'), keyRune('j')}},
			{"runs", []tea.KeyMsg{keyRune('3'), keyRune('j')}},
		} {
			for _, k := range step.keys {
				m.Update(k)
			}
			out[step.name] = m.View()
		}
		return out
	}

	plainTh, err := themes.Make("", true, r)
	if err != nil {
		t.Fatal(err)
	}
	for name, frame := range frames(plainTh) {
		if c := colourSGR(frame); c != "" {
			t.Errorf("%s, with the colourless theme: a colour reached the screen (%q)", name, c)
		}
		if !strings.Contains(frame, "\x1b[") {
			t.Errorf("%s: no style at all was drawn (the test would not see an inline one)", name)
		}
	}
	dark, err := themes.Make("dark", false, r)
	if err != nil {
		t.Fatal(err)
	}
	got := frames(dark)
	for name, want := range map[string]string{
		"requests":      dark.Badge.Render("  HOSTB  "), // the host banner
		"deny prompt":   dark.Brand.Render("warden fleet"),
		"always prompt": dark.Prompt.Render("Approve request 3 on hostb ALWAYS"),
		"hosts":         dark.Approved.Render("up   "),
		"runs":          dark.RunRunning.Render("running   "),
	} {
		if colourSGR(want) == "" {
			t.Fatalf("%s: the dark theme drew %q without colour", name, want)
		}
		if frame := got[name]; !strings.Contains(frame, strings.TrimSuffix(want, "\x1b[0m")) {
			t.Errorf("%s: the theme's style %q is not in the frame:\n%s", name, want, frame)
		}
	}
	if !strings.Contains(got["requests"], strings.TrimSuffix(dark.StatusErr.Render("request 3 on hostb: refused"), "\x1b[0m")) {
		t.Errorf("a refused decision is not drawn in the theme's StatusErr:\n%s", got["requests"])
	}
}

func keyRune(r rune) tea.KeyMsg { return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}} }

var sgr = regexp.MustCompile(`\x1b\[([0-9;]*)m`)

// colourSGR is the first escape sequence in s that sets a colour ("" when
// none does): a foreground or background, basic, 256 or true colour.
func colourSGR(s string) string {
	for _, m := range sgr.FindAllStringSubmatch(s, -1) {
		for _, p := range strings.Split(m[1], ";") {
			n, err := strconv.Atoi(p)
			if err == nil && (n >= 30 && n <= 49 || n >= 90 && n <= 107) {
				return m[0]
			}
		}
	}
	return ""
}
