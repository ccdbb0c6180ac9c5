package mcpgw

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/wardenhq/warden/engine/hooks"
)

// TestSchemaForEveryType: each declared type becomes its JSON Schema
// type, every input is required, nothing else is accepted, and a path
// must be absolute.
func TestSchemaForEveryType(t *testing.T) {
	decl := map[string]hooks.Type{
		"s": {Kind: hooks.KindString}, "n": {Kind: hooks.KindNumber}, "b": {Kind: hooks.KindBool},
		"o": {Kind: hooks.KindObject}, "a": {Kind: hooks.KindArray}, "p": {Kind: hooks.KindPath}, "w": {Kind: hooks.KindPath, RW: true},
	}
	s := schemaFor(decl, "input")
	raw, _ := json.Marshal(s)
	for _, want := range []string{`"s":{"type":"string"}`, `"n":{"type":"number"}`, `"b":{"type":"boolean"}`, `"o":{"type":"object"}`,
		`"a":{"type":"array"}`, `"required":["a","b","n","o","p","s","w"]`, `"additionalProperties":false`, "read-write", "read-only"} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("schema lacks %s: %s", want, raw)
		}
	}
	r, err := s.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	good := map[string]any{"s": "x", "n": 1.5, "b": true, "o": map[string]any{}, "a": []any{1}, "p": "/etc", "w": "/srv"}
	if err := r.Validate(good); err != nil {
		t.Fatalf("good arguments refused: %v", err)
	}
	for name, bad := range map[string]func(m map[string]any){
		"bool as string":  func(m map[string]any) { m["b"] = "true" },
		"relative path":   func(m map[string]any) { m["p"] = "etc" },
		"array as object": func(m map[string]any) { m["a"] = map[string]any{} },
		"missing":         func(m map[string]any) { delete(m, "n") },
		"extra":           func(m map[string]any) { m["x"] = 1 },
	} {
		m := map[string]any{}
		for k, v := range good {
			m[k] = v
		}
		bad(m)
		if err := r.Validate(m); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if a, b, ok := SplitToolName(ToolName("my-mod", "on_install")); !ok || a != "my-mod" || b != "on_install" {
		t.Errorf("split: %s %s %v", a, b, ok)
	}
}

// The author's description reaches the client escaped by termsafe's
// rule: controls as their pictures, and the bidi overrides, isolates and
// zero-width characters (which a rule of C0, DEL and C1 only would let
// through raw) as ␦ (termsafe.Substitute).
func TestDescribeEscapesTheAuthorsText(t *testing.T) {
	m := &hooks.Manifest{ID: "m", Version: "1", Description: "nice\x1b[2Jtool\n \u202egnp.exe \u2066x\u2069 a\u200bb \u061c"}
	d := describe(m, &hooks.Hook{Name: "h"})
	if strings.ContainsAny(d, "\x1b\n\u202e\u2066\u2069\u200b\u061c") || !strings.Contains(d, "nice␛[2Jtool␊ ␦gnp.exe ␦x␦ a␦b ␦") {
		t.Errorf("description %q", d)
	}
}
