package hooks

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseType(t *testing.T) {
	for _, s := range []string{"string", "number", "bool", "object", "array", "path", "path:rw"} {
		ty, err := ParseType(s)
		if err != nil {
			t.Fatalf("ParseType(%q): %v", s, err)
		}
		if ty.String() != s || !ty.Valid() {
			t.Errorf("ParseType(%q) = %+v, String %q", s, ty, ty.String())
		}
		if ty.RW != (s == "path:rw") {
			t.Errorf("ParseType(%q).RW = %v", s, ty.RW)
		}
		b, err := json.Marshal(ty)
		if err != nil || string(b) != `"`+s+`"` {
			t.Errorf("json.Marshal(%v) = %s, %v", ty, b, err)
		}
		var back Type
		if err := json.Unmarshal(b, &back); err != nil || back != ty {
			t.Errorf("round trip %s = %+v, %v", b, back, err)
		}
	}
	for _, s := range []string{"", "str", "int", "String", "string:rw", "path:ro", "path:", "null", "path:rw:rw"} {
		if ty, err := ParseType(s); err == nil {
			t.Errorf("ParseType(%q) = %+v, want error", s, ty)
		}
	}
	if (Type{Kind: "number", RW: true}).Valid() {
		t.Error("number:rw is valid")
	}
}

func TestKindOf(t *testing.T) {
	tests := map[string]string{
		`"x"`: "string", ` "x" `: "string", `1`: "number", `-1.5e3`: "number", `true`: "bool",
		`false`: "bool", `null`: "null", `{}`: "object", `{"a":[1]}`: "object", `[]`: "array",
		`[1,"a"]`: "array", ``: "invalid", `nul`: "invalid", `{`: "invalid", `1 2`: "invalid",
		`'x'`: "invalid", `NaN`: "invalid", `01`: "invalid",
	}
	for raw, want := range tests {
		if got := KindOf(json.RawMessage(raw)); got != want {
			t.Errorf("KindOf(%q) = %q, want %q", raw, got, want)
		}
	}
}

func TestParseInputs(t *testing.T) {
	dir := t.TempDir()
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(real, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	decl := map[string]Type{
		"s": {Kind: "string"}, "n": {Kind: "number"}, "b": {Kind: "bool"},
		"o": {Kind: "object"}, "a": {Kind: "array"}, "p": {Kind: "path", RW: true},
	}
	good := map[string]string{
		"s": "hello world", "n": "-2.5e1", "b": "true", "o": `{"k":[1,"x"]}`, "a": `[1, 2]`, "p": real,
	}
	got, err := ParseInputs(decl, good)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"s": "hello world", "n": -25.0, "b": true,
		"o": map[string]any{"k": []any{1.0, "x"}}, "a": []any{1.0, 2.0}, "p": real,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseInputs = %#v\nwant %#v", got, want)
	}
	if err := CheckInputs(decl, got); err != nil {
		t.Errorf("CheckInputs(ParseInputs result) = %v", err)
	}

	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for kk, vv := range good {
			m[kk] = vv
		}
		if v == "\x00delete" {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	bad := []struct {
		name  string
		given map[string]string
		want  string
	}{
		{"unknown", with("x", "1"), `unknown input "x" (declared inputs: a, b, n, o, p, s)`},
		{"missing", with("s", "\x00delete"), `input "s" missing (declared inputs: a, b, n, o, p, s)`},
		{"number word", with("n", "ten"), `input "n": expected number`},
		{"number string", with("n", `"1"`), `input "n": expected number, got string`},
		{"number hex", with("n", "0x10"), `input "n": expected number`},
		{"number NaN", with("n", "NaN"), `input "n": expected number`},
		{"number huge", with("n", "1e400"), `input "n": number "1e400" out of range`},
		{"bool yes", with("b", "yes"), `input "b": expected bool (true or false), got "yes"`},
		{"bool 1", with("b", "1"), `input "b": expected bool`},
		{"bool True", with("b", "True"), `input "b": expected bool`},
		{"object array", with("o", "[1]"), `input "o": expected object, got array`},
		{"object broken", with("o", "{"), `input "o": expected object (as JSON)`},
		{"array object", with("a", "{}"), `input "a": expected array, got object`},
		{"array trailing", with("a", "[] []"), `input "a": expected array`},
		{"path relative", with("p", "tmp/x"), `input "p": path "tmp/x" is not absolute`},
		{"path unclean", with("p", real+"/./"), `input "p": path "` + real + `/./" is not canonical`},
		{"path symlink", with("p", link), `input "p": path "` + link + `" goes through a symlink`},
		{"path missing", with("p", real+"/nope"), `no such file or directory`},
		{"path empty", with("p", ""), `input "p": expected an absolute path`},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseInputs(decl, tc.given)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want containing %q", err, tc.want)
			}
		})
	}
	if _, err := ParseInputs(nil, map[string]string{"a": "1", "b": "2"}); err == nil ||
		err.Error() != `unknown inputs "a", "b" (this hook declares no inputs)` {
		t.Errorf("no decl: err = %v", err)
	}
	if got, err := ParseInputs(nil, nil); err != nil || len(got) != 0 {
		t.Errorf("empty: %v, %v", got, err)
	}
}

func TestCheckInputs(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	decl := map[string]Type{"s": {Kind: "string"}, "n": {Kind: "number"}, "b": {Kind: "bool"}, "o": {Kind: "object"}, "a": {Kind: "array"}, "p": {Kind: "path"}}
	var fromJSON map[string]any
	doc := `{"s":"x","n":3,"b":false,"o":{},"a":[],"p":"` + dir + `"}`
	if err := json.Unmarshal([]byte(doc), &fromJSON); err != nil {
		t.Fatal(err)
	}
	if err := CheckInputs(decl, fromJSON); err != nil {
		t.Fatal(err)
	}
	set := func(k string, v any) map[string]any {
		m := map[string]any{}
		for kk, vv := range fromJSON {
			m[kk] = vv
		}
		m[k] = v
		return m
	}
	if err := CheckInputs(decl, set("n", json.Number("7"))); err != nil {
		t.Errorf("json.Number: %v", err)
	}
	if err := CheckInputs(decl, set("n", 7)); err != nil {
		t.Errorf("int: %v", err)
	}
	bad := []struct {
		name  string
		given map[string]any
		want  string
	}{
		{"string number", set("s", 1.0), `input "s": expected string, got number`},
		{"number string", set("n", "1"), `input "n": expected number, got string`},
		{"bool null", set("b", nil), `input "b": expected bool, got null`},
		{"object array", set("o", []any{}), `input "o": expected object, got array`},
		{"array object", set("a", map[string]any{}), `input "a": expected array, got object`},
		{"path number", set("p", 1.0), `input "p": expected path, got number`},
		{"path relative", set("p", "x/y"), `input "p": path "x/y" is not absolute`},
		{"unknown", set("zz", 1.0), `unknown input "zz" (declared inputs: a, b, n, o, p, s)`},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckInputs(decl, tc.given)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want containing %q", err, tc.want)
			}
		})
	}
	missing := set("s", "")
	delete(missing, "s")
	if err := CheckInputs(decl, missing); err == nil || err.Error() != `input "s" missing (declared inputs: a, b, n, o, p, s)` {
		t.Errorf("missing: %v", err)
	}
}

func TestCheckOutputs(t *testing.T) {
	decl := map[string]Type{"address": {Kind: "string"}, "port": {Kind: "number"}}
	raw := func(m map[string]string) map[string]json.RawMessage {
		out := map[string]json.RawMessage{}
		for k, v := range m {
			out[k] = json.RawMessage(v)
		}
		return out
	}
	tests := []struct {
		name string
		decl map[string]Type
		got  map[string]string
		want string // "" = ok
	}{
		{"ok", decl, map[string]string{"address": `"1.2.3.4"`, "port": `22`}, ""},
		{"none declared none given", nil, nil, ""},
		{"wrong type", decl, map[string]string{"address": `5`, "port": `22`}, `output "address": expected string, got number`},
		{"null", decl, map[string]string{"address": `null`, "port": `22`}, `output "address": expected string, got null`},
		{"invalid json", decl, map[string]string{"address": `"x`, "port": `22`}, `output "address": expected string, got invalid`},
		{"port string", decl, map[string]string{"address": `"a"`, "port": `"22"`}, `output "port": expected number, got string`},
		{"missing", decl, map[string]string{"port": `22`}, `output "address" missing (declared outputs: address, port)`},
		{"missing both", decl, nil, `outputs "address", "port" missing (declared outputs: address, port)`},
		{"extra", decl, map[string]string{"address": `"a"`, "port": `1`, "zone": `"z"`}, `undeclared output "zone" (declared outputs: address, port)`},
		{"extras", decl, map[string]string{"address": `"a"`, "port": `1`, "z": `1`, "y": `2`}, `undeclared outputs "y", "z" (declared outputs: address, port)`},
		{"undeclared with none declared", nil, map[string]string{"x": `1`}, `undeclared output "x" (this hook declares no outputs)`},
		{"object", map[string]Type{"o": {Kind: "object"}}, map[string]string{"o": `[]`}, `output "o": expected object, got array`},
		{"bool", map[string]Type{"b": {Kind: "bool"}}, map[string]string{"b": `true`}, ""},
		{"path ok", map[string]Type{"p": {Kind: "path"}}, map[string]string{"p": `"/srv/x"`}, ""},
		{"path relative", map[string]Type{"p": {Kind: "path"}}, map[string]string{"p": `"srv/x"`}, `output "p": expected path (absolute and clean), got "srv/x"`},
		{"path number", map[string]Type{"p": {Kind: "path"}}, map[string]string{"p": `1`}, `output "p": expected path, got number`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckOutputs(tc.decl, raw(tc.got))
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("err = %v", err)
			case tc.want != "" && (err == nil || err.Error() != tc.want):
				t.Errorf("err = %v\nwant  %s", err, tc.want)
			}
		})
	}
}
