package themes

import (
	"github.com/charmbracelet/huh"
	"github.com/charmbracelet/lipgloss"
)

// Huh is the theme's look for huh forms (the console's input forms and
// wizards), so they match the rest of the console.
func (t Theme) Huh() *huh.Theme {
	h := huh.ThemeBase()
	f := &h.Focused
	f.Base = f.Base.BorderForeground(t.BorderFocus.GetForeground())
	f.Card = f.Base
	f.Title = t.Title
	f.NoteTitle = t.Title
	f.Description = t.Dim
	f.ErrorIndicator = t.StatusErr.SetString(" *")
	f.ErrorMessage = t.StatusErr.SetString(" *")
	f.SelectSelector = t.Prompt.SetString("> ")
	f.Option = t.HeaderVal
	f.SelectedOption = t.StatusOK
	f.FocusedButton = t.TabActive.Padding(0, 2).MarginRight(1)
	f.BlurredButton = t.Tab.Padding(0, 2).MarginRight(1)
	f.TextInput.Cursor = t.Prompt
	f.TextInput.Placeholder = t.Dim
	f.TextInput.Prompt = t.Prompt
	f.TextInput.Text = t.HeaderVal
	h.Blurred = *f
	h.Blurred.Base = h.Blurred.Base.BorderStyle(lipgloss.HiddenBorder())
	h.Blurred.Card = h.Blurred.Base
	h.Blurred.Title = t.Dim
	h.Blurred.FocusedButton = t.Tab.Padding(0, 2).MarginRight(1)
	h.Help.ShortKey, h.Help.ShortDesc, h.Help.ShortSeparator = t.HelpKey, t.HelpDesc, t.HelpSep
	h.Help.FullKey, h.Help.FullDesc, h.Help.FullSeparator = t.HelpKey, t.HelpDesc, t.HelpSep
	return h
}
