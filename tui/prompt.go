package tui

import (
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"
)

// promptInput is the one-line prompt a pane opens to ask for text (a
// module's folder, a receipt kind, a search): while it is open it has the
// keyboard and its line replaces the status line; enter submits, esc
// cancels.
type promptInput struct {
	input textinput.Model
	keys  promptKeys
	open  bool
}

// promptOutcome is what a key did to an open prompt.
type promptOutcome int

const (
	promptEditing   promptOutcome = iota // still open
	promptSubmitted                      // closed with a value
	promptCancelled                      // closed without one
)

func newPromptInput(prompt, placeholder string, limit int) promptInput {
	ti := textinput.New()
	ti.Prompt = prompt
	ti.Placeholder = placeholder
	ti.CharLimit = limit
	return promptInput{input: ti, keys: newPromptKeys()}
}

// Open shows the prompt holding value, the cursor at its end.
func (p *promptInput) Open(value string) tea.Cmd {
	p.open = true
	p.input.SetValue(value)
	p.input.CursorEnd()
	return p.input.Focus()
}

// Active is true while the prompt is open.
func (p *promptInput) Active() bool { return p.open }

// View is the prompt line, or "" when it is closed.
func (p *promptInput) View() string {
	if !p.open {
		return ""
	}
	return p.input.View()
}

// KeyMap is what the help footer shows while the prompt is open.
func (p *promptInput) KeyMap() keyMap {
	return keyMap{short: []key.Binding{p.keys.Submit, p.keys.Cancel}}
}

// Close closes the prompt without a value (what it asked about is moot).
func (p *promptInput) Close() {
	p.open = false
	p.input.Blur()
}

// SetWidth bounds the text field.
func (p *promptInput) SetWidth(w int) { p.input.Width = w }

// Update takes a key while the prompt is open: it edits the text, or
// closes the prompt, submitted (value is what was typed) or cancelled.
func (p *promptInput) Update(msg tea.KeyMsg) (cmd tea.Cmd, outcome promptOutcome, value string) {
	switch {
	case key.Matches(msg, p.keys.Submit):
		p.Close()
		return nil, promptSubmitted, p.input.Value()
	case key.Matches(msg, p.keys.Cancel):
		p.Close()
		return nil, promptCancelled, ""
	}
	p.input, cmd = p.input.Update(msg)
	return cmd, promptEditing, ""
}
