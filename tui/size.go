package tui

import tea "github.com/charmbracelet/bubbletea"

// The largest terminal the console draws for. A viewer's terminal size
// is theirs to say (an SSH window-change, a local resize), and the
// console's frame costs width × height: one window-change of 65535×65535
// took serve from 30 MB to 4 GB in 5 s. Past these bounds the console
// draws a 1000×500 frame in the corner of the larger terminal.
const (
	MaxWidth  = 1000
	MaxHeight = 500
)

// clampSize bounds a terminal size to what the console draws: at least
// one cell each way, at most MaxWidth × MaxHeight.
func clampSize(w, h int) (int, int) {
	return min(max(w, 1), MaxWidth), min(max(h, 1), MaxHeight)
}

// BoundSize is a tea.WithFilter filter that bounds every WindowSizeMsg to
// MaxWidth × MaxHeight before anything sees it, Bubble Tea's renderer
// included (the console's own Update clamps too; this keeps a viewer's
// size from reaching any part of the program unbounded).
func BoundSize(_ tea.Model, msg tea.Msg) tea.Msg {
	if ws, ok := msg.(tea.WindowSizeMsg); ok {
		ws.Width, ws.Height = clampSize(ws.Width, ws.Height)
		return ws
	}
	return msg
}
