package tui

import (
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
)

// confirmation is a yes/no question the app asks before a key does
// something that cannot be taken back (cancel a run, quit with runs
// going) or that starts work (run a hook). While it is open it has the
// keyboard and its question replaces the status line: y (or enter, when
// enterIsYes) does it, anything else leaves it.
type confirmation struct {
	question   string
	detail     string // after the answers: a narrow line cuts this first
	yes        tea.Cmd
	enterIsYes bool
	// quitting: the question is whether to quit (ctrl+c again says yes).
	quitting bool
}

// askMsg asks the operator a confirmation (panes return it as a command).
type askMsg struct{ c *confirmation }

// ask asks question; yes runs when the operator says y. enterIsYes lets
// enter say yes too (a harmless default, such as starting a run).
func ask(question, detail string, enterIsYes bool, yes tea.Cmd) tea.Cmd {
	return func() tea.Msg {
		return askMsg{&confirmation{question: question, detail: detail, yes: yes, enterIsYes: enterIsYes}}
	}
}

type confirmKeys struct{ Yes, No key.Binding }

func newConfirmKeys(enterIsYes bool) confirmKeys {
	k := confirmKeys{
		Yes: key.NewBinding(key.WithKeys("y", "Y"), key.WithHelp("y", "yes")),
		No:  key.NewBinding(key.WithKeys("n", "N", "esc"), key.WithHelp("n/esc", "no")),
	}
	if enterIsYes {
		k.Yes = key.NewBinding(key.WithKeys("y", "Y", "enter"), key.WithHelp("y/enter", "yes"))
	}
	return k
}

// answer takes the key that closes the confirmation: the command to run
// when it says yes, else nil. Any key but yes is a no (n and esc say so
// outright): a question is never answered by accident.
func (c *confirmation) answer(msg tea.KeyMsg) tea.Cmd {
	if key.Matches(msg, newConfirmKeys(c.enterIsYes).Yes) {
		return c.yes
	}
	return nil
}

// prompt is the question with its answers, for the status line.
func (c *confirmation) prompt() string {
	q := c.question + " [y/N]"
	if c.enterIsYes {
		q = c.question + " [Y/n]"
	}
	if c.detail != "" {
		q += " " + c.detail
	}
	return q
}
