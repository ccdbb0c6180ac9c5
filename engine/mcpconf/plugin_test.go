package mcpconf

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const template = `{"$schema": "https://agent-plugins.org/schemas/1.0.0/mcp.schema.json", "mcpServers": {}}` + "\n"

// pluginRoot is an unpacked plugin root as the seed leaves it: 0700,
// with its template.
func pluginRoot(t *testing.T) (root, bin string) {
	t.Helper()
	dir := private(t)
	bin = fakeWarden(t, dir)
	root = filepath.Join(dir, "plugin")
	if err := os.Mkdir(root, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, PluginFile), []byte(template), 0o600); err != nil {
		t.Fatal(err)
	}
	return root, bin
}

func TestPreparePlugin(t *testing.T) {
	root, bin := pluginRoot(t)
	p, err := PreparePlugin(root, "warden", entry(bin))
	if err != nil {
		t.Fatal(err)
	}
	if got := read(t, p.Path); string(got) != template {
		t.Fatalf("the template changed before Apply: %s", got)
	}
	if err := p.Apply(); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Schema  string `json:"$schema"`
		Servers map[string]struct {
			Type, Command, Cwd string
			Args               []string
		} `json:"mcpServers"`
	}
	b := read(t, filepath.Join(root, PluginFile))
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	s := doc.Servers["warden"]
	if doc.Schema != PluginSchemas[0] || len(doc.Servers) != 1 || s.Type != "stdio" || s.Command != bin || s.Cwd != "${PLUGIN_ROOT}" ||
		strings.Join(s.Args, " ") != "mcp serve --data-dir /home/op/.local/state/warden" {
		t.Errorf("mcp.json:\n%s", b)
	}
	if fi, _ := os.Stat(filepath.Join(root, PluginFile)); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	if snap := snapshot(t, root); strings.Count(snap, "=") != 1 {
		t.Errorf("left beside it:\n%s", snap)
	}
}

// Every check of the seed refuses on its own, names itself, and leaves
// the root as it was.
func TestPreparePluginRefusals(t *testing.T) {
	for _, tc := range []struct {
		check string
		spoil func(t *testing.T, root, bin string) (dir string, e Entry)
	}{
		{"plugin root: absolute and canonical", func(t *testing.T, root, bin string) (string, Entry) {
			return root + "/../plugin", entry(bin)
		}},
		{"plugin root: absolute and canonical", func(t *testing.T, root, bin string) (string, Entry) {
			link := root + "-link"
			os.Symlink(root, link)
			return link, entry(bin)
		}},
		{"plugin root: 0700", func(t *testing.T, root, bin string) (string, Entry) {
			os.Chmod(root, 0o750)
			return root, entry(bin)
		}},
		{"template: present", func(t *testing.T, root, bin string) (string, Entry) {
			os.Remove(filepath.Join(root, PluginFile))
			return root, entry(bin)
		}},
		{"template: not a symlink", func(t *testing.T, root, bin string) (string, Entry) {
			real := filepath.Join(root, "real.json")
			os.Rename(filepath.Join(root, PluginFile), real)
			os.Symlink(real, filepath.Join(root, PluginFile))
			return root, entry(bin)
		}},
		{"template: regular file", func(t *testing.T, root, bin string) (string, Entry) {
			os.Remove(filepath.Join(root, PluginFile))
			os.Mkdir(filepath.Join(root, PluginFile), 0o700)
			return root, entry(bin)
		}},
		{"template: one link", func(t *testing.T, root, bin string) (string, Entry) {
			os.Link(filepath.Join(root, PluginFile), filepath.Join(root, "other.json"))
			return root, entry(bin)
		}},
		{"template: at most 16 KiB", func(t *testing.T, root, bin string) (string, Entry) {
			os.WriteFile(filepath.Join(root, PluginFile), []byte(`{"$schema": "`+PluginSchemas[0]+`", "mcpServers": {}, "x": "`+strings.Repeat("x", 17<<10)+`"}`), 0o600)
			return root, entry(bin)
		}},
		{"template: not group or world writable", func(t *testing.T, root, bin string) (string, Entry) {
			os.Chmod(filepath.Join(root, PluginFile), 0o620)
			return root, entry(bin)
		}},
		{"template: exactly {$schema, mcpServers: {}}", func(t *testing.T, root, bin string) (string, Entry) {
			os.WriteFile(filepath.Join(root, PluginFile), []byte(`{"$schema": "`+PluginSchemas[0]+`", "mcpServers": {"other": {"type": "stdio", "command": "x"}}}`), 0o600)
			return root, entry(bin)
		}},
		{"template: exactly {$schema, mcpServers: {}}", func(t *testing.T, root, bin string) (string, Entry) {
			os.WriteFile(filepath.Join(root, PluginFile), []byte(`{"$schema": "https://example.com/mcp.json", "mcpServers": {}}`), 0o600)
			return root, entry(bin)
		}},
		{"template: exactly {$schema, mcpServers: {}}", func(t *testing.T, root, bin string) (string, Entry) {
			os.WriteFile(filepath.Join(root, PluginFile), []byte(`{"$schema": "`+PluginSchemas[0]+`", "mcpServers": {}, "mcpServers": {}}`), 0o600)
			return root, entry(bin)
		}},
		{"template: exactly {$schema, mcpServers: {}}", func(t *testing.T, root, bin string) (string, Entry) {
			os.WriteFile(filepath.Join(root, PluginFile), []byte(template+template), 0o600)
			return root, entry(bin)
		}},
		{"plugin root: yours", func(t *testing.T, root, bin string) (string, Entry) {
			chownAway(t, root)
			return root, entry(bin)
		}},
		{"template: yours", func(t *testing.T, root, bin string) (string, Entry) {
			chownAway(t, filepath.Join(root, PluginFile))
			return root, entry(bin)
		}},
		{"warden binary: not writable by others", func(t *testing.T, root, bin string) (string, Entry) {
			os.Chmod(bin, 0o777)
			return root, entry(bin)
		}},
	} {
		t.Run(tc.check, func(t *testing.T) {
			root, bin := pluginRoot(t)
			dir, e := tc.spoil(t, root, bin)
			before := snapshot(t, root)
			p, err := PreparePlugin(dir, "warden", e)
			if err == nil {
				err = p.Apply()
			}
			var r *Refusal
			if !errors.As(err, &r) || r.Check != tc.check {
				t.Fatalf("got %v, want the %q refusal", err, tc.check)
			}
			if !strings.Contains(err.Error(), "fix: ") || !strings.Contains(err.Error(), "(nothing was changed)") {
				t.Errorf("the refusal does not say what to do: %v", err)
			}
			if after := snapshot(t, root); after != before {
				t.Errorf("the root changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// A template changed between the read and the rename is not replaced,
// and the temp file goes.
func TestPreparePluginRace(t *testing.T) {
	root, bin := pluginRoot(t)
	p, err := PreparePlugin(root, "warden", entry(bin))
	if err != nil {
		t.Fatal(err)
	}
	beforeRename = func(path string) {
		os.WriteFile(path, []byte(template+" "), 0o600)
	}
	defer func() { beforeRename = nil }()
	var r *Refusal
	if err := p.Apply(); !errors.As(err, &r) || r.Check != "unchanged since read" {
		t.Fatalf("got %v, want the unchanged-since-read refusal", err)
	}
	if got := read(t, filepath.Join(root, PluginFile)); string(got) != template+" " {
		t.Errorf("the other writer's template was replaced: %s", got)
	}
	if snap := snapshot(t, root); strings.Contains(snap, ".tmp=") {
		t.Errorf("the temp file stayed:\n%s", snap)
	}
}

// chownAway gives p to another uid (needs root: skipped otherwise, and
// CI runs as root).
func chownAway(t *testing.T, p string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("giving a file to another uid needs root")
	}
	if err := os.Lchown(p, 1000, 1000); err != nil {
		t.Fatal(err)
	}
}
