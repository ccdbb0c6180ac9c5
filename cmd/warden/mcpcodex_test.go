package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

// `warden mcp install --client codex` writes default_tools_approval_mode
// = "approve" in warden's server table, and says why: warden gates every
// call itself. Without it `codex exec` (approval_policy never) refused
// every warden tool call, and an interactive Codex asked its user before
// warden asked the operator. The JSON clients' entries get no such key.
func TestMCPInstallCodexApprovesTools(t *testing.T) {
	c := newCLI(t)
	base := privateDir(t, "warden-mcpcodex-")
	home := filepath.Join(base, "home")
	for _, d := range []string{".codex", ".cursor"} {
		if err := os.MkdirAll(filepath.Join(home, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(home, 0o700)
	t.Setenv("HOME", home)
	t.Setenv("CODEX_HOME", "")
	self, _ := os.Executable()
	bin := filepath.Join(base, "bin", "warden")
	os.MkdirAll(filepath.Dir(bin), 0o755)
	if out, err := exec.Command("cp", self, bin).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	path := filepath.Join(home, ".codex", "config.toml")
	// An entry written before: doctor says it lacks the line, install adds it.
	os.WriteFile(path, []byte("model = \"gpt-5\"\n\n[mcp_servers.warden]\ncommand = '"+bin+"'\nargs = ['mcp', 'serve', '--data-dir', '"+c.dir+"']\n"), 0o600)
	if r := c.run("doctor"); !strings.Contains(r.stdout, "lacks default_tools_approval_mode = \"approve\"") {
		t.Errorf("doctor on an old codex entry:\n%s", r.stdout)
	}
	r := c.ok("mcp", "install", "--client", "codex", "--warden", bin)
	if !strings.Contains(r.stdout, `its entry says default_tools_approval_mode = "approve": warden asks its operator`) || !strings.Contains(r.stdout, "codex exec") {
		t.Errorf("install does not say why:\n%s", r.stdout)
	}
	b, _ := os.ReadFile(path)
	var doc struct {
		Model      string                    `toml:"model"`
		MCPServers map[string]map[string]any `toml:"mcp_servers"`
	}
	if err := toml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("config.toml: %v\n%s", err, b)
	}
	if w := doc.MCPServers["warden"]; w["default_tools_approval_mode"] != "approve" || w["command"] != bin || doc.Model != "gpt-5" {
		t.Errorf("codex config:\n%s", b)
	}
	if r := c.ok("mcp", "install", "--client", "codex", "--warden", bin); !strings.Contains(r.stdout, "nothing to change") {
		t.Errorf("second install: %s", r)
	}
	if r := c.run("doctor"); strings.Contains(r.stdout, "lacks default_tools_approval_mode") {
		t.Errorf("doctor after install:\n%s", r.stdout)
	}
	c.ok("mcp", "install", "--client", "cursor", "--warden", bin)
	if b, _ := os.ReadFile(filepath.Join(home, ".cursor", "mcp.json")); strings.Contains(string(b), "approval") {
		t.Errorf("cursor's entry got an approval key:\n%s", b)
	}
}
