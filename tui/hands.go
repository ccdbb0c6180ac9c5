package tui

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"warden/engine"
)

type handsKeys struct{ Up, Down, Status, Reload key.Binding }

// handsPane lists the hands roots this data dir knows, with their phase;
// s asks the Docker engine for live status and drift.
type handsPane struct {
	sh    *shared
	k     handsKeys
	roots []engine.HandsRecord
	sel   int
	busy  string
	ov    *overlay
}

type handsStatusMsg struct {
	root string
	text string
	err  error
}

func newHandsPane(sh *shared) *handsPane {
	return &handsPane{sh: sh, k: handsKeys{
		Up:     key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "up")),
		Down:   key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "down")),
		Status: key.NewBinding(key.WithKeys("s", "enter"), key.WithHelp("s", "status & drift")),
		Reload: key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "reload")),
	}}
}

func (p *handsPane) reload() {
	rs, err := p.sh.e.HandsList()
	if err != nil {
		p.sh.errStatus(err)
		return
	}
	p.roots = rs
	p.sel = min(p.sel, max(len(rs)-1, 0))
}

func (p *handsPane) capturing() bool { return false }

func (p *handsPane) takeOverlay() *overlay {
	o := p.ov
	p.ov = nil
	return o
}

func (p *handsPane) keys() keyMap {
	k := p.k
	return keyMap{short: []key.Binding{k.Up, k.Down, k.Status, k.Reload}, full: [][]key.Binding{{k.Up, k.Down, k.Status, k.Reload}}}
}

func (p *handsPane) update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case handsStatusMsg:
		p.busy = ""
		if msg.err != nil {
			p.sh.errStatus(msg.err)
			return nil
		}
		p.ov = textOverlay(p.sh, "hands status · "+msg.root, msg.text)
	case tea.KeyMsg:
		switch {
		case key.Matches(msg, p.k.Up):
			p.sel = max(p.sel-1, 0)
		case key.Matches(msg, p.k.Down):
			p.sel = min(p.sel+1, max(len(p.roots)-1, 0))
		case key.Matches(msg, p.k.Reload):
			p.reload()
		case key.Matches(msg, p.k.Status):
			if p.sel < len(p.roots) && p.busy == "" {
				root := p.roots[p.sel].Root
				p.busy = root
				e := p.sh.e
				return func() tea.Msg {
					ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
					defer cancel()
					rep, err := e.HandsStatus(ctx, root)
					if err != nil {
						return handsStatusMsg{root: root, err: err}
					}
					b, _ := json.MarshalIndent(rep, "", "  ")
					return handsStatusMsg{root: root, text: string(b)}
				}
			}
		}
	}
	return nil
}

func (p *handsPane) view(w, h int) string {
	th := p.sh.th
	out := []string{fit(th.Title.Render(fmt.Sprintf("Hands roots (%d)", len(p.roots))), w)}
	if len(p.roots) == 0 {
		out = append(out, th.Dim.Render(plain("no hands roots yet: `warden hands init --root ABS --engine-socket PATH --image NAME --access files|none`", w)))
	}
	now := p.sh.now()
	for i, r := range p.roots {
		if len(out) >= h-2 {
			break
		}
		mark := " "
		if i == p.sel {
			mark = "▸"
		}
		st := th.Dim
		switch r.Phase {
		case "ready":
			st = th.RunOK
		case "failed":
			st = th.RunFailed
		case "prepared", "creating", "running":
			st = th.RunRunning
		}
		row := fmt.Sprintf("%s %-9s %s", mark, r.Phase, r.Root)
		tail := fmt.Sprintf("  %s · access %s · updated %s ago", r.Image, r.Access, shortDur(now.Sub(r.Updated)))
		if i == p.sel {
			out = append(out, fit(th.Selected.Render(row)+th.Dim.Render(plain(tail, max(w-textWidth(row), 1))), w))
		} else {
			out = append(out, fit(mark+" "+st.Render(fmt.Sprintf("%-9s", r.Phase))+" "+r.Root+th.Dim.Render(plain(tail, max(w-textWidth(row), 1))), w))
		}
	}
	if p.busy != "" {
		out = append(out, th.Dim.Render("asking the Docker engine about "+p.busy+" …"))
	}
	for len(out) < h-1 {
		out = append(out, "")
	}
	out = append(out, th.Dim.Render(plain("init and finish wizards are not in the console yet: use `warden hands init|finish` (s shows live status)", w)))
	return strings.Join(out[:h], "\n")
}
