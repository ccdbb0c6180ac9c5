package tui

import (
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
)

// TestCommandLine: `:` reaches a tab, a receipt kind, a hook run, a theme
// and the message log by name; tab completes; a mistake says what works.
func TestCommandLine(t *testing.T) {
	e := newEngine(t)
	streamModule(t, e)
	c := startConsole(t, e)
	c.wait("Runs (0)")
	c.keys(":", "rece", "tab", " kind=module.", "enter")
	c.wait("newest 1 of kind module.")
	c.keys(":", "run chatty lines", "enter")
	c.wait("line 300: disk full", "chatty/lines · succeeded")
	c.keys(":", "theme light", "enter")
	c.wait("theme light")
	c.keys(":", "approve 42", "enter")
	c.wait("request 42")
	c.keys(":", "frobnicate", "enter")
	c.wait(`unknown command "frobnicate"`)
	c.keys(":", "mess", "tab", "enter")
	c.wait("Messages (")
	view := c.final()
	for _, want := range []string{"started chatty/lines", "theme light", "request 42", `unknown command "frobnicate": try :runs`} {
		if !strings.Contains(view, want) {
			t.Errorf("the message log lacks %q:\n%s", want, view)
		}
	}
	c.golden(view)
}

// TestKeysInOneRead: keys typed faster than the console reads them (over
// SSH they often arrive together) each do what they do alone. The
// terminal reader hands ":theme" over as one message of six runes; the
// colon must still open the command line and the rest go into it.
func TestKeysInOneRead(t *testing.T) {
	e := newEngine(t)
	c := startConsole(t, e)
	c.wait("Runs (0)")
	c.tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(":theme")})
	c.keys(" ", "light", "enter")
	c.wait("theme light")
	c.tm.Send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("43")})
	c.wait("Receipts · ")
}
