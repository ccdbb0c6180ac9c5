package tui

import (
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"warden/engine"
)

// driver runs the App's Update loop by hand, for tests that look at
// frames between keys. Commands run with a short timeout: those that
// wait (ticks, blinks, the event reader) are dropped.
type driver struct {
	t   *testing.T
	app *App
}

func newDriver(t *testing.T, e engine.Facade, w, h int) *driver {
	d := &driver{t: t, app: New(e, Options{Theme: testShared(e).th, Actor: "local:test", Jail: engine.JailOff, Bell: func() {}})}
	t.Cleanup(d.app.Close)
	d.send(tea.WindowSizeMsg{Width: w, Height: h})
	return d
}

func (d *driver) send(msgs ...tea.Msg) {
	for len(msgs) > 0 {
		msg := msgs[0]
		msgs = msgs[1:]
		if b, ok := msg.(tea.BatchMsg); ok {
			for _, c := range b {
				msgs = append(msgs, d.run(c)...)
			}
			continue
		}
		if s, ok := msg.(tea.KeyMsg); ok && s.Type == tea.KeyRunes && len(s.Runes) > 1 {
			split := make([]tea.Msg, 0, len(s.Runes)+len(msgs))
			for _, r := range s.Runes {
				split = append(split, tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}})
			}
			msgs = append(split, msgs...)
			continue
		}
		_, cmd := d.app.Update(msg)
		msgs = append(msgs, d.run(cmd)...)
	}
}

func (d *driver) run(cmd tea.Cmd) []tea.Msg {
	if cmd == nil {
		return nil
	}
	ch := make(chan tea.Msg, 1)
	go func() { ch <- cmd() }()
	select {
	case m := <-ch:
		if m == nil {
			return nil
		}
		if _, ok := m.(tea.QuitMsg); ok {
			return nil
		}
		return []tea.Msg{m}
	case <-time.After(100 * time.Millisecond):
		return nil
	}
}

// typ types runes and named keys.
func (d *driver) keys(ks ...string) {
	for _, k := range ks {
		d.send(keyMsg(k))
	}
}

func keyMsg(k string) tea.Msg {
	switch k {
	case "enter":
		return tea.KeyMsg{Type: tea.KeyEnter}
	case "esc":
		return tea.KeyMsg{Type: tea.KeyEsc}
	case "up":
		return tea.KeyMsg{Type: tea.KeyUp}
	case "down":
		return tea.KeyMsg{Type: tea.KeyDown}
	case "left":
		return tea.KeyMsg{Type: tea.KeyLeft}
	case "right":
		return tea.KeyMsg{Type: tea.KeyRight}
	case "pgup":
		return tea.KeyMsg{Type: tea.KeyPgUp}
	case "pgdown":
		return tea.KeyMsg{Type: tea.KeyPgDown}
	case "tab":
		return tea.KeyMsg{Type: tea.KeyTab}
	case "shift+tab":
		return tea.KeyMsg{Type: tea.KeyShiftTab}
	case "backspace":
		return tea.KeyMsg{Type: tea.KeyBackspace}
	}
	return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)}
}

func (d *driver) view() string { return normalize(d.app.View()) }
