package main

import (
	"strings"
	"testing"
)

// On a fresh data dir, the first verb's first line says the data dir is
// new and where it is; the next run on it does not. doctor, serve and mcp
// serve say it too: each may create the store, and none may do so silently.
func TestFreshDataDirSaysSoFirst(t *testing.T) {
	for _, verb := range [][]string{
		{"doctor"},
		{"mcp", "serve"}, // stdin at EOF: it ends at once
		{"perms", "list"},
		{"module", "list"},
		{"hook", "runs"},
		{"receipts", "list"},
		{"hands", "list"},
		{"secrets", "list", "hello"},
		{"trust", "status"},
	} {
		t.Run(strings.Join(verb, "_"), func(t *testing.T) {
			c := newCLI(t)
			first := "warden: data dir " + c.dir + " (new); another is chosen with --data-dir or WARDEN_DATA_DIR\n"
			r := c.run(verb...)
			if !strings.HasPrefix(r.stderr, first) {
				t.Errorf("the first run's first line is not %q:\n%s", first, r)
			}
			if r.code != 0 && verb[0] != "doctor" { // doctor may miss bubblewrap here
				t.Errorf("%s", r)
			}
			if r := c.run(verb...); strings.Contains(r.stderr, "(new)") {
				t.Errorf("the next run still says new:\n%s", r)
			}
		})
	}
}
