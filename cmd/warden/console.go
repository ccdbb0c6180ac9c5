package main

import (
	"fmt"
	"os"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/themes"
	"github.com/wardenhq/warden/tui"
)

// consoleFlags are the root command's own flags: `warden` with no verb
// opens the console.
type consoleFlags struct {
	theme string
	jail  string
}

// attachConsole makes the root command open the console when it is given
// no verb (and refuse an unknown verb as a usage error, exit 2).
func (a *app) attachConsole(root *cobra.Command) {
	var f consoleFlags
	root.Flags().StringVar(&f.theme, "theme", "", "console theme: dark, light or contrast (default: theme in $XDG_CONFIG_HOME/warden/config.yaml, else dark; NO_COLOR turns colour off)")
	root.Flags().StringVar(&f.jail, "jail", "", "jail of hooks run from the console: bwrap (default) or off")
	root.Args = cobra.ArbitraryArgs
	root.RunE = func(c *cobra.Command, argv []string) error {
		if len(argv) > 0 {
			return unknownVerb(c, argv)
		}
		return a.console(c, f)
	}
}

// isTerminal reports whether w is a terminal.
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func (a *app) console(c *cobra.Command, f consoleFlags) error {
	th, err := consoleTheme(f.theme)
	if err != nil {
		return err
	}
	switch f.jail {
	case "", engine.JailAuto:
		f.jail = "" // config.yaml's jail:, else auto
	case engine.JailBwrap, engine.JailLandlock, engine.JailOff:
	default:
		return usageError{fmt.Errorf("unknown jail mode %q (want auto, bwrap, landlock or off)", f.jail)}
	}
	if !isTerminal(a.stdout) || !isTerminal(a.stdin) {
		c.SetOut(a.stderr)
		c.Help()
		return &exitError{code: 2, err: fmt.Errorf("the console needs a terminal; use a verb (see above) for scripts")}
	}
	// The terminal's background colour (the themes' adaptive colours),
	// asked now, before the Program takes the terminal: no verb but the
	// console asks it (tui/third_party/bubbletea/PATCHED.md).
	lipgloss.HasDarkBackground()
	if themes.NoColorWanted() {
		// No colour, but keep bold and reverse so the selection shows.
		lipgloss.SetColorProfile(termenv.ANSI)
	}
	e, err := a.openEngine()
	if err != nil {
		return err
	}
	defer e.Close()
	m := tui.New(e, tui.Options{Theme: th, Jail: f.jail, AttachedPID: attachedPID(e),
		Takeover: func() (engine.Facade, int, error) {
			e, err := a.openEngine()
			if err != nil {
				return nil, 0, err
			}
			return e, attachedPID(e), nil
		}})
	defer m.Close()
	p := tea.NewProgram(m, tea.WithAltScreen(), tea.WithMouseCellMotion(), tea.WithInput(a.stdin), tea.WithOutput(a.stdout), tea.WithFilter(tui.BoundSize))
	_, err = p.Run()
	return err
}
