package mcpconf

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

// private makes a dir under the user cache dir (no group/world writable
// ancestors, unlike /tmp), removed at the end.
func private(t *testing.T) string {
	t.Helper()
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(cache, 0o700)
	dir, err := os.MkdirTemp(cache, "mcpconf-")
	if err != nil {
		t.Fatal(err)
	}
	dir, _ = filepath.EvalSymlinks(dir)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// fakeWarden is an admitted executable standing in for the warden binary.
func fakeWarden(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "bin", "warden")
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func entry(bin string) Entry {
	return Entry{Command: bin, Args: []string{"mcp", "serve", "--data-dir", "/home/op/.local/state/warden"}}
}

func install(t *testing.T, c Client, path string, e Entry) *Plan {
	t.Helper()
	p, err := PlanInstall(c, path, "warden", e)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Apply(); err != nil {
		t.Fatal(err)
	}
	return p
}

func read(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFreshConfigs(t *testing.T) {
	dir := private(t)
	bin := fakeWarden(t, dir)
	for _, name := range ClientNames() {
		c := Clients[name]
		path := filepath.Join(dir, name+"-config")
		install(t, c, path, entry(bin))
		got, err := Find(c, path, "warden")
		if err != nil || got == nil || got.Command != bin || strings.Join(got.Args, " ") != "mcp serve --data-dir /home/op/.local/state/warden" {
			t.Errorf("%s: entry read back %+v, %v", name, got, err)
		}
		fi, _ := os.Stat(path)
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v", name, fi.Mode())
		}
		if _, err := os.Stat(path + ".bak"); err == nil {
			t.Errorf("%s: a backup of a file that did not exist", name)
		}
		b := read(t, path)
		if c.TOML {
			var doc map[string]any
			if err := toml.Unmarshal(b, &doc); err != nil {
				t.Errorf("codex: %v\n%s", err, b)
			}
		} else {
			var doc struct {
				MCPServers map[string]map[string]any `json:"mcpServers"`
			}
			if err := json.Unmarshal(b, &doc); err != nil {
				t.Errorf("%s: %v\n%s", name, err, b)
			}
			typ, _ := doc.MCPServers["warden"]["type"].(string)
			if (name == "claude-code") != (typ == "stdio") {
				t.Errorf("%s: type %q", name, typ)
			}
		}
	}
}

const existingJSON = `{
    "numStartups": 34,
    "theme": "dark",
    "mcpServers": {
        "github": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-github"],
            "env": {"GITHUB_TOKEN": "ghp_keepme"}
        }
    },
    "projects": {"/srv/x": {"mcpServers": {}}}
}
`

// TestExistingJSONKeptByteForByte: the other servers and keys keep their
// exact bytes; uninstall gives back the original file exactly.
func TestExistingJSONKeptByteForByte(t *testing.T) {
	dir := private(t)
	bin := fakeWarden(t, dir)
	path := filepath.Join(dir, "mcp.json")
	os.WriteFile(path, []byte(existingJSON), 0o600)
	c := Clients["cursor"]
	p := install(t, c, path, entry(bin))
	after := read(t, path)
	// Everything up to the github server's end is as it was, and so is
	// everything from the closing of mcpServers on.
	gh := strings.Index(existingJSON, "}\n    },") + 1
	if !bytes.HasPrefix(after, []byte(existingJSON[:gh])) || !bytes.HasSuffix(after, []byte(existingJSON[gh:])) {
		t.Errorf("bytes outside the new entry changed:\n%s", after)
	}
	if !strings.Contains(string(after), "\n        \"warden\": {\n            \"args\": [") {
		t.Errorf("the entry does not follow the file's indent:\n%s", after)
	}
	if bak := read(t, path+".bak"); string(bak) != existingJSON {
		t.Errorf("backup is not the original")
	}
	if !strings.Contains(p.Diff(), "+        \"warden\": {") {
		t.Errorf("diff:\n%s", p.Diff())
	}
	// Updating changes only the entry's value.
	e2 := entry(bin)
	e2.Args = append(e2.Args, "--request-ttl", "10m")
	install(t, c, path, e2)
	if got, _ := Find(c, path, "warden"); got == nil || got.Args[len(got.Args)-1] != "10m" {
		t.Errorf("update: %+v", got)
	}
	// Uninstall restores the original bytes.
	up, err := PlanUninstall(c, path, "warden")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := up.Apply(); err != nil {
		t.Fatal(err)
	}
	if b := read(t, path); string(b) != existingJSON {
		t.Errorf("after uninstall:\n%s\nwant:\n%s", b, existingJSON)
	}
	// Uninstalling again changes nothing.
	up, err = PlanUninstall(c, path, "warden")
	if err != nil || up.Changed {
		t.Errorf("second uninstall: %v changed=%v", err, up.Changed)
	}
}

const existingTOML = `# Codex config
model = "o4-mini"

[mcp_servers.docs]
command = "npx"
args = ["-y", "docs-mcp"] # keep this comment

[profiles.fast]
model = "gpt-5"
`

func TestCodexTOML(t *testing.T) {
	dir := private(t)
	bin := fakeWarden(t, dir)
	path := filepath.Join(dir, "config.toml")
	os.WriteFile(path, []byte(existingTOML), 0o600)
	c := Clients["codex"]
	install(t, c, path, entry(bin))
	after := read(t, path)
	if !bytes.HasPrefix(after, []byte(existingTOML)) {
		t.Errorf("the rest of the file changed:\n%s", after)
	}
	if !strings.Contains(string(after), "[mcp_servers.warden]\ncommand = '"+bin+"'") {
		t.Errorf("entry:\n%s", after)
	}
	// An existing table (with a subtable) is replaced in place.
	withOld := strings.Replace(existingTOML, "[profiles.fast]", "[mcp_servers.warden]\ncommand = \"/old/warden\"\n\n[mcp_servers.warden.env]\nX = \"1\"\n\n[profiles.fast]", 1)
	os.WriteFile(path, []byte(withOld), 0o600)
	p := install(t, c, path, entry(bin))
	if p.Old == nil || p.Old.Command != "/old/warden" {
		t.Errorf("old entry: %+v", p.Old)
	}
	after = read(t, path)
	if strings.Contains(string(after), "/old/warden") || strings.Contains(string(after), "warden.env") ||
		!strings.HasSuffix(string(after), "[profiles.fast]\nmodel = \"gpt-5\"\n") || !strings.HasPrefix(string(after), existingTOML[:strings.Index(existingTOML, "[profiles")]) {
		t.Errorf("replace in place:\n%s", after)
	}
	// Round trip from the original: uninstall gives it back exactly.
	os.WriteFile(path, []byte(existingTOML), 0o600)
	install(t, c, path, entry(bin))
	up, err := PlanUninstall(c, path, "warden")
	if err != nil {
		t.Fatal(err)
	}
	up.Apply()
	if b := read(t, path); string(b) != existingTOML {
		t.Errorf("after uninstall:\n%q\nwant\n%q", b, existingTOML)
	}
	// Dotted keys are not edited.
	os.WriteFile(path, []byte("mcp_servers.warden.command = \"x\"\n"+existingTOML), 0o600)
	if _, err := PlanInstall(c, path, "warden", entry(bin)); err == nil || !strings.Contains(err.Error(), "dotted keys") {
		t.Errorf("dotted keys: %v", err)
	}
}

// TestRefusals: each unsafe target is refused naming the check and a fix,
// and nothing changes (the file's bytes, no .bak, no temp file).
func TestRefusals(t *testing.T) {
	dir := private(t)
	bin := fakeWarden(t, dir)
	c := Clients["claude-desktop"]
	good := []byte(`{"mcpServers": {}}`)
	cases := []struct {
		name, check string
		setup       func(t *testing.T, d string) string
		codex       bool
	}{
		{"symlink", "not a symlink", func(t *testing.T, d string) string {
			real := filepath.Join(d, "real.json")
			os.WriteFile(real, good, 0o600)
			os.Symlink(real, filepath.Join(d, "c.json"))
			return filepath.Join(d, "c.json")
		}, false},
		{"hard link", "one link", func(t *testing.T, d string) string {
			p := filepath.Join(d, "c.json")
			os.WriteFile(p, good, 0o600)
			os.Link(p, filepath.Join(d, "other.json"))
			return p
		}, false},
		{"0666", "not group/world writable", func(t *testing.T, d string) string {
			p := filepath.Join(d, "c.json")
			os.WriteFile(p, good, 0o600)
			os.Chmod(p, 0o666)
			return p
		}, false},
		{"world-writable dir", "ancestors", func(t *testing.T, d string) string {
			os.Chmod(d, 0o777)
			p := filepath.Join(d, "c.json")
			os.WriteFile(p, good, 0o600)
			return p
		}, false},
		{"malformed JSON", "strict parse", func(t *testing.T, d string) string {
			p := filepath.Join(d, "c.json")
			os.WriteFile(p, []byte(`{"mcpServers": {"a": 1,}}`), 0o600)
			return p
		}, false},
		{"duplicate key", "strict parse", func(t *testing.T, d string) string {
			p := filepath.Join(d, "c.json")
			os.WriteFile(p, []byte(`{"mcpServers": {}, "mcpServers": {}}`), 0o600)
			return p
		}, false},
		{"malformed TOML", "strict parse", func(t *testing.T, d string) string {
			p := filepath.Join(d, "config.toml")
			os.WriteFile(p, []byte("[mcp_servers.docs\ncommand = 1\n"), 0o600)
			return p
		}, true},
		{"too big", "at most 1 MiB", func(t *testing.T, d string) string {
			p := filepath.Join(d, "c.json")
			os.WriteFile(p, append([]byte(`{"x": "`), append(bytes.Repeat([]byte("a"), MaxConfigSize), `"}`...)...), 0o600)
			return p
		}, false},
		{"relative", "absolute and canonical", func(t *testing.T, d string) string { return "c.json" }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			os.Mkdir(d, 0o700)
			path := tc.setup(t, d)
			cl := c
			if tc.codex {
				cl = Clients["codex"]
			}
			before := snapshot(t, d)
			_, err := PlanInstall(cl, path, "warden", entry(bin))
			var r *Refusal
			if !errors.As(err, &r) || r.Check != tc.check || r.Fix == "" {
				t.Fatalf("want a refusal by the %q check, got %v", tc.check, err)
			}
			if !strings.Contains(err.Error(), "fix: ") || !strings.Contains(err.Error(), "nothing was changed") {
				t.Errorf("message %q", err)
			}
			if after := snapshot(t, d); after != before {
				t.Errorf("the dir changed:\n%s\n->\n%s", before, after)
			}
		})
	}
}

// snapshot is a dir's names, sizes and contents.
func snapshot(t *testing.T, d string) string {
	var b strings.Builder
	entries, _ := os.ReadDir(d)
	for _, e := range entries {
		data, _ := os.ReadFile(filepath.Join(d, e.Name()))
		b.WriteString(e.Name() + "=" + string(data) + "\n")
	}
	return b.String()
}

// TestChangedBetweenReadAndRename: a writer that changes the file after
// warden read it makes the write refuse, and its change stands.
func TestChangedBetweenReadAndRename(t *testing.T) {
	dir := private(t)
	bin := fakeWarden(t, dir)
	path := filepath.Join(dir, "mcp.json")
	os.WriteFile(path, []byte(existingJSON), 0o600)
	p, err := PlanInstall(Clients["cursor"], path, "warden", entry(bin))
	if err != nil {
		t.Fatal(err)
	}
	theirs := strings.Replace(existingJSON, `"dark"`, `"light"`, 1)
	beforeRename = func(string) { os.WriteFile(path, []byte(theirs), 0o600) }
	defer func() { beforeRename = nil }()
	_, err = p.Apply()
	var r *Refusal
	if !errors.As(err, &r) || r.Check != "unchanged since read" {
		t.Fatalf("want an unchanged-since-read refusal, got %v", err)
	}
	if b := read(t, path); string(b) != theirs {
		t.Errorf("the other writer's change was lost:\n%s", b)
	}
	if snap := snapshot(t, dir); strings.Contains(snap, ".tmp=") || strings.Contains(snap, ".bak=") {
		t.Errorf("left behind:\n%s", snap)
	}
}

func TestAdmitExecutable(t *testing.T) {
	dir := private(t)
	bin := fakeWarden(t, dir)
	if err := AdmitExecutable(bin); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	os.Symlink(bin, link)
	loose := filepath.Join(dir, "bin", "loose")
	os.WriteFile(loose, []byte("x"), 0o755)
	os.Chmod(loose, 0o777)
	for path, check := range map[string]string{
		"warden":  "warden binary: absolute and canonical",
		link:      "warden binary: canonical",
		loose:     "warden binary: not writable by others",
		"/nope/x": "warden binary",
	} {
		var r *Refusal
		if err := AdmitExecutable(path); !errors.As(err, &r) || r.Check != check {
			t.Errorf("%s: want %q, got %v", path, check, err)
		}
	}
	os.Chmod(filepath.Dir(bin), 0o777)
	defer os.Chmod(filepath.Dir(bin), 0o755)
	var r *Refusal
	if err := AdmitExecutable(bin); !errors.As(err, &r) || r.Check != "warden binary: ancestors" {
		t.Errorf("world-writable dir: %v", err)
	}
	// The refusal names what failed, the binary, and its fix; never the
	// config, which was not what failed.
	if err := AdmitExecutable(bin); err == nil || strings.Contains(err.Error(), "config") ||
		!strings.HasPrefix(err.Error(), "refusing "+bin+": warden binary: ancestors check: ") || !strings.Contains(err.Error(), "fix: chmod go-w "+filepath.Dir(bin)+" (or keep the warden binary elsewhere)") {
		t.Errorf("the refusal does not name the binary first: %v", err)
	}
	// Under /tmp (sticky, world-writable): move the binary.
	tmpBin := filepath.Join(os.TempDir(), "warden-admit-"+filepath.Base(t.TempDir()))
	if err := os.WriteFile(tmpBin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(tmpBin)
	if err := AdmitExecutable(tmpBin); err == nil || strings.Contains(err.Error(), "config") || !strings.Contains(err.Error(), "keep the warden binary in a private directory") {
		t.Errorf("a binary under /tmp: %v", err)
	}
}
