package tui

import "github.com/charmbracelet/bubbles/key"

// globalKeys work on every tab (unless a prompt has the keyboard).
type globalKeys struct {
	Tab1, Tab2, Tab3, Tab4, Tab5 key.Binding
	Next, Prev                   key.Binding
	Help                         key.Binding
	Messages                     key.Binding
	Quit                         key.Binding
	Command                      key.Binding
	Copy, Pager, Back            key.Binding
}

func newGlobalKeys() globalKeys {
	return globalKeys{
		Tab1: key.NewBinding(key.WithKeys("1"), key.WithHelp("1", "streams")),
		Tab2: key.NewBinding(key.WithKeys("2"), key.WithHelp("2", "requests")),
		Tab3: key.NewBinding(key.WithKeys("3"), key.WithHelp("3", "receipts")),
		Tab4: key.NewBinding(key.WithKeys("4"), key.WithHelp("4", "modules")),
		Tab5: key.NewBinding(key.WithKeys("5"), key.WithHelp("5", "hands")),
		Next: key.NewBinding(key.WithKeys("tab"), key.WithHelp("tab", "next tab")),
		Prev: key.NewBinding(key.WithKeys("shift+tab"), key.WithHelp("shift+tab", "prev tab")),
		Help: key.NewBinding(key.WithKeys("?"), key.WithHelp("?", "all keys")),
		// M: the message log keeps every status message whole.
		Messages: key.NewBinding(key.WithKeys("M"), key.WithHelp("M", "messages")),
		Quit:     key.NewBinding(key.WithKeys("q", "ctrl+c"), key.WithHelp("q", "quit")),
		// Command opens the command line (k9s's `:`).
		Command: key.NewBinding(key.WithKeys(":"), key.WithHelp(":", "command")),
		Copy:    key.NewBinding(key.WithKeys("c"), key.WithHelp("c", "copy id/line/hash")),
		Pager:   key.NewBinding(key.WithKeys("o"), key.WithHelp("o", "open in $PAGER")),
		// Back walks the drill-down trail (when there is one).
		Back: key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "back (after enter drilled down)")),
	}
}

func (k globalKeys) tabs() []key.Binding {
	return []key.Binding{k.Tab1, k.Tab2, k.Tab3, k.Tab4, k.Tab5, k.Next, k.Prev}
}

// keyMap is what a pane offers the help footer.
type keyMap struct {
	short []key.Binding
	full  [][]key.Binding
}

func (k keyMap) ShortHelp() []key.Binding  { return k.short }
func (k keyMap) FullHelp() [][]key.Binding { return k.full }

// KeyMap is the console's one set of navigation keys. Every list pane and
// the overlay embed it (DefaultKeyMap), so a key moves the same way
// everywhere; a pane only renames where Top and Bottom go (withEnds).
type KeyMap struct {
	Up, Down, PageUp, PageDown, Top, Bottom key.Binding
}

// DefaultKeyMap is the navigation of every list and view: arrows and
// vi's j/k, page keys with less's b/space and vi's ctrl+b/ctrl+f, and
// g/G or home/end for the ends.
func DefaultKeyMap() KeyMap {
	return KeyMap{
		Up:       key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "up")),
		Down:     key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "down")),
		PageUp:   key.NewBinding(key.WithKeys("pgup", "b", "ctrl+b"), key.WithHelp("pgup", "page up")),
		PageDown: key.NewBinding(key.WithKeys("pgdown", " ", "ctrl+f"), key.WithHelp("pgdn", "page down")),
		Top:      key.NewBinding(key.WithKeys("g", "home"), key.WithHelp("g", "top")),
		Bottom:   key.NewBinding(key.WithKeys("G", "end"), key.WithHelp("G", "bottom")),
	}
}

// withEnds names where Top and Bottom go in a pane ("oldest", "newest").
func (k KeyMap) withEnds(top, bottom string) KeyMap {
	k.Top.SetHelp("g", top)
	k.Bottom.SetHelp("G", bottom)
	return k
}

// overlayKeys scroll and close an overlay.
type overlayKeys struct {
	KeyMap
	Close key.Binding
}

func newOverlayKeys() overlayKeys {
	return overlayKeys{
		KeyMap: DefaultKeyMap(),
		Close:  key.NewBinding(key.WithKeys("esc", "enter"), key.WithHelp("esc", "close")),
	}
}

// promptKeys answer a text prompt.
type promptKeys struct{ Submit, Cancel key.Binding }

func newPromptKeys() promptKeys {
	return promptKeys{
		Submit: key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "ok")),
		Cancel: key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "cancel")),
	}
}
