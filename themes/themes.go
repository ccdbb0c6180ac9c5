// Package themes holds the console's lipgloss styles. Every colour the
// console shows comes from a Theme here; the tui package has no colour
// literals. Colours are lipgloss.AdaptiveColor, so each theme reads on
// light and dark terminals alike; NoColor is the theme for NO_COLOR.
package themes

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/charmbracelet/lipgloss"
)

// Theme is every style the console draws with.
type Theme struct {
	Name string

	// Chrome.
	App         lipgloss.Style // the whole frame
	Header      lipgloss.Style // the top line
	HeaderKey   lipgloss.Style // "data", "jail", ... labels in the header
	HeaderVal   lipgloss.Style
	Brand       lipgloss.Style // "warden"
	JailOn      lipgloss.Style // jail mode when a jail is in force
	JailOff     lipgloss.Style // jail mode when OFF: loud
	Tab         lipgloss.Style
	TabActive   lipgloss.Style
	Badge       lipgloss.Style // pending count on the Requests tab
	Status      lipgloss.Style // the status line
	StatusErr   lipgloss.Style
	StatusOK    lipgloss.Style
	Toast       lipgloss.Style
	Border      lipgloss.Style // pane borders (unfocused)
	BorderFocus lipgloss.Style
	Title       lipgloss.Style // pane titles
	Dim         lipgloss.Style // secondary text
	Selected    lipgloss.Style // the selected row
	Marker      lipgloss.Style // "…→" on a cut line
	Overlay     lipgloss.Style // a modal box
	TableHead   lipgloss.Style
	Prompt      lipgloss.Style

	// Run states.
	RunRunning   lipgloss.Style
	RunOK        lipgloss.Style
	RunFailed    lipgloss.Style
	RunCancelled lipgloss.Style

	// Stream line levels.
	LevelDebug   lipgloss.Style
	LevelInfo    lipgloss.Style
	LevelWarn    lipgloss.Style
	LevelError   lipgloss.Style
	LevelSuccess lipgloss.Style
	LineNumber   lipgloss.Style
	Match        lipgloss.Style // a search match
	MatchCurrent lipgloss.Style // the match n/N landed on

	// Requests.
	Pending  lipgloss.Style
	Approved lipgloss.Style
	Denied   lipgloss.Style

	// Help footer (bubbles/help).
	HelpKey  lipgloss.Style
	HelpDesc lipgloss.Style
	HelpSep  lipgloss.Style
}

// palette is the handful of colours a theme is built from.
type palette struct {
	fg, dim, subtle, accent, accentFg lipgloss.TerminalColor
	ok, warn, bad, info, debug        lipgloss.TerminalColor
	selBg, selFg, matchBg, matchFg    lipgloss.TerminalColor
	loudBg, loudFg, badgeBg, badgeFg  lipgloss.TerminalColor
	border                            lipgloss.TerminalColor
}

func ac(light, dark string) lipgloss.AdaptiveColor {
	return lipgloss.AdaptiveColor{Light: light, Dark: dark}
}

// build makes a theme from a palette, every style drawn with r (nil:
// lipgloss's default renderer); every style derives from the palette.
func build(r *lipgloss.Renderer, name string, p palette) Theme {
	if r == nil {
		r = lipgloss.DefaultRenderer()
	}
	s := r.NewStyle
	fg := func(c lipgloss.TerminalColor) lipgloss.Style { return s().Foreground(c) }
	return Theme{
		Name:        name,
		App:         s(),
		Header:      s(),
		HeaderKey:   fg(p.dim),
		HeaderVal:   fg(p.fg),
		Brand:       fg(p.accent).Bold(true),
		JailOn:      fg(p.ok).Bold(true),
		JailOff:     s().Foreground(p.loudFg).Background(p.loudBg).Bold(true).Blink(true),
		Tab:         fg(p.dim).Padding(0, 1),
		TabActive:   s().Foreground(p.accentFg).Background(p.accent).Bold(true).Padding(0, 1),
		Badge:       s().Foreground(p.badgeFg).Background(p.badgeBg).Bold(true),
		Status:      fg(p.dim),
		StatusErr:   fg(p.bad).Bold(true),
		StatusOK:    fg(p.ok),
		Toast:       s().Foreground(p.badgeFg).Background(p.badgeBg).Bold(true).Padding(0, 1),
		Border:      fg(p.border),
		BorderFocus: fg(p.accent),
		Title:       fg(p.accent).Bold(true),
		Dim:         fg(p.dim),
		Selected:    s().Foreground(p.selFg).Background(p.selBg).Bold(true),
		Marker:      fg(p.warn).Bold(true),
		Overlay:     s().Border(lipgloss.RoundedBorder()).BorderForeground(p.accent).Padding(0, 1),
		TableHead:   fg(p.subtle).Bold(true).Underline(true),
		Prompt:      fg(p.accent).Bold(true),

		RunRunning:   fg(p.info).Bold(true),
		RunOK:        fg(p.ok),
		RunFailed:    fg(p.bad).Bold(true),
		RunCancelled: fg(p.warn),

		LevelDebug:   fg(p.debug),
		LevelInfo:    fg(p.fg),
		LevelWarn:    fg(p.warn),
		LevelError:   fg(p.bad).Bold(true),
		LevelSuccess: fg(p.ok),
		LineNumber:   fg(p.debug),
		Match:        s().Foreground(p.matchFg).Background(p.matchBg),
		MatchCurrent: s().Foreground(p.matchFg).Background(p.matchBg).Bold(true).Underline(true),

		Pending:  fg(p.warn).Bold(true),
		Approved: fg(p.ok),
		Denied:   fg(p.bad),

		HelpKey:  fg(p.subtle).Bold(true),
		HelpDesc: fg(p.dim),
		HelpSep:  fg(p.border),
	}
}

// Dark is the default theme, tuned for dark terminals (still readable on
// light ones: every colour is adaptive).
func Dark() Theme { return dark(nil) }

func dark(r *lipgloss.Renderer) Theme {
	return build(r, "dark", palette{
		fg: ac("#1c1c1c", "#e4e4e4"), dim: ac("#6c6c6c", "#8a8a8a"), subtle: ac("#3a3a3a", "#bcbcbc"),
		accent: ac("#005f87", "#5fafff"), accentFg: ac("#ffffff", "#000000"),
		ok: ac("#007a3d", "#5fd787"), warn: ac("#8a5a00", "#ffd75f"), bad: ac("#b00020", "#ff5f5f"),
		info: ac("#005faf", "#87d7ff"), debug: ac("#8a8a8a", "#6c6c6c"),
		selBg: ac("#d0e4ff", "#303a50"), selFg: ac("#000000", "#ffffff"),
		matchBg: ac("#ffd75f", "#af8700"), matchFg: ac("#000000", "#000000"),
		loudBg: ac("#d70000", "#d70000"), loudFg: ac("#ffffff", "#ffffff"),
		badgeBg: ac("#d75f00", "#ff8700"), badgeFg: ac("#ffffff", "#000000"),
		border: ac("#bcbcbc", "#444444"),
	})
}

// Light is for light terminals, and chooses its colours itself: it never
// asks the terminal what its background is (under tmux, or over SSH, the
// answer is often missing, and a guess of "dark" drew white on a white
// terminal). Text is the terminal's own foreground; every colour is a
// middle tone readable on white and on black alike; a colour drawn on a
// background of its own comes with an explicit foreground.
func Light() Theme { return light(nil) }

func light(r *lipgloss.Renderer) Theme {
	c := func(s string) lipgloss.TerminalColor { return lipgloss.Color(s) }
	return build(r, "light", palette{
		fg: lipgloss.NoColor{}, dim: c("#808080"), subtle: lipgloss.NoColor{},
		accent: c("#875fd7"), accentFg: c("#ffffff"),
		ok: c("#00875f"), warn: c("#af8700"), bad: c("#d70000"),
		info: c("#0087d7"), debug: c("#808080"),
		selBg: c("#d7d7ff"), selFg: c("#000000"),
		matchBg: c("#ffd700"), matchFg: c("#000000"),
		loudBg: c("#d70000"), loudFg: c("#ffffff"),
		badgeBg: c("#d75f00"), badgeFg: c("#ffffff"),
		border: c("#808080"),
	})
}

// Contrast is high contrast: pure black and white with saturated accents.
func Contrast() Theme { return contrast(nil) }

func contrast(r *lipgloss.Renderer) Theme {
	return build(r, "contrast", palette{
		fg: ac("#000000", "#ffffff"), dim: ac("#000000", "#ffffff"), subtle: ac("#000000", "#ffffff"),
		accent: ac("#0000d7", "#00ffff"), accentFg: ac("#ffffff", "#000000"),
		ok: ac("#005f00", "#00ff00"), warn: ac("#5f3f00", "#ffff00"), bad: ac("#870000", "#ff0000"),
		info: ac("#00005f", "#00d7ff"), debug: ac("#303030", "#d0d0d0"),
		selBg: ac("#000000", "#ffffff"), selFg: ac("#ffffff", "#000000"),
		matchBg: ac("#ffff00", "#ffff00"), matchFg: ac("#000000", "#000000"),
		loudBg: ac("#ff0000", "#ff0000"), loudFg: ac("#ffffff", "#ffffff"),
		badgeBg: ac("#ff00ff", "#ff00ff"), badgeFg: ac("#ffffff", "#000000"),
		border: ac("#000000", "#ffffff"),
	})
}

// NoColor uses no colour at all, only bold, underline and reverse: the
// theme for NO_COLOR (https://no-color.org).
func NoColor() Theme { return noColor(nil) }

func noColor(r *lipgloss.Renderer) Theme {
	if r == nil {
		r = lipgloss.DefaultRenderer()
	}
	s := r.NewStyle
	t := build(r, "none", palette{
		fg: lipgloss.NoColor{}, dim: lipgloss.NoColor{}, subtle: lipgloss.NoColor{}, accent: lipgloss.NoColor{},
		accentFg: lipgloss.NoColor{}, ok: lipgloss.NoColor{}, warn: lipgloss.NoColor{}, bad: lipgloss.NoColor{},
		info: lipgloss.NoColor{}, debug: lipgloss.NoColor{}, selBg: lipgloss.NoColor{}, selFg: lipgloss.NoColor{},
		matchBg: lipgloss.NoColor{}, matchFg: lipgloss.NoColor{}, loudBg: lipgloss.NoColor{}, loudFg: lipgloss.NoColor{},
		badgeBg: lipgloss.NoColor{}, badgeFg: lipgloss.NoColor{}, border: lipgloss.NoColor{},
	})
	t.TabActive = s().Reverse(true).Bold(true).Padding(0, 1)
	t.Selected = s().Reverse(true)
	t.JailOff = s().Reverse(true).Bold(true).Blink(true)
	t.Badge = s().Reverse(true).Bold(true)
	t.Toast = s().Reverse(true).Bold(true).Padding(0, 1)
	t.Match = s().Underline(true)
	t.MatchCurrent = s().Reverse(true).Underline(true)
	return t
}

var byName = map[string]func(*lipgloss.Renderer) Theme{"dark": dark, "light": light, "contrast": contrast, "none": noColor}

// Names lists the theme names ByName knows, sorted.
func Names() []string {
	out := make([]string, 0, len(byName))
	for n := range byName {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// NoColorWanted reports whether the environment asks for no colour: the
// NO_COLOR variable set to anything but the empty string.
func NoColorWanted() bool { return os.Getenv("NO_COLOR") != "" }

// ByName returns a theme by name ("" is dark), drawn with lipgloss's
// default renderer. NO_COLOR wins over any name: the result is then
// NoColor.
func ByName(name string) (Theme, error) { return Make(name, NoColorWanted(), nil) }

// Make returns a theme by name ("" is dark), or NoColor when noColor is
// set, with every style drawn with r (nil: lipgloss's default renderer).
// A console served over SSH passes its session's renderer, so that
// colours follow the client's terminal.
func Make(name string, noColor bool, r *lipgloss.Renderer) (Theme, error) {
	mk, ok := byName[strings.ToLower(name)]
	if name == "" {
		mk, ok = dark, true
	}
	if !ok {
		return Theme{}, fmt.Errorf("unknown theme %q (want %s)", name, strings.Join(Names(), ", "))
	}
	if noColor {
		mk = byName["none"]
	}
	return mk(r), nil
}
