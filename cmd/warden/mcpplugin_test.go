package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `mcp plugin prepare` fills a plugin root's template with this warden,
// says so in --json, and refuses a root that is not 0700 (exit 1, the
// check named, nothing changed).
func TestMCPPluginPrepare(t *testing.T) {
	c := newCLI(t)
	base := privateDir(t, "warden-plugin-")
	bin := filepath.Join(base, "bin", "warden")
	os.MkdirAll(filepath.Dir(bin), 0o755)
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(base, "plugin")
	os.Mkdir(root, 0o700)
	tmpl := `{"$schema": "https://agent-plugins.org/schemas/1.0.0/mcp.schema.json", "mcpServers": {}}`
	os.WriteFile(filepath.Join(root, "mcp.json"), []byte(tmpl), 0o600)

	var dry struct {
		DryRun  bool   `json:"dryRun"`
		Content string `json:"content"`
	}
	c.json(0, &dry, "mcp", "plugin", "prepare", root, "--warden", bin, "--dry-run")
	if !dry.DryRun || !strings.Contains(dry.Content, `"command": "`+bin+`"`) || !strings.Contains(dry.Content, `"cwd": "${PLUGIN_ROOT}"`) {
		t.Errorf("dry run: %+v", dry)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "mcp.json")); string(b) != tmpl {
		t.Errorf("the dry run wrote: %s", b)
	}
	r := c.ok("mcp", "plugin", "prepare", root, "--warden", bin)
	if b, _ := os.ReadFile(filepath.Join(root, "mcp.json")); string(b) != dry.Content || !strings.Contains(r.stdout, "prepared "+filepath.Join(root, "mcp.json")) {
		t.Errorf("prepare: %s\nwrote %s", r, b)
	}

	os.Chmod(root, 0o755)
	os.WriteFile(filepath.Join(root, "mcp.json"), []byte(tmpl), 0o600)
	r = c.run("mcp", "plugin", "prepare", root, "--warden", bin)
	if r.code != 1 || !strings.Contains(r.stderr, "plugin root: 0700 check: mode 0755; fix: chmod 700 "+root) {
		t.Errorf("a 0755 root: %s", r)
	}
	if r := c.run("mcp", "plugin", "prepare"); r.code != 2 {
		t.Errorf("no DIR: %s, want exit 2", r)
	}
}
