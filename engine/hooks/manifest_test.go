package hooks

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// designExample is the module.yaml of docs/architecture.md, verbatim.
const designExample = `id: hello                  # [a-z0-9][a-z0-9-]{0,62}
version: 1.0.0
description: Says hello.
secrets: [bot_token]       # secret names hooks may get/set/delete
config: [public_ip]        # config names hooks may set/delete (they may get any)
hooks:
  on_install:
    run: [./hooks/on_install.sh, --verbose]   # argv; relative to the module dir
    timeout: 2m            # whole run (default 10m)
    idle_timeout: 30s      # no frame and no output line for this long (default 30s)
    requires: [operator]   # capabilities that must exist before the hook starts
    inputs: {target: string}
    outputs: {address: string}   # the result must carry these, with these types
    network: false         # asks for network inside the jail; policy decides
`

const mfTestFile = "/m/module.yaml"

func TestParseManifestDesignExample(t *testing.T) {
	m, err := ParseManifest(mfTestFile, []byte(designExample))
	if err != nil {
		t.Fatal(err)
	}
	want := &Manifest{
		ID:          "hello",
		Version:     "1.0.0",
		Description: "Says hello.",
		Secrets:     []string{"bot_token"},
		Config:      []string{"public_ip"},
		Hooks: map[string]*Hook{
			"on_install": {
				Name:        "on_install",
				Run:         []string{"./hooks/on_install.sh", "--verbose"},
				RunLine:     8,
				Timeout:     2 * time.Minute,
				IdleTimeout: 30 * time.Second,
				Requires:    []string{"operator"},
				Inputs:      map[string]Type{"target": {Kind: "string"}},
				Outputs:     map[string]Type{"address": {Kind: "string"}},
				Network:     false,
				KillGrace:   DefaultKillGrace,
			},
		},
		Dir:  "/m",
		File: mfTestFile,
	}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("got\n%#v\n%#v\nwant\n%#v\n%#v", m, m.Hooks["on_install"], want, want.Hooks["on_install"])
	}
	if got := m.HookNames(); !reflect.DeepEqual(got, []string{"on_install"}) {
		t.Errorf("HookNames = %v", got)
	}
}

func TestParseManifestDefaultsAndVariants(t *testing.T) {
	src := `---
id: "0x-mod"
version: 2
hooks:
  status: {run: [bin/status]}
  "on-remove":
    run:
      - ./hooks/rm.sh
      - --count
      - 3
    requires: [hands, operator]
    network: true
    inputs:
      dir: path:rw
      ro: path
      n: number
      b: bool
      o: object
      a: array
    outputs: {}
`
	m, err := ParseManifest("module.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != "0x-mod" || m.Version != "2" || m.Description != "" || m.Dir != "" || m.File != "module.yaml" {
		t.Errorf("manifest = %+v", m)
	}
	st := m.Hooks["status"]
	if st == nil || st.Timeout != DefaultTimeout || st.IdleTimeout != DefaultIdleTimeout || st.Network || len(st.Requires) != 0 {
		t.Errorf("status hook = %+v", st)
	}
	rm := m.Hooks["on-remove"]
	if rm == nil {
		t.Fatalf("hooks = %v", m.Hooks)
	}
	if !reflect.DeepEqual(rm.Run, []string{"./hooks/rm.sh", "--count", "3"}) || !rm.Network {
		t.Errorf("on-remove = %+v", rm)
	}
	wantIn := map[string]Type{
		"dir": {Kind: "path", RW: true}, "ro": {Kind: "path"}, "n": {Kind: "number"},
		"b": {Kind: "bool"}, "o": {Kind: "object"}, "a": {Kind: "array"},
	}
	if !reflect.DeepEqual(rm.Inputs, wantIn) {
		t.Errorf("inputs = %v", rm.Inputs)
	}
	if !reflect.DeepEqual(m.HookNames(), []string{"on-remove", "status"}) {
		t.Errorf("HookNames = %v", m.HookNames())
	}
}

func TestManifestErrorFormat(t *testing.T) {
	src := strings.Replace(designExample, "    timeout: 2m", "    timout: 2m", 1)
	_, err := ParseManifest(mfTestFile, []byte(src))
	want := "/m/module.yaml:9: hooks.on_install.timout: unknown key (known: run, timeout, idle_timeout, kill_grace, requires, inputs, outputs, network, limits)"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant  %s", err, want)
	}
}

const mfOKHead = "id: x\nversion: 1.0.0\n"

// A YAML syntax error names the line and the column (goccy/go-yaml knows
// both), ahead of the message, so that a console that cuts the message
// keeps where the error is.
func TestManifestYAMLErrorLineCol(t *testing.T) {
	_, err := ParseManifest(mfTestFile, []byte("id: x\nhooks:\n  a:\n  - b\n    c: d\n"))
	if err == nil || !strings.HasPrefix(err.Error(), mfTestFile+":4:5: invalid YAML: unexpected key name") {
		t.Errorf("YAML error: %v", err)
	}
}

func TestParseManifestRefusals(t *testing.T) {
	hook := func(body string) string { return mfOKHead + "hooks:\n  h:\n" + body }
	tests := []struct {
		name    string
		src     string
		line    int
		key     string
		problem string
	}{
		{"unknown top key", mfOKHead + "hooks: {h: {run: [x]}}\nauthor: me\n", 4, "author", "unknown key (known: id, version, description, secrets, config, hooks)"},
		{"unknown hook key", hook("    run: [x]\n    timout: 2m\n"), 6, "hooks.h.timout", "unknown key (known: run,"},
		{"timeout list", hook("    run: [x]\n    timeout: [1]\n"), 6, "hooks.h.timeout", "expected a duration"},
		{"timeout number", hook("    run: [x]\n    timeout: 30\n"), 6, "hooks.h.timeout", "expected a duration"},
		{"bad duration", hook("    run: [x]\n    timeout: 2 minutes\n"), 6, "hooks.h.timeout", "invalid duration"},
		{"zero duration", hook("    run: [x]\n    idle_timeout: 0s\n"), 6, "hooks.h.idle_timeout", "must be positive"},
		{"negative duration", hook("    run: [x]\n    timeout: -1m\n"), 6, "hooks.h.timeout", "must be positive"},
		{"run string", hook("    run: \"x\"\n"), 5, "hooks.h.run", "expected a list"},
		{"run empty", hook("    run: []\n"), 5, "hooks.h.run", "must not be empty"},
		{"run null", hook("    run:\n"), 5, "hooks.h.run", "must not be empty"},
		{"run missing", hook("    network: true\n"), 4, "hooks.h.run", "missing"},
		{"hook null", mfOKHead + "hooks:\n  h:\n", 4, "hooks.h.run", "missing"},
		{"run absolute", hook("    run: [/bin/sh, -c, x]\n"), 5, "hooks.h.run[0]", "absolute"},
		{"run escapes", hook("    run: [../x.sh]\n"), 5, "hooks.h.run[0]", "escapes the module dir"},
		{"run escapes deep", hook("    run: [./a/../../x.sh]\n"), 5, "hooks.h.run[0]", "escapes the module dir"},
		{"run dot", hook("    run: [.]\n"), 5, "hooks.h.run[0]", "escapes the module dir"},
		{"run empty prog", hook("    run: ['']\n"), 5, "hooks.h.run[0]", "must not be empty"},
		{"run prog number", hook("    run: [1]\n"), 5, "hooks.h.run[0]", "expected a string"},
		{"run arg map", hook("    run:\n      - x\n      - {a: b}\n"), 7, "hooks.h.run[1]", "expected a string"},
		{"network maybe", hook("    run: [x]\n    network: maybe\n"), 6, "hooks.h.network", "expected true, false or a list"},
		{"network yes", hook("    run: [x]\n    network: yes\n"), 6, "hooks.h.network", "expected true, false or a list"},
		{"network bare star", hook("    run: [x]\n    network:\n      - pypi.org\n      - '*'\n"), 8, "hooks.h.network[1]", "a bare * would allow every host"},
		{"network ip literal", hook("    run: [x]\n    network: [203.0.113.7:443]\n"), 6, "hooks.h.network[0]", "write ip:203.0.113.7:443"},
		{"network cidr", hook("    run: [x]\n    network:\n      - 10.0.0.0/8\n"), 7, "hooks.h.network[0]", "CIDR ranges are refused"},
		{"network dup", hook("    run: [x]\n    network:\n      - pypi.org:443\n      - PyPI.org:443\n"), 8, "hooks.h.network[1]", "duplicated destination \"pypi.org:443\" (first at line 7)"},
		{"network number item", hook("    run: [x]\n    network: [443]\n"), 6, "hooks.h.network[0]", "expected a string"},
		{"bad id", "id: Hello\nversion: 1\nhooks: {h: {run: [x]}}\n", 1, "id", "invalid module id"},
		{"bad id dash", "id: -x\nversion: 1\nhooks: {h: {run: [x]}}\n", 1, "id", "invalid module id"},
		{"id too long", "id: " + strings.Repeat("a", 64) + "\nversion: 1\nhooks: {h: {run: [x]}}\n", 1, "id", "invalid module id"},
		{"id list", "id: [x]\nversion: 1\nhooks: {h: {run: [x]}}\n", 1, "id", "expected a string"},
		{"bad hook name", mfOKHead + "hooks:\n  On_Install: {run: [x]}\n", 4, "hooks.On_Install", "invalid hook name"},
		{"hook name digit", mfOKHead + "hooks:\n  1h: {run: [x]}\n", 4, "hooks.1h", "invalid hook name"},
		{"duplicated hook", mfOKHead + "hooks:\n  h: {run: [x]}\n  h: {run: [y]}\n", 5, "hooks.h", "duplicated key (first at line 4)"},
		{"duplicated top key", mfOKHead + "id: y\nhooks: {h: {run: [x]}}\n", 3, "id", "duplicated key"},
		{"bad secret", mfOKHead + "secrets: [ok, Bad-Name]\nhooks: {h: {run: [x]}}\n", 3, "secrets[1]", "invalid secret name"},
		{"duplicated secret", mfOKHead + "secrets:\n  - a\n  - a\nhooks: {h: {run: [x]}}\n", 5, "secrets[1]", "duplicated secret name"},
		{"bad config", mfOKHead + "config: [public-ip]\nhooks: {h: {run: [x]}}\n", 3, "config[0]", "invalid config name"},
		{"config string", mfOKHead + "config: public_ip\nhooks: {h: {run: [x]}}\n", 3, "config", "expected a list"},
		{"unknown type", hook("    run: [x]\n    inputs: {target: str}\n"), 6, "hooks.h.inputs.target", "unknown type"},
		{"type rw on string", hook("    run: [x]\n    inputs:\n      target: string:rw\n"), 7, "hooks.h.inputs.target", "unknown type"},
		{"rw output", hook("    run: [x]\n    outputs:\n      dir: path:rw\n"), 7, "hooks.h.outputs.dir", "only meaningful for inputs"},
		{"type not string", hook("    run: [x]\n    outputs: {address: 1}\n"), 6, "hooks.h.outputs.address", "expected a type"},
		{"inputs list", hook("    run: [x]\n    inputs: [a]\n"), 6, "hooks.h.inputs", "expected a mapping"},
		{"bad input name", hook("    run: [x]\n    inputs: {Target: string}\n"), 6, "hooks.h.inputs.Target", "invalid input name"},
		{"duplicated input", hook("    run: [x]\n    inputs:\n      a: string\n      a: number\n"), 8, "hooks.h.inputs.a", "duplicated key (first at line 7)"},
		{"unknown capability", hook("    run: [x]\n    requires: [operator, root]\n"), 6, "hooks.h.requires[1]", "unknown capability \"root\" (known: hands, operator)"},
		{"duplicated capability", hook("    run: [x]\n    requires: [hands, hands]\n"), 6, "hooks.h.requires[1]", "duplicated capability"},
		{"missing id", "version: 1\nhooks: {h: {run: [x]}}\n", 1, "id", "missing"},
		{"missing version", "id: x\nhooks: {h: {run: [x]}}\n", 1, "version", "missing"},
		{"missing hooks", mfOKHead, 1, "hooks", "missing"},
		{"empty hooks", mfOKHead + "hooks: {}\n", 3, "hooks", "at least one hook"},
		{"null hooks", mfOKHead + "hooks:\n", 3, "hooks", "at least one hook"},
		{"hooks list", mfOKHead + "hooks: [a]\n", 3, "hooks", "expected a mapping"},
		{"empty file", "", 1, "id", "missing"},
		{"comment only", "# nothing\n", 1, "id", "missing"},
		{"top level list", "- a\n", 1, "", "expected a mapping"},
		{"top level scalar", "hello\n", 1, "", "expected a mapping"},
		{"anchor", mfOKHead + "hooks:\n  a: &h {run: [x]}\n  b: *h\n", 4, "hooks.a", "anchors"},
		{"alias only", mfOKHead + "hooks:\n  a: {run: [x]}\n  b: *h\n", 5, "hooks.b", "aliases"},
		{"merge key", mfOKHead + "hooks:\n  a:\n    <<: {run: [x]}\n", 5, "hooks.a", "merge keys"},
		{"tag", "id: !!str x\nversion: 1\nhooks: {h: {run: [x]}}\n", 1, "id", "tags"},
		{"multi document", mfOKHead + "hooks: {h: {run: [x]}}\n---\nid: y\n", 4, "", "more than one YAML document"},
		{"directive", "%YAML 1.2\n---\n" + mfOKHead + "hooks: {h: {run: [x]}}\n", 1, "", "directives"},
		{"syntax error", mfOKHead + "hooks: [a\n", 3, "", "invalid YAML"},
		{"bad indentation", mfOKHead + "hooks:\n  h:\n    run: [x]\n   timeout: 1m\n", 6, "", "invalid YAML"},
		{"version empty", "id: x\nversion: ''\nhooks: {h: {run: [x]}}\n", 2, "version", "must not be empty"},
		{"version bool", "id: x\nversion: true\nhooks: {h: {run: [x]}}\n", 2, "version", "expected a string"},
		{"description map", mfOKHead + "description: {a: b}\nhooks: {h: {run: [x]}}\n", 3, "description", "expected a string"},
		{"flow too deep", mfOKHead + "hooks: " + strings.Repeat("[", 40) + "\n", 3, "", "nested too deeply"},
		{"too many tokens", mfOKHead + "hooks: {h: {run: [x]}}\ndescription: " + strings.Repeat("a ", 20000) + "\n", 4, "", "too complex"},
		{"complex key", mfOKHead + "? [a]\n: b\nhooks: {h: {run: [x]}}\n", 0, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ParseManifest(mfTestFile, []byte(tc.src))
			if err == nil {
				t.Fatalf("accepted: %+v", m)
			}
			var me *ManifestError
			if !errors.As(err, &me) {
				t.Fatalf("error %T %v is not a *ManifestError", err, err)
			}
			msg := err.Error()
			if me.File != mfTestFile || !strings.HasPrefix(msg, mfTestFile+":") {
				t.Errorf("error %q does not name the file", msg)
			}
			if tc.line > 0 {
				at := mfTestFile + ":" + strconv.Itoa(tc.line)
				if me.Col > 0 { // YAML syntax errors say the column too
					at += ":" + strconv.Itoa(me.Col)
				}
				if me.Line != tc.line || !strings.HasPrefix(msg, at+": ") {
					t.Errorf("error %q: line %d, want %d", msg, me.Line, tc.line)
				}
			}
			if me.Key != tc.key {
				t.Errorf("error %q: key %q, want %q", msg, me.Key, tc.key)
			}
			if tc.key != "" && !strings.Contains(msg, ": "+tc.key+": ") {
				t.Errorf("error %q does not name key %q", msg, tc.key)
			}
			if !strings.Contains(me.Problem, tc.problem) {
				t.Errorf("error %q: problem should contain %q", msg, tc.problem)
			}
		})
	}
}

func TestParseManifestBlockNesting(t *testing.T) {
	src := strings.Repeat("- ", 200) + "x\n"
	_, err := ParseManifest(mfTestFile, []byte(src))
	var me *ManifestError
	if !errors.As(err, &me) || me.Line != 1 || !strings.HasPrefix(me.Key, "[0][0]") ||
		len(me.Key) > 130 || !strings.Contains(me.Problem, "nested too deeply") {
		t.Fatalf("err = %v", err)
	}
}

func TestParseManifestTooLarge(t *testing.T) {
	src := mfOKHead + "hooks: {h: {run: [x]}}\ndescription: " + strings.Repeat("a", MaxManifestSize) + "\n"
	_, err := ParseManifest(mfTestFile, []byte(src))
	var me *ManifestError
	if !errors.As(err, &me) || !strings.Contains(me.Problem, "too large") {
		t.Fatalf("err = %v", err)
	}
}

func TestLoadManifest(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "module.yaml"), []byte(designExample), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := LoadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.Dir != dir || m.File != filepath.Join(dir, "module.yaml") || m.ID != "hello" {
		t.Errorf("Dir=%q File=%q ID=%q", m.Dir, m.File, m.ID)
	}

	refuse := func(name, dir, want string) {
		t.Helper()
		_, err := LoadManifest(dir)
		var me *ManifestError
		if !errors.As(err, &me) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want a *ManifestError containing %q", name, err, want)
		}
	}
	refuse("relative", "some/dir", "not an absolute path")
	refuse("missing", t.TempDir(), "no module.yaml")

	big := t.TempDir()
	if err := os.WriteFile(filepath.Join(big, "module.yaml"), make([]byte, MaxManifestSize+1), 0o644); err != nil {
		t.Fatal(err)
	}
	refuse("too large", big, "too large")

	link := t.TempDir()
	if err := os.Symlink(filepath.Join(dir, "module.yaml"), filepath.Join(link, "module.yaml")); err != nil {
		t.Fatal(err)
	}
	refuse("symlink", link, "not a regular file")

	fifo := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(fifo, "module.yaml"), 0o644); err != nil {
		t.Skip("mkfifo:", err)
	}
	refuse("fifo", fifo, "not a regular file")

	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, "module.yaml"), []byte(mfOKHead+"hooks: {h: {run: [x]}}\nextra: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	refuse("bad content", bad, filepath.Join(bad, "module.yaml")+":4: extra: unknown key")
}

// FuzzParseManifest checks ParseManifest never panics and that whatever
// it accepts is a usable manifest.
func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(designExample))
	f.Add([]byte(mfOKHead + "hooks: {h: {run: [x]}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest(mfTestFile, data)
		if err != nil {
			var me *ManifestError
			if !errors.As(err, &me) {
				t.Fatalf("error %T is not a *ManifestError: %v", err, err)
			}
			if me.File != mfTestFile || me.Line < 0 {
				t.Fatalf("error does not name the file: %v", err)
			}
			if strings.Contains(me.Problem, "internal error") {
				t.Fatalf("recovered panic: %v", err)
			}
			return
		}
		if !ValidModuleID(m.ID) {
			t.Fatalf("accepted invalid id %q", m.ID)
		}
		if m.Version == "" {
			t.Fatalf("accepted empty version")
		}
		if len(m.Hooks) == 0 {
			t.Fatalf("accepted a manifest with no hooks")
		}
		for name, h := range m.Hooks {
			if h == nil || h.Name != name || !ValidHookName(name) {
				t.Fatalf("bad hook %q: %+v", name, h)
			}
			if len(h.Run) == 0 || h.Run[0] == "" || filepath.IsAbs(h.Run[0]) {
				t.Fatalf("hook %q: bad run %q", name, h.Run)
			}
			for _, k := range ResourceKeys {
				if v := h.Limits.Get(k); v != 0 && (v < minResources.Get(k) || v > maxResources.Get(k)) {
					t.Fatalf("hook %q: accepted %s %v outside [%v, %v]", name, k, v, minResources.Get(k), maxResources.Get(k))
				}
			}
			if h.KillGrace <= 0 || h.KillGrace > MaxKillGrace {
				t.Fatalf("hook %q: accepted kill_grace %s", name, h.KillGrace)
			}
			if c := filepath.Clean(h.Run[0]); c == ".." || strings.HasPrefix(c, "../") {
				t.Fatalf("hook %q: run escapes: %q", name, h.Run)
			}
			if h.Timeout <= 0 || h.IdleTimeout <= 0 {
				t.Fatalf("hook %q: non-positive limits", name)
			}
			for _, types := range []map[string]Type{h.Inputs, h.Outputs} {
				for _, ty := range types {
					if !ty.Valid() {
						t.Fatalf("hook %q: invalid type %v", name, ty)
					}
				}
			}
		}
		for _, s := range append(append([]string{}, m.Secrets...), m.Config...) {
			if !ValidSecretName(s) {
				t.Fatalf("accepted bad name %q", s)
			}
		}
	})
}

// A network list switches the hook to the egress proxy and keeps the
// destinations in their canonical spelling; true stays the host's network.
func TestParseManifestNetworkList(t *testing.T) {
	src := mfOKHead + "hooks:\n  fetch:\n    run: [x]\n    network:\n      - API.github.com:443\n      - '*.pythonhosted.org:443'\n      - pypi.org\n      - ip:203.0.113.7:443\n  none:\n    run: [x]\n    network: []\n  host:\n    run: [x]\n    network: true\n"
	m, err := ParseManifest("module.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	f := m.Hooks["fetch"]
	want := []string{"api.github.com:443", "*.pythonhosted.org:443", "pypi.org", "ip:203.0.113.7:443"}
	if !f.Egress || f.Network || !reflect.DeepEqual(f.Destinations, want) {
		t.Errorf("fetch: egress=%v network=%v destinations=%q", f.Egress, f.Network, f.Destinations)
	}
	if n := m.Hooks["none"]; !n.Egress || len(n.Destinations) != 0 {
		t.Errorf("an empty list is the proxy with nothing declared: %+v", n)
	}
	if h := m.Hooks["host"]; h.Egress || !h.Network {
		t.Errorf("network: true: %+v", h)
	}
}
