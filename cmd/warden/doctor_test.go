package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// freshHome is a private HOME with no MCP client installed: the home of a
// new operator account.
func freshHome(t *testing.T) string {
	t.Helper()
	home := filepath.Join(privateDir(t, "warden-doctorhome-"), "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	t.Setenv("CODEX_HOME", "")
	return home
}

// doctorRows is doctor's rows that name check, one string each.
func doctorRows(out, check string) []string {
	var rows []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, check) {
			rows = append(rows, l)
		}
	}
	return rows
}

// TestDoctorNoMCPClientIsNoProblem: a client that is not installed is not
// a problem; doctor says once, quietly, that none is configured.
func TestDoctorNoMCPClientIsNoProblem(t *testing.T) {
	c := newCLI(t)
	freshHome(t)
	r := c.run("doctor")
	rows := doctorRows(r.stdout, "mcp client")
	if len(rows) != 1 || !strings.HasPrefix(rows[0], "ok ") || !strings.Contains(rows[0], "mcp clients") ||
		!strings.Contains(rows[0], "none configured (warden mcp install --client ") {
		t.Errorf("doctor on a fresh HOME, mcp rows %q, want one ok line \"mcp clients  none configured\":\n%s", rows, r.stdout)
	}
	if strings.Contains(r.stdout, "problem") {
		t.Errorf("doctor on a fresh HOME reports a problem:\n%s", r.stdout)
	}
}

// TestDoctorBrokenMCPConfigIsProblem: a config that exists but cannot be
// read (here malformed) is still a problem, and the quiet line is gone.
func TestDoctorBrokenMCPConfigIsProblem(t *testing.T) {
	c := newCLI(t)
	home := freshHome(t)
	if err := os.Mkdir(filepath.Join(home, ".cursor"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".cursor", "mcp.json"), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := c.run("doctor")
	rows := doctorRows(r.stdout, "mcp client")
	if len(rows) != 1 || !strings.HasPrefix(rows[0], "problem ") || !strings.Contains(rows[0], "mcp client cursor") {
		t.Errorf("doctor with a malformed cursor config, mcp rows %q, want one problem for cursor:\n%s", rows, r.stdout)
	}
}
