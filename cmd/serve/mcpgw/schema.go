package mcpgw

import (
	"fmt"
	"sort"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/engine/hooks"
)

// ToolName is the MCP tool of a module's hook (engine.MCPToolName).
func ToolName(module, hook string) string { return engine.MCPToolName(module, hook) }

// SplitToolName is ToolName's inverse.
func SplitToolName(tool string) (module, hook string, ok bool) {
	return strings.Cut(tool, "__")
}

// schemaFor is the JSON Schema (2020-12) of a hook's declared values: an
// object with exactly the declared properties, all required.
func schemaFor(decl map[string]hooks.Type, what string) *jsonschema.Schema {
	s := &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{},
		Required: []string{}, AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}}}
	names := make([]string, 0, len(decl))
	for n := range decl {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t := decl[n]
		p := &jsonschema.Schema{}
		switch t.Kind {
		case hooks.KindString:
			p.Type = "string"
		case hooks.KindNumber:
			p.Type = "number"
		case hooks.KindBool:
			p.Type = "boolean"
		case hooks.KindObject:
			p.Type = "object"
		case hooks.KindArray:
			p.Type = "array"
		case hooks.KindPath:
			p.Type, p.Pattern = "string", "^/"
			if t.RW {
				p.Description = "an absolute, canonical host path; bound read-write into the hook's jail"
			} else {
				p.Description = "an absolute, canonical host path; bound read-only into the hook's jail"
			}
		default:
			p.Description = fmt.Sprintf("declared %s type %s", what, t)
		}
		s.Properties[n] = p
		s.Required = append(s.Required, n)
	}
	return s
}

// tool is one exposed hook: its MCP definition, its resolved input schema
// and a fingerprint that changes when the definition does.
type tool struct {
	name, module, hook string
	desc               string
	in, out            *jsonschema.Schema
	resolved           *jsonschema.Resolved
	print              string
	hands              bool // a hands tool, not a hook
}

func sortStrings(s []string) { sort.Strings(s) }

// toolsOf lists the tools of the registered modules that can run now.
func toolsOf(ms []engine.Module) (map[string]*tool, error) {
	out := handsTools()
	for _, m := range ms {
		if m.Manifest == nil {
			continue
		}
		for _, h := range m.Manifest.HookNames() {
			hk := m.Manifest.Hooks[h]
			t := &tool{name: ToolName(m.Manifest.ID, h), module: m.Manifest.ID, hook: h, in: schemaFor(hk.Inputs, "input")}
			if len(hk.Outputs) > 0 {
				t.out = schemaFor(hk.Outputs, "output")
			}
			t.desc = describe(m.Manifest, hk)
			r, err := t.in.Resolve(nil)
			if err != nil {
				return nil, fmt.Errorf("tool %s: its input schema: %w", t.name, err)
			}
			t.resolved = r
			t.print = fmt.Sprintf("%s|%s|%v|%v|%s", m.Manifest.Version, m.Record.Path, hk.Inputs, hk.Outputs, t.desc)
			out[t.name] = t
		}
	}
	return out, nil
}

// describe is a tool's description: the module's own, then what warden
// does with a call.
func describe(m *hooks.Manifest, h *hooks.Hook) string {
	var b strings.Builder
	if d := m.Description; d != "" {
		// The module author's text: escaped (a client may print it to a
		// terminal) and bounded.
		if len(d) > 1024 {
			d = d[:1024] + "…"
		}
		b.WriteString(safe(d))
		b.WriteString(" ")
	}
	fmt.Fprintf(&b, "(hook %s of module %s %s, run by warden in a bubblewrap jail", h.Name, m.ID, m.Version)
	if h.Network {
		b.WriteString("; asks for network")
	}
	if len(h.Requires) > 0 {
		fmt.Fprintf(&b, "; may ask the operator (%s)", strings.Join(h.Requires, ", "))
	}
	fmt.Fprintf(&b, "; times out after %s. Every call waits for a warden operator's approval unless a rule allows it.)", h.Timeout)
	return b.String()
}
