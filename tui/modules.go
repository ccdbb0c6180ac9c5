package tui

import (
	"fmt"
	"sort"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"

	"warden/engine"
)

type modulesKeys struct {
	Up, Down, Run, Add, Reload key.Binding
}

func newModulesKeys() modulesKeys {
	return modulesKeys{
		Up:     key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "up")),
		Down:   key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "down")),
		Run:    key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "run hook")),
		Add:    key.NewBinding(key.WithKeys("a"), key.WithHelp("a", "add module")),
		Reload: key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "reload")),
	}
}

// modRow is one row of the modules tree: a module, or one of its hooks.
type modRow struct {
	mod  *engine.Module
	hook string // "" for the module row
}

type modulesPane struct {
	sh     *shared
	k      modulesKeys
	pk     promptKeys
	mods   []engine.Module
	rows   []modRow
	last   map[string]engine.RunRecord // "module/hook" -> newest run
	sel    int
	off    int
	input  textinput.Model
	typing bool
	form   *inputsForm
}

func newModulesPane(sh *shared) *modulesPane {
	ti := textinput.New()
	ti.Prompt = "add module from folder › "
	ti.Placeholder = "/absolute/path/to/module"
	ti.CharLimit = 4096
	return &modulesPane{sh: sh, k: newModulesKeys(), pk: newPromptKeys(), input: ti, last: map[string]engine.RunRecord{}}
}

func (p *modulesPane) reload(runs []engine.RunRecord) {
	mods, err := p.sh.e.Modules()
	if err != nil {
		p.sh.errStatus(err)
		return
	}
	sort.Slice(mods, func(i, j int) bool { return mods[i].Record.ID < mods[j].Record.ID })
	p.mods = mods
	p.rows = p.rows[:0]
	for i := range p.mods {
		m := &p.mods[i]
		p.rows = append(p.rows, modRow{mod: m})
		if m.Manifest != nil {
			for _, h := range m.Manifest.HookNames() {
				p.rows = append(p.rows, modRow{mod: m, hook: h})
			}
		}
	}
	// runs are newest first: the first seen of each hook is its last run.
	for i := len(runs) - 1; i >= 0; i-- {
		p.last[runs[i].Module+"/"+runs[i].Hook] = runs[i]
	}
	p.sel = min(p.sel, max(len(p.rows)-1, 0))
	if p.sel < len(p.rows) && p.rows[p.sel].hook == "" && p.sel+1 < len(p.rows) && p.rows[p.sel+1].hook != "" && p.sel == 0 {
		p.sel = 1 // start on the first hook
	}
}

func (p *modulesPane) runEvent(r engine.RunRecord) {
	k := r.Module + "/" + r.Hook
	if old, ok := p.last[k]; !ok || old.ID <= r.ID {
		p.last[k] = r
	}
}

func (p *modulesPane) capturing() bool { return p.typing || p.form != nil }

func (p *modulesPane) prompt() string {
	if p.typing {
		return p.input.View()
	}
	return ""
}

func (p *modulesPane) keys() keyMap {
	k := p.k
	if p.typing {
		return keyMap{short: []key.Binding{p.pk.Submit, p.pk.Cancel}}
	}
	if p.form != nil {
		return p.form.keys()
	}
	return keyMap{short: []key.Binding{k.Up, k.Down, k.Run, k.Add, k.Reload}, full: [][]key.Binding{{k.Up, k.Down}, {k.Run, k.Add, k.Reload}}}
}

func (p *modulesPane) update(msg tea.Msg) tea.Cmd {
	if m, ok := msg.(runStartedMsg); ok {
		if m.err != nil {
			p.sh.errStatus(m.err)
			return nil
		}
		p.sh.setStatus(fmt.Sprintf("started %s/%s: run %s", m.module, m.hook, m.id), false)
		p.sh.jumpToRun = m.id
		return nil
	}
	if p.form != nil {
		cmd, done := p.form.update(msg)
		if done {
			p.form = nil
		}
		return cmd
	}
	switch msg := msg.(type) {
	case tea.KeyMsg:
		return p.key(msg)
	case tea.MouseMsg:
		if i := listMouse(msg, 1, 1, p.off, len(p.rows), p.move); i >= 0 {
			p.sel = i
		}
	}
	return nil
}

func (p *modulesPane) key(msg tea.KeyMsg) tea.Cmd {
	k := p.k
	if p.typing {
		switch {
		case key.Matches(msg, p.pk.Submit):
			p.typing = false
			p.input.Blur()
			p.add(strings.TrimSpace(p.input.Value()))
			return nil
		case key.Matches(msg, p.pk.Cancel):
			p.typing = false
			p.input.Blur()
			return nil
		}
		var cmd tea.Cmd
		p.input, cmd = p.input.Update(msg)
		return cmd
	}
	switch {
	case key.Matches(msg, k.Up):
		p.move(-1)
	case key.Matches(msg, k.Down):
		p.move(1)
	case key.Matches(msg, k.Reload):
		p.reload(nil)
		p.sh.setStatus(fmt.Sprintf("%d modules", len(p.mods)), false)
	case key.Matches(msg, k.Add):
		p.typing = true
		p.input.Reset()
		return p.input.Focus()
	case key.Matches(msg, k.Run):
		return p.runSelected()
	}
	return nil
}

func (p *modulesPane) add(path string) {
	if path == "" {
		return
	}
	m, err := p.sh.e.AddModule(p.sh.opts.Actor, path)
	if err != nil {
		p.sh.errStatus(err)
		return
	}
	p.reload(nil)
	for i, r := range p.rows {
		if r.mod.Record.ID == m.Record.ID && r.hook == "" {
			p.sel = i
		}
	}
	p.sh.setStatus(fmt.Sprintf("module %s %s added from %s", m.Record.ID, m.Record.Version, path), false)
}

func (p *modulesPane) move(d int) {
	if len(p.rows) == 0 {
		return
	}
	p.sel = min(max(p.sel+d, 0), len(p.rows)-1)
}

func (p *modulesPane) runSelected() tea.Cmd {
	if p.sel >= len(p.rows) {
		return nil
	}
	r := p.rows[p.sel]
	if r.mod.Manifest == nil {
		p.sh.setStatus(fmt.Sprintf("module %s cannot run: %s", r.mod.Record.ID, r.mod.Problem), true)
		return nil
	}
	if r.hook == "" {
		p.sh.setStatus("pick one of the module's hooks to run it", false)
		return nil
	}
	h := r.mod.Manifest.Hooks[r.hook]
	if len(h.Inputs) > 0 {
		f, cmd := newInputsForm(p.sh, r.mod.Record.ID, h, p.start)
		p.form = f
		return cmd
	}
	return p.start(r.mod.Record.ID, r.hook, nil)
}

// runStartedMsg reports a run the console started.
type runStartedMsg struct {
	module, hook, id string
	err              error
}

// start runs a hook and, once it has started, shows its stream. StartRun
// runs off the UI goroutine: its preflight may wait on the operator (a
// network request), who must still be able to answer in this console.
func (p *modulesPane) start(module, hook string, inputs map[string]any) tea.Cmd {
	e, actor, jail := p.sh.e, p.sh.opts.Actor, p.sh.opts.Jail
	p.sh.setStatus(fmt.Sprintf("starting %s/%s …", module, hook), false)
	return func() tea.Msg {
		h, err := e.StartRun(actor, engine.RunRequest{Module: module, Hook: hook, Inputs: inputs, Jail: jail})
		if err != nil {
			return runStartedMsg{module: module, hook: hook, err: err}
		}
		return runStartedMsg{module: module, hook: hook, id: h.ID}
	}
}

func (p *modulesPane) view(w, h int) string {
	if p.form != nil {
		return p.form.view(w, h)
	}
	th := p.sh.th
	out := []string{fit(th.Title.Render(fmt.Sprintf("Modules (%d)", len(p.mods))), w)}
	if len(p.mods) == 0 {
		out = append(out, th.Dim.Render(plain("no modules: press a to add one from its folder (or `warden module add PATH`)", w)))
	}
	rows := max(h-1, 1)
	if p.sel < p.off {
		p.off = p.sel
	}
	if p.sel >= p.off+rows {
		p.off = p.sel - rows + 1
	}
	now := p.sh.now()
	for i := p.off; i < len(p.rows) && len(out) < h; i++ {
		r := p.rows[i]
		mark := " "
		if i == p.sel {
			mark = "▸"
		}
		var line string
		if r.hook == "" {
			m := r.mod
			line = fmt.Sprintf("%s %s %s", mark, m.Record.ID, m.Record.Version)
			if m.Manifest == nil {
				line = fit(line, 24) + " " + th.StatusErr.Render(plain("cannot run: "+oneLine(m.Problem), max(w-26, 1)))
			} else {
				line = th.Title.Render(line) + "  " + th.Dim.Render(plain(m.Record.Description, max(w-textWidth(line)-2, 1)))
			}
		} else {
			hk := r.mod.Manifest.Hooks[r.hook]
			var info []string
			if len(hk.Inputs) > 0 {
				names := make([]string, 0, len(hk.Inputs))
				for n, t := range hk.Inputs {
					names = append(names, n+":"+t.String())
				}
				sort.Strings(names)
				info = append(info, "inputs "+strings.Join(names, ","))
			}
			if len(hk.Requires) > 0 {
				info = append(info, "needs "+strings.Join(hk.Requires, ","))
			}
			if hk.Network {
				info = append(info, "HOST NETWORK")
			}
			if hk.Egress {
				info = append(info, egressInfo(hk.Destinations))
			}
			last := th.Dim.Render("never run")
			if lr, ok := p.last[r.mod.Record.ID+"/"+r.hook]; ok {
				g, st := runGlyph(th, lr.Status)
				last = st.Render(g+" "+lr.Status) + th.Dim.Render(" "+shortDur(now.Sub(lr.Started))+" ago, took "+runDuration(lr, now))
			}
			name := fmt.Sprintf("%s   %-16s", mark, r.hook)
			if i == p.sel {
				name = th.Selected.Render(name)
			}
			lastW := lipglossWidth(last)
			line = name + " " + fit(th.Dim.Render(plain(strings.Join(info, " · "), max(w-22-lastW-2, 1))), max(w-22-lastW-2, 1)) + " " + last
		}
		out = append(out, fit(line, w))
	}
	for len(out) < h {
		out = append(out, "")
	}
	return strings.Join(out[:h], "\n")
}
