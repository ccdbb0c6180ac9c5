package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The house's arrows, held by the repo itself (docs/architecture.md):
//
//	cmd -> tui -> engine -> storage, tui -> themes
//
// cmd may import anything; tui imports engine, themes and itself; engine
// imports storage and itself; storage and themes import no other warden
// package; examples import engine. Test files count too: a test that
// reaches across the house couples the rooms as surely as code does.
var arrows = map[string][]string{
	"cmd":      {"cmd", "tui", "engine", "storage", "themes", "examples"},
	"tui":      {"tui", "engine", "themes"},
	"engine":   {"engine", "storage"},
	"storage":  {"storage"},
	"themes":   {"themes"},
	"examples": {"examples", "engine"},
}

// rooms are the top-level entries the house allows, besides dot-files.
var rooms = []string{"cmd", "tui", "engine", "storage", "themes", "examples", "docs", "testdata", "scripts",
	"go.mod", "go.sum", "README.md", "LICENSE", "Makefile", "CHANGELOG.md"}

func TestHouseArrows(t *testing.T) {
	root := moduleRoot(t)
	for _, n := range topLevel(t, root) {
		if !strings.HasPrefix(n, ".") && !contains(rooms, n) {
			t.Errorf("top-level %q is not a room of the house (%s)", n, strings.Join(rooms[:9], " "))
		}
	}
	cmd := exec.Command("go", "list", "-e", "-f", "{{.ImportPath}}|{{join .Imports \" \"}} {{join .TestImports \" \"}} {{join .XTestImports \" \"}}", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	mod := modulePath(t, root)
	bad := houseViolations(mod, string(out))
	for _, b := range bad {
		t.Error(b)
	}
}

// houseViolations lists each import of `go list` output (lines of
// "pkg|imports...") that is not an arrow of the house.
func houseViolations(mod, list string) []string {
	var bad []string
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		pkg, imps, _ := strings.Cut(line, "|")
		from := room(mod, pkg)
		for _, imp := range strings.Fields(imps) {
			to := room(mod, imp)
			if to == "" || to == from && from != "other" {
				continue
			}
			if !contains(arrows[from], to) {
				bad = append(bad, pkg+" imports "+imp+" ("+from+" -> "+to+" is not an arrow of the house)")
			}
		}
	}
	return bad
}

// room is the room of import path p, "" outside the module, "other" for
// a package of the module in no room.
func room(mod, p string) string {
	if p != mod && !strings.HasPrefix(p, mod+"/") {
		return ""
	}
	first, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(p, mod), "/"), "/")
	if _, ok := arrows[first]; ok {
		return first
	}
	return "other"
}

// A wrong import is caught: engine reaching up into tui, storage into
// engine, a package outside every room.
func TestHouseArrowsCatchAWrongImport(t *testing.T) {
	list := "m/engine/x|fmt m/tui m/storage\nm/storage|m/engine/perms\nm/tui/a|m/engine m/themes\nm/tools|m/engine\nm/cmd/w|m/tui m/storage\n"
	got := houseViolations("m", list)
	want := []string{
		"m/engine/x imports m/tui (engine -> tui is not an arrow of the house)",
		"m/storage imports m/engine/perms (storage -> engine is not an arrow of the house)",
		"m/tools imports m/engine (other -> engine is not an arrow of the house)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// topLevel lists the repo's top-level entries that are the project's: in
// a git checkout, what git tracks or would (not what .gitignore keeps
// out, such as the warden binary the README builds beside go.mod);
// elsewhere, every entry.
func topLevel(t *testing.T, root string) []string {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	if out, err := cmd.Output(); err == nil {
		seen := map[string]bool{}
		var names []string
		for _, p := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			first, _, _ := strings.Cut(p, "/")
			if first != "" && !seen[first] {
				seen[first] = true
				names = append(names, first)
			}
		}
		return names
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		t.Fatalf("go env GOMOD: %v", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

func modulePath(t *testing.T, root string) string {
	t.Helper()
	cmd := exec.Command("go", "list", "-m")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
