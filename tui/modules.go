package tui

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/wardenhq/warden/engine"
)

type modulesKeys struct {
	KeyMap
	Run, Add, Reload key.Binding
	Filter, Clear    key.Binding
}

func newModulesKeys() modulesKeys {
	return modulesKeys{
		KeyMap: DefaultKeyMap(),
		Run:    key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "run hook")),
		Add:    key.NewBinding(key.WithKeys("a"), key.WithHelp("a", "add module")),
		Reload: key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "reload")),
		Filter: key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "filter")),
		Clear:  key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "clear filter")),
	}
}

// modRow is one row of the modules tree: a module, or one of its hooks.
type modRow struct {
	mod  *engine.Module
	hook string // "" for the module row
}

type modulesPane struct {
	paneBase
	sh   *shared
	k    modulesKeys
	mods []engine.Module
	rows []modRow
	last map[string]engine.RunRecord // "module/hook" -> newest run
	sel  int
	off  int
	h    int
	add  promptInput
	form *inputsForm
	// filter and query: / shows only the hooks whose module/hook or
	// description hold the query (smart case).
	filter promptInput
	query  string
}

func newModulesPane(sh *shared) *modulesPane {
	return &modulesPane{sh: sh, k: newModulesKeys(), add: newPromptInput("add module from folder › ", "path/to/module (relative to the console's folder, ~ for home)", 4096), last: map[string]engine.RunRecord{},
		filter: newPromptInput("filter › ", "module, hook or description", 128)}
}

func (p *modulesPane) reload(runs []engine.RunRecord) {
	mods, err := p.eng().Modules()
	if err != nil {
		p.sh.errStatus(err)
		return
	}
	p.apply(mods, runs)
}

// modulesLoadedMsg is a fresh read of the modules; then, when set, runs
// once they are shown (to select one, say what happened).
type modulesLoadedMsg struct {
	mods []engine.Module
	// runs are the runs the pane showed running, read again: a run that
	// ended while no event could say so (its engine died, and the one
	// that took over closed it) shows as it ended.
	runs []engine.RunRecord
	err  error
	then func()
}

// refresh re-reads the modules off the UI goroutine: on r, after an add,
// and on every module.* receipt (a module added or removed anywhere).
func (p *modulesPane) refresh(then func()) tea.Cmd {
	e := p.eng()
	var running []string
	for _, r := range p.last {
		if r.Ended == nil {
			running = append(running, r.ID)
		}
	}
	return func() tea.Msg {
		mods, err := e.Modules()
		var runs []engine.RunRecord
		for _, id := range running {
			if r, err := e.Run(id); err == nil {
				runs = append(runs, r)
			}
		}
		return modulesLoadedMsg{mods: mods, runs: runs, err: err, then: then}
	}
}

// apply shows mods (and the newest of runs per hook).
func (p *modulesPane) apply(mods []engine.Module, runs []engine.RunRecord) {
	// The cursor stays on the row it was on, by identity: a module added
	// or removed elsewhere moves the rows, never the operator's choice.
	var was modRow
	if p.sel < len(p.rows) {
		was = p.rows[p.sel]
	}
	sort.Slice(mods, func(i, j int) bool { return mods[i].Record.ID < mods[j].Record.ID })
	p.mods = mods
	p.rows = p.rows[:0]
	for i := range p.mods {
		m := &p.mods[i]
		head := len(p.rows)
		p.rows = append(p.rows, modRow{mod: m})
		if m.Manifest != nil {
			for _, h := range m.Manifest.HookNames() {
				if p.query == "" || contains(m.Record.ID+"/"+h+" "+m.Record.Description, p.query) {
					p.rows = append(p.rows, modRow{mod: m, hook: h})
				}
			}
		}
		if p.query != "" && len(p.rows) == head+1 && !contains(m.Record.ID+" "+m.Record.Description, p.query) {
			p.rows = p.rows[:head] // nothing of it matches
		}
	}
	// runs are newest first: the first seen of each hook is its last run.
	for i := len(runs) - 1; i >= 0; i-- {
		p.last[runs[i].Module+"/"+runs[i].Hook] = runs[i]
	}
	if was.mod != nil {
		for i, r := range p.rows {
			if r.mod.Record.ID == was.mod.Record.ID && r.hook == was.hook {
				p.sel = i
				return
			}
		}
	}
	if len(p.rows) > 0 {
		p.sel = landOn(p.sel, 1, len(p.rows), p.isHeader) // start on a hook
	}
}

func (p *modulesPane) runEvent(r engine.RunRecord) {
	k := r.Module + "/" + r.Hook
	if old, ok := p.last[k]; !ok || old.ID <= r.ID {
		p.last[k] = r
	}
}

func (p *modulesPane) capturing() bool { return p.add.Active() || p.filter.Active() || p.form != nil }

func (p *modulesPane) prompt() string { return p.add.View() + p.filter.View() }

func (p *modulesPane) keys() keyMap {
	k := p.k
	if p.add.Active() {
		return p.add.KeyMap()
	}
	if p.filter.Active() {
		return p.filter.KeyMap()
	}
	if p.form != nil {
		return p.form.keys()
	}
	return keyMap{short: []key.Binding{k.Up, k.Down, k.Run, k.Add, k.Reload}, full: [][]key.Binding{{k.Up, k.Down, k.PageUp, k.PageDown, k.Top, k.Bottom}, {k.Run, k.Add, k.Reload, k.Filter, k.Clear}}}
}

func (p *modulesPane) update(msg tea.Msg) tea.Cmd {
	switch m := msg.(type) {
	case moduleAddedMsg:
		return p.added(m)
	case modulesLoadedMsg:
		if m.err != nil {
			p.sh.errStatus(m.err)
			return nil
		}
		p.apply(m.mods, nil)
		for _, r := range m.runs {
			p.runEvent(r)
		}
		if m.then != nil {
			m.then()
		}
		return nil
	}
	if m, ok := msg.(startRunMsg); ok {
		return p.start(m.module, m.hook, nil)
	}
	if m, ok := msg.(runStartedMsg); ok {
		if m.err != nil {
			p.sh.errStatus(m.err)
			return nil
		}
		p.sh.setStatus(fmt.Sprintf("started %s/%s: run %s", m.module, m.hook, m.id), false)
		return jumpToRun(m.id)
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
	if p.add.Active() {
		cmd, outcome, path := p.add.Update(msg)
		if outcome == promptSubmitted {
			return p.addModule(strings.TrimSpace(path))
		}
		return cmd
	}
	if p.filter.Active() {
		cmd, outcome, q := p.filter.Update(msg)
		if outcome == promptSubmitted {
			p.setQuery(strings.TrimSpace(q))
		}
		return cmd
	}
	if sel, ok := navKey(msg, k.KeyMap, p.sel, len(p.rows), max(p.h-2, 1), p.isHeader); ok {
		p.sel = sel
		return nil
	}
	switch {
	case key.Matches(msg, k.Filter):
		return p.filter.Open(p.query)
	case key.Matches(msg, k.Clear) && p.query != "":
		p.setQuery("")
	case key.Matches(msg, k.Reload):
		return p.refresh(func() { p.sh.setStatus(fmt.Sprintf("%d modules", len(p.mods)), false) })
	case key.Matches(msg, k.Add):
		return p.add.Open("")
	case key.Matches(msg, k.Run):
		return p.runSelected()
	}
	return nil
}

// moduleAddedMsg is the outcome of adding a module from the console.
type moduleAddedMsg struct {
	path string
	m    *engine.Module
	err  error
}

// addModule adds the module at path, off the UI goroutine (the engine
// reads and checks the whole folder).
func (p *modulesPane) addModule(path string) tea.Cmd {
	if path == "" {
		return nil
	}
	abs, err := resolvePath(path)
	if err != nil {
		p.sh.errStatus(err)
		return nil
	}
	path = abs
	e, actor := p.eng(), p.sh.opts.Actor
	p.sh.setStatus("adding the module at "+path+" …", false)
	return func() tea.Msg {
		m, err := e.AddModule(actor, path)
		return moduleAddedMsg{path: path, m: m, err: err}
	}
}

// added shows the module just added, selected.
func (p *modulesPane) added(msg moduleAddedMsg) tea.Cmd {
	if msg.err != nil {
		p.sh.errStatus(msg.err)
		return nil
	}
	m := msg.m
	return p.refresh(func() {
		for i, r := range p.rows {
			if r.mod.Record.ID == m.Record.ID && r.hook == "" {
				p.sel = i
			}
		}
		p.sh.setStatus(fmt.Sprintf("module %s %s added from %s", m.Record.ID, m.Record.Version, msg.path), false)
	})
}

func (p *modulesPane) move(d int) {
	if len(p.rows) == 0 {
		return
	}
	dir := 1
	if d < 0 {
		dir = -1
	}
	p.sel = landOn(p.sel+d, dir, len(p.rows), p.isHeader)
}

// isHeader reports whether row i is a module's header row, which the
// cursor passes over (enter does nothing there) unless the module has no
// hook to land on (it cannot run: the row then says why).
func (p *modulesPane) isHeader(i int) bool {
	return p.rows[i].hook == "" && p.rows[i].mod.Manifest != nil && len(p.rows[i].mod.Manifest.Hooks) > 0
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
	// A run is work with effects: say what starts, and let only y
	// confirm it, so a stray enter (or one meant for a row the list
	// moved away from) never starts one.
	jail := "jailed (" + p.sh.jail + ")"
	if p.sh.jail == "" {
		jail = "jailed"
	}
	if p.sh.opts.Jail == engine.JailOff {
		jail = "UNJAILED (--jail off)"
	}
	extra := ""
	if len(h.Requires) > 0 {
		extra = ", needs " + strings.Join(h.Requires, ",")
	}
	if h.Network {
		extra += ", network"
	}
	return ask(fmt.Sprintf("run %s/%s now, %s%s?", safe(r.mod.Record.ID), safe(r.hook), jail, safe(extra)), "", false,
		func() tea.Msg { return startRunMsg{module: r.mod.Record.ID, hook: r.hook} })
}

// startRunMsg: the operator confirmed starting a hook without inputs.
type startRunMsg struct{ module, hook string }

// runStartedMsg reports a run the console started.
type runStartedMsg struct {
	module, hook, id string
	err              error
}

// start runs a hook and, once it has started, shows its stream. StartRun
// runs off the UI goroutine: its preflight may wait on the operator (a
// network request), who must still be able to answer in this console.
func (p *modulesPane) start(module, hook string, inputs map[string]any) tea.Cmd {
	e, actor, jail := p.eng(), p.sh.opts.Actor, p.sh.opts.Jail
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
	title := fmt.Sprintf("Modules (%d)", len(p.mods))
	if p.query != "" {
		hooks, shown := 0, 0
		for _, m := range p.mods {
			if m.Manifest != nil {
				hooks += len(m.Manifest.Hooks)
			}
		}
		for _, r := range p.rows {
			if r.hook != "" {
				shown++
			}
		}
		title += fmt.Sprintf(" · filter %s (esc clears) · %d of %d hooks", plain(p.query, 30), shown, hooks)
	}
	out := []string{fit(th.Title.Render(title), w)}
	if len(p.mods) > 0 && len(p.rows) == 0 {
		out = append(out, th.Dim.Render(plain("no match for "+p.query, w)))
	}
	if len(p.mods) == 0 {
		out = append(out, th.Dim.Render(plain("no modules: press a to add one from its folder (or `warden module add PATH`)", w)))
	}
	p.h = h
	rows := max(h-1, 1)
	p.off = scrollOff(p.off, p.sel, rows, len(p.rows))
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
			line = fmt.Sprintf("%s %s %s", mark, safe(m.Record.ID), safe(m.Record.Version))
			if m.Manifest == nil {
				line = fit(line, 24) + " " + th.StatusErr.Render(plain("cannot run: "+OneLine(m.Problem), max(w-26, 1)))
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
			// Every hook is an MCP tool of `warden mcp serve`.
			info = append(info, "mcp "+r.mod.Record.ID+"__"+r.hook)
			last := th.Dim.Render("never run")
			if lr, ok := p.last[r.mod.Record.ID+"/"+r.hook]; ok {
				g, st := runGlyph(th, lr.Status)
				last = st.Render(g+" "+lr.Status) + th.Dim.Render(" "+runAgo(lr, now))
			}
			name := fmt.Sprintf("%s   %-16s", mark, r.hook)
			if i == p.sel {
				name = th.Selected.Render(name)
			}
			lastW := widthOf(last)
			line = name + " " + fit(th.Dim.Render(plain(strings.Join(info, " · "), max(w-22-lastW-2, 1))), max(w-22-lastW-2, 1)) + " " + last
		}
		out = append(out, fit(line, w))
	}
	for len(out) < h {
		out = append(out, "")
	}
	return strings.Join(out[:h], "\n")
}

// setQuery filters the list ("" shows it all), keeping the cursor on a hook.
func (p *modulesPane) setQuery(q string) {
	p.query = q
	p.apply(p.mods, nil)
}

// resolvePath makes a path the operator typed absolute: ~ is the home
// directory, and a relative path is taken from the console's working
// directory (where warden was started), as a shell would.
func resolvePath(path string) (string, error) {
	if path == "~" || strings.HasPrefix(path, "~/") {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("cannot expand ~ in %q: %v; type the absolute path", path, err)
		}
		path = filepath.Join(home, strings.TrimPrefix(path, "~"))
	}
	if filepath.IsAbs(path) {
		return filepath.Clean(path), nil
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("cannot resolve %q against the console's folder: %v; type the absolute path", path, err)
	}
	return abs, nil
}

// modulesRole is the engine as the Modules pane needs it: the modules,
// and starting their hooks.
type modulesRole interface {
	engine.Modules
	StartRun(actor engine.Actor, req engine.RunRequest) (*engine.RunHandle, error)
	Run(id string) (engine.RunRecord, error)
}

// eng is the engine as this pane needs it.
func (p *modulesPane) eng() modulesRole { return p.sh.e }
