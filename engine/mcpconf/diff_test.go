package mcpconf

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The diff a dry run prints is one patch(1) applies: well-formed headers
// (b/PATH without a doubled slash) and hunk counts that match its lines,
// for a new file, an added entry, a changed one and a removed one.
func TestDiffAppliesWithPatch(t *testing.T) {
	if _, err := exec.LookPath("patch"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("patch is not installed")
		}
		t.Skip("patch is not installed")
	}
	long := "{\n" + strings.Repeat("  \"k\": 1,\n", 0) + "  \"a\": 1,\n  \"b\": 2,\n  \"c\": 3,\n  \"d\": 4,\n  \"e\": 5,\n  \"mcpServers\": {\n    \"other\": {\"command\": \"/bin/true\"}\n  },\n  \"z\": 6\n}\n"
	for _, c := range []struct {
		name          string
		before, after string
		exists        bool
	}{
		{"a new file", "", "{\n  \"mcpServers\": {}\n}\n", false},
		{"one line added in the middle", long, strings.Replace(long, "  \"c\": 3,\n", "  \"c\": 3,\n  \"new\": true,\n", 1), true},
		{"a line changed", long, strings.Replace(long, "\"d\": 4", "\"d\": 40", 1), true},
		{"lines removed at the end", long, strings.Replace(long, "  },\n  \"z\": 6\n}\n", "  }\n}\n", 1), true},
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, "cfg", "mcp.json")
		p := &Plan{Path: path, Before: []byte(c.before), After: []byte(c.after), Exists: c.exists, Changed: true}
		diff := p.Diff()
		if strings.Contains(diff, "b//") {
			t.Errorf("%s: doubled slash in the header:\n%s", c.name, diff)
		}
		// patch -p1 strips a/ and b/: the paths then sit under dir.
		target := filepath.Join(dir, strings.TrimPrefix(path, "/"))
		os.MkdirAll(filepath.Dir(target), 0o700)
		if c.exists {
			os.WriteFile(target, []byte(c.before), 0o600)
		}
		cmd := exec.Command("patch", "-p1", "--batch", "--forward")
		cmd.Dir, cmd.Stdin = dir, strings.NewReader(diff)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s: patch refused the diff: %v\n%s\n%s", c.name, err, out, diff)
			continue
		}
		if got, _ := os.ReadFile(target); string(got) != c.after {
			t.Errorf("%s: patched file:\n%s\nwant:\n%s\ndiff:\n%s", c.name, got, c.after, diff)
		}
	}
}
