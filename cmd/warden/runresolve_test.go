package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestNPMDependenciesStayInTheirTree: a dependency is bound at its real
// path, a pnpm-style link inside node_modules included; one whose link
// leads out of the node_modules tree (to a dir of the operator's) is not
// bound at all.
func TestNPMDependenciesStayInTheirTree(t *testing.T) {
	root := t.TempDir()
	nm := filepath.Join(root, "node_modules")
	outside := filepath.Join(root, "secret")
	for _, d := range []string{filepath.Join(nm, "pkg"), filepath.Join(nm, ".pnpm", "inner"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(nm, "pkg", "package.json"), []byte(`{"name":"pkg","dependencies":{"inner":"1","escape":"1"}}`), 0o644)
	os.Symlink(filepath.Join(nm, ".pnpm", "inner"), filepath.Join(nm, "inner"))
	os.Symlink(outside, filepath.Join(nm, "escape"))
	deps := npmDependencies(filepath.Join(nm, "pkg"))
	real, _ := filepath.EvalSymlinks(filepath.Join(nm, ".pnpm", "inner"))
	if len(deps) != 1 || deps[0].dir != real {
		t.Errorf("dependencies %+v, want only %s (the link out of node_modules is not bound)", deps, real)
	}
}
