package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A mistyped WARDEN_DATA_DIR (or --data-dir) whose parent does not exist
// is refused, not made into a new empty store with one "(new)" line on
// stderr as the only sign; --init makes it. A new dir inside an existing
// one is made without --init.
func TestDataDirTypoIsRefusedWithoutInit(t *testing.T) {
	c := newCLI(t)
	base := t.TempDir()
	typo := filepath.Join(base, "stat", "warden") // "state" mistyped
	for _, how := range []string{"flag", "env"} {
		for _, verb := range [][]string{{"module", "list"}, {"doctor"}} {
			var r result
			if how == "flag" {
				c.dir = typo
				r = c.run(verb...)
			} else {
				t.Setenv("WARDEN_DATA_DIR", typo)
				var out, errb strings.Builder
				a := &app{stdout: &out, stderr: &errb, stdin: strings.NewReader("")}
				r = result{a.run(verb), out.String(), errb.String()}
			}
			which := map[string]string{"flag": "--data-dir", "env": "WARDEN_DATA_DIR"}[how]
			if r.code != 1 || !strings.Contains(r.stderr, "data dir "+typo+" does not exist, nor does its parent "+filepath.Dir(typo)+": is "+which+" mistyped?") ||
				!strings.Contains(r.stderr, "--init") || strings.Contains(r.stderr, "(new)") {
				t.Errorf("%s %v on a typo: %s", how, verb, r)
			}
			if _, err := os.Stat(filepath.Dir(typo)); err == nil {
				t.Fatalf("%s %v made %s", how, verb, filepath.Dir(typo))
			}
		}
	}
	c.dir = typo
	if r := c.ok("--init", "module", "list"); !strings.Contains(r.stderr, "(new)") {
		t.Errorf("--init: %s", r)
	}
	if fi, err := os.Stat(typo); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("--init did not make the data dir 0700: %v %v", fi, err)
	}
	c.dir = filepath.Join(base, "fresh")
	c.ok("module", "list")
}
