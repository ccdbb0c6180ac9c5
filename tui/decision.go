package tui

import (
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/wardenhq/warden/engine"
)

// decisionKeys answer approve-always's question.
type decisionKeys struct {
	Yes, Tool, No key.Binding
}

func newDecisionKeys() decisionKeys {
	return decisionKeys{
		Yes:  key.NewBinding(key.WithKeys("y"), key.WithHelp("y", "yes, add the rule")),
		Tool: key.NewBinding(key.WithKeys("t"), key.WithHelp("t", "the whole tool")),
		// Anything but yes goes back: approve-always is never the default.
		No: key.NewBinding(key.WithKeys("n", "esc"), key.WithHelp("any other key", "no")),
	}
}

// decision is what a pane asks before it sends some verdicts on a
// request: the reason for a deny (a prompt) and a yes to approve-always.
// One flow for the console's Requests tab and the fleet's, T being what
// each calls a request. While it is active it has the keyboard.
type decision[T any] struct {
	k          decisionKeys
	reason     promptInput // the deny prompt, for target
	confirming bool        // approve-always waits for an answer on target
	tool       bool        // ... which may also be Tool (an MCP tool call)
	target     T
}

func newDecision[T any]() decision[T] {
	return decision[T]{k: newDecisionKeys(), reason: newPromptInput("deny: reason (optional, enter to deny) › ", "", 500)}
}

func (d *decision[T]) active() bool { return d.reason.Active() || d.confirming }

// askReason opens the deny prompt for t.
func (d *decision[T]) askReason(t T) tea.Cmd {
	d.target = t
	return d.reason.Open("")
}

// askAlways asks whether to approve t always; tool offers Tool too.
func (d *decision[T]) askAlways(t T, tool bool) {
	d.target, d.tool, d.confirming = t, tool, true
}

// cancel drops the question (its request was decided elsewhere).
func (d *decision[T]) cancel() {
	d.confirming = false
	d.reason.Close()
}

// key takes msg while the flow is active, and reports whether it did:
// the deny prompt's keys, or the answer to approve-always. decide sends
// a verdict on the target; no is told of a no to approve-always.
func (d *decision[T]) key(msg tea.KeyMsg, decide func(T, string, string) tea.Cmd, no func()) (tea.Cmd, bool) {
	if d.reason.Active() {
		cmd, outcome, reason := d.reason.Update(msg)
		if outcome == promptSubmitted {
			return decide(d.target, engine.Deny, strings.TrimSpace(reason)), true
		}
		return cmd, true
	}
	if !d.confirming {
		return nil, false
	}
	d.confirming = false
	switch {
	case key.Matches(msg, d.k.Yes):
		return decide(d.target, engine.ApproveAlways, ""), true
	case d.tool && key.Matches(msg, d.k.Tool):
		// An MCP tool call: the rule covers the tool, any arguments.
		return decide(d.target, approveAlwaysTool, ""), true
	}
	no()
	return nil, true
}

// keys is the flow's key help while it is active.
func (d *decision[T]) keys() (keyMap, bool) {
	switch {
	case d.reason.Active():
		return d.reason.KeyMap(), true
	case d.confirming && d.tool:
		return keyMap{short: []key.Binding{d.k.Yes, d.k.Tool, d.k.No}}, true
	case d.confirming:
		return keyMap{short: []key.Binding{d.k.Yes, d.k.No}}, true
	}
	return keyMap{}, false
}
