package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// module add checks each hook's program, in the module's terms. It used
// to accept run: [./hooks/nope.sh], and the run failed later with
// `exec: "/module/hooks/nope.sh": stat …: no such file or directory`,
// exit 127; a program without its execute bit gave only "permission
// denied".
func TestModuleAddChecksHookPrograms(t *testing.T) {
	c := newCLI(t)
	mod := filepath.Join(example(t, "hello"), "..", "progs")
	mod, _ = filepath.Abs(mod)
	if err := os.MkdirAll(filepath.Join(mod, "hooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(run string) {
		t.Helper()
		y := "id: progs\nversion: 1.0.0\ndescription: Programs.\nhooks:\n  greet:\n    run: [" + run + "]\n"
		if err := os.WriteFile(filepath.Join(mod, "module.yaml"), []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(mod, "hooks", "x.sh"), []byte("#!/bin/sh\necho hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ run, want string }{
		{"./hooks/nope.sh", "module.yaml:6: hooks.greet.run[0]: hooks/nope.sh does not exist in the module dir " + mod},
		{"./hooks/x.sh", "module.yaml:6: hooks.greet.run[0]: hooks/x.sh is not executable: chmod +x hooks/x.sh"},
		{"./hooks", "hooks is a directory in the module dir"},
	} {
		write(tc.run)
		r := c.run("module", "add", mod)
		if r.code != 1 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("module add with run [%s]: want exit 1 and %q, got %s", tc.run, tc.want, r)
		}
		var out map[string]any
		c.json(1, &out, "module", "add", mod)
		if e, _ := out["error"].(string); !strings.Contains(e, tc.want) {
			t.Errorf("module add --json with run [%s]: %v", tc.run, out)
		}
	}
	if r := c.ok("module", "list"); strings.Contains(r.stdout, "progs") {
		t.Errorf("a refused module was registered: %s", r)
	}
	os.Chmod(filepath.Join(mod, "hooks", "x.sh"), 0o755)
	write("./hooks/x.sh")
	c.ok("module", "add", mod)
}
