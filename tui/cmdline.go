package tui

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/themes"
)

// The command line: `:` opens it on any tab (k9s-style), tab completes
// from what the console knows (commands, hooks, pending requests, themes,
// receipt kinds), enter runs the command, esc closes it. Every command is
// also a key or a few; the command line is for reaching a thing by name.

// cmdHelp is the list an unknown command points at.
const cmdHelp = ":runs :requests :receipts [kind=K] :modules :hands :run MODULE HOOK [k=v…] :approve N :deny N [reason] :theme NAME :messages :help :quit"

// cmdline is the app's command line.
type cmdline struct {
	in promptInput
}

func newCmdline() cmdline {
	in := newPromptInput(":", "runs · requests · receipts kind=hook. · run MODULE HOOK k=v · approve N · theme light · quit (tab completes)", 512)
	in.input.ShowSuggestions = true
	return cmdline{in: in}
}

// suggestions are the commands tab completes to, from what the console
// shows now.
func (a *App) suggestions() []string {
	s := []string{"runs", "streams", "requests", "receipts", "modules", "hands", "messages", "help", "quit"}
	for _, k := range []string{"hook.", "request.", "policy.", "module.", "hands.", "config.", "secret.", "mcp."} {
		s = append(s, "receipts kind="+k)
	}
	for _, m := range a.modules.mods {
		if m.Manifest == nil {
			continue
		}
		for _, h := range m.Manifest.HookNames() {
			s = append(s, "run "+m.Record.ID+" "+h)
		}
	}
	for _, r := range a.requests.reqs {
		if r.Decision == nil {
			s = append(s, fmt.Sprintf("approve %d", r.ID), fmt.Sprintf("deny %d", r.ID))
		}
	}
	for _, n := range themes.Names() {
		s = append(s, "theme "+n)
	}
	sort.Strings(s)
	return s
}

// openCmdline opens the command line.
func (a *App) openCmdline() tea.Cmd {
	a.cmd.in.input.SetSuggestions(a.suggestions())
	a.cmd.in.SetWidth(max(a.width-4, 10))
	return a.cmd.in.Open("")
}

// cmdlineKey takes a key while the command line is open.
func (a *App) cmdlineKey(msg tea.KeyMsg) tea.Cmd {
	cmd, outcome, line := a.cmd.in.Update(msg)
	if outcome != promptSubmitted {
		return cmd
	}
	return tea.Batch(cmd, a.runCommand(strings.TrimSpace(line)))
}

// cmdlineKeys is what the help line shows while the command line is open.
func (a *App) cmdlineKeys() keyMap {
	k := a.cmd.in.KeyMap()
	k.short = append(k.short, key.NewBinding(key.WithKeys("tab"), key.WithHelp("tab", "complete")),
		key.NewBinding(key.WithKeys("ctrl+n"), key.WithHelp("ctrl+n/p", "other completions")))
	return k
}

// runCommand runs one command line.
func (a *App) runCommand(line string) tea.Cmd {
	f := strings.Fields(line)
	if len(f) == 0 {
		return nil
	}
	name, args := strings.ToLower(f[0]), f[1:]
	switch name {
	case "runs", "streams", "run-list":
		return a.setTab(tabStreams)
	case "requests", "reqs":
		return a.setTab(tabRequests)
	case "modules", "mods":
		return a.setTab(tabModules)
	case "hands":
		return a.setTab(tabHands)
	case "receipts":
		kind := ""
		for _, arg := range args {
			v, ok := strings.CutPrefix(arg, "kind=")
			if !ok {
				return a.cmdError("usage: :receipts [kind=K] (a family like hook. or an exact kind like module.add)")
			}
			kind = v
		}
		a.setTab(tabReceipts) // its first read gives way to the kind's
		return a.receipts.showKind(kindFilter(kind))
	case "run":
		if len(args) < 2 {
			return a.cmdError("usage: :run MODULE HOOK [name=value …]")
		}
		raw := map[string]string{}
		for _, kv := range args[2:] {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return a.cmdError(fmt.Sprintf("input %q: want name=value (usage: :run MODULE HOOK [name=value …])", kv))
			}
			raw[k] = v
		}
		return a.modules.startRaw(args[0], args[1], raw)
	case "approve", "deny":
		if len(args) < 1 {
			return a.cmdError(fmt.Sprintf("usage: :%s N%s", name, map[bool]string{true: " [reason]"}[name == "deny"]))
		}
		id, err := strconv.ParseUint(strings.TrimPrefix(args[0], "#"), 10, 64)
		if err != nil {
			return a.cmdError(fmt.Sprintf("%q is not a request number (usage: :%s N)", args[0], name))
		}
		show := a.setTab(tabRequests)
		a.requests.selectOrAwait(id)
		verdict := engine.Deny
		if name == "approve" {
			verdict = engine.ApproveOnce
		}
		return tea.Batch(show, a.requests.decide(id, verdict, strings.Join(args[1:], " ")))
	case "theme":
		if len(args) != 1 {
			return a.cmdError("usage: :theme NAME (" + strings.Join(themes.Names(), ", ") + ")")
		}
		return a.setTheme(args[0])
	case "messages", "msgs", "log":
		return openOverlay(a.messagesOverlay())
	case "help", "?":
		a.showHelp = true
	case "quit", "q", "q!", "exit":
		a.Close()
		return tea.Quit
	default:
		return a.cmdError(fmt.Sprintf("unknown command %q: try %s (tab completes)", name, cmdHelp))
	}
	return nil
}

func (a *App) cmdError(msg string) tea.Cmd {
	a.sh.setStatus(msg, true)
	return nil
}

// setTheme switches every pane to another theme (an SSH session's choice
// is remembered for its key through Options.OnTheme).
func (a *App) setTheme(name string) tea.Cmd {
	mk := a.sh.opts.MakeTheme
	if mk == nil {
		mk = themes.ByName
	}
	th, err := mk(name)
	if err != nil {
		return a.cmdError(err.Error())
	}
	a.sh.th = th
	a.applyThemeStyles()
	a.streams.log.paints = nil
	if a.sh.opts.OnTheme != nil {
		a.sh.opts.OnTheme(strings.ToLower(name))
	}
	a.sh.setStatus("theme "+th.Name, false)
	return nil
}

// messagesOverlay shows every status message of this session in full,
// newest last: a message cut off in the status line is read here.
func (a *App) messagesOverlay() *overlay {
	msgs := a.sh.messages
	if len(msgs) == 0 {
		return textOverlay(a.sh, "Messages", "no messages yet")
	}
	var b strings.Builder
	for i, m := range msgs {
		if i > 0 {
			b.WriteByte('\n')
		}
		mark := "  "
		if m.err {
			mark = "✗ "
		}
		fmt.Fprintf(&b, "%s %s%s", m.at.Local().Format("15:04:05"), mark, m.text)
	}
	o := textOverlay(a.sh, fmt.Sprintf("Messages (%d)", len(msgs)), b.String())
	o.toEnd = true
	return o
}

// showKind shows the receipts of a kind ("" for all), every one of them
// (a text filter is cleared).
func (p *receiptsPane) showKind(kind string) tea.Cmd {
	p.query, p.typed = "", kind
	return p.rekind(kind)
}

// startRaw runs a hook with inputs as typed (name=value, converted by the
// hook's declared types), as `warden hook run --input` does.
func (p *modulesPane) startRaw(module, hook string, raw map[string]string) tea.Cmd {
	e, actor, jail := p.eng(), p.sh.opts.Actor, p.sh.opts.Jail
	p.sh.setStatus(fmt.Sprintf("starting %s/%s …", module, hook), false)
	return func() tea.Msg {
		h, err := e.StartRun(actor, engine.RunRequest{Module: module, Hook: hook, RawInputs: raw, Jail: jail})
		if err != nil {
			return runStartedMsg{module: module, hook: hook, err: err}
		}
		return runStartedMsg{module: module, hook: hook, id: h.ID}
	}
}
