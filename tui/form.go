package tui

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/huh"

	"github.com/wardenhq/warden/engine"
)

// inputsForm is a huh form for a hook's declared inputs, embedded in the
// Modules pane: each field is typed and validated as the operator types;
// the engine checks the whole set again when the run starts.
type inputsForm struct {
	sh     *shared
	module string
	hook   *engine.Hook
	form   *huh.Form
	strs   map[string]*string
	bools  map[string]*bool
	names  []string
	start  func(module, hook string, inputs map[string]any) tea.Cmd
	cancel key.Binding
	w, h   int
}

func newInputsForm(sh *shared, module string, h *engine.Hook, start func(string, string, map[string]any) tea.Cmd) (*inputsForm, tea.Cmd) {
	f := &inputsForm{sh: sh, module: module, hook: h, start: start, strs: map[string]*string{}, bools: map[string]*bool{},
		cancel: key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "cancel"))}
	for n := range h.Inputs {
		f.names = append(f.names, n)
	}
	sort.Strings(f.names)
	var fields []huh.Field
	for _, n := range f.names {
		t := h.Inputs[n]
		title := fmt.Sprintf("%s (%s)", n, t)
		if t.Kind == "bool" {
			b := new(bool)
			f.bools[n] = b
			fields = append(fields, huh.NewConfirm().Key(n).Title(title).Affirmative("true").Negative("false").Value(b))
			continue
		}
		s := new(string)
		f.strs[n] = s
		in := huh.NewInput().Key(n).Title(title).Value(s).Validate(validator(t))
		switch t.Kind {
		case "number":
			in = in.Placeholder("a number, e.g. 42 or 1.5")
		case "path":
			in = in.Placeholder("an absolute host path").Description(map[bool]string{true: "bound read-write into the jail", false: "bound read-only into the jail"}[t.RW])
		case "object":
			in = in.Placeholder(`JSON object, e.g. {"k":"v"}`)
		case "array":
			in = in.Placeholder(`JSON array, e.g. ["a","b"]`)
		}
		fields = append(fields, in)
	}
	f.form = huh.NewForm(huh.NewGroup(fields...).Title(fmt.Sprintf("Run %s/%s", module, h.Name)).
		Description("enter moves on; the last enter starts the run · esc cancels")).
		WithTheme(sh.th.Huh()).WithShowHelp(false).WithWidth(70) // the footer shows its keys
	f.form.SubmitCmd, f.form.CancelCmd = nil, nil
	return f, f.form.Init()
}

// validator checks one typed input as the operator types it.
func validator(t engine.InputType) func(string) error {
	return func(s string) error {
		switch t.Kind {
		case "number":
			if _, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err != nil {
				return errors.New("not a number")
			}
		case "path":
			if !filepath.IsAbs(s) || filepath.Clean(s) != s {
				return errors.New("must be an absolute, clean path")
			}
		case "object", "array":
			var v any
			if err := json.Unmarshal([]byte(s), &v); err != nil {
				return errors.New("not JSON")
			}
			if _, ok := v.(map[string]any); t.Kind == "object" && !ok {
				return errors.New("not a JSON object")
			}
			if _, ok := v.([]any); t.Kind == "array" && !ok {
				return errors.New("not a JSON array")
			}
		}
		return nil
	}
}

// values are the typed inputs.
func (f *inputsForm) values() map[string]any {
	out := map[string]any{}
	for _, n := range f.names {
		t := f.hook.Inputs[n]
		if b, ok := f.bools[n]; ok {
			out[n] = *b
			continue
		}
		s := *f.strs[n]
		switch t.Kind {
		case "number":
			v, _ := strconv.ParseFloat(strings.TrimSpace(s), 64)
			out[n] = v
		case "object", "array":
			var v any
			json.Unmarshal([]byte(s), &v)
			out[n] = v
		default:
			out[n] = s
		}
	}
	return out
}

func (f *inputsForm) keys() keyMap {
	return keyMap{short: append([]key.Binding{f.cancel}, f.form.KeyBinds()...)}
}

// update feeds the form; done is true once it is submitted or cancelled.
func (f *inputsForm) update(msg tea.Msg) (tea.Cmd, bool) {
	if k, ok := msg.(tea.KeyMsg); ok && key.Matches(k, f.cancel) {
		f.sh.setStatus("run cancelled", false)
		return nil, true
	}
	m, cmd := f.form.Update(msg)
	if ff, ok := m.(*huh.Form); ok {
		f.form = ff
	}
	switch f.form.State {
	case huh.StateCompleted:
		return tea.Batch(cmd, f.start(f.module, f.hook.Name, f.values())), true
	case huh.StateAborted:
		f.sh.setStatus("run cancelled", false)
		return cmd, true
	}
	return cmd, false
}

func (f *inputsForm) view(w, h int) string {
	if w != f.w || h != f.h {
		f.w, f.h = w, h
		f.form = f.form.WithWidth(min(w, 90)).WithHeight(max(h-3, 5))
	}
	lines := strings.Split(f.form.View(), "\n")
	for len(lines) < h {
		lines = append(lines, "")
	}
	lines = lines[:h]
	for i := range lines {
		lines[i] = fit(lines[i], w)
	}
	return strings.Join(lines, "\n")
}
