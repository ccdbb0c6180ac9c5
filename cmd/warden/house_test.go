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
// package; examples import engine. So engine and tui never import the
// doors (cmd/serve/...). Test files count too: a test that reaches across
// the house couples the rooms as surely as code does.
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
// "pkg|imports...") that is not an arrow of the house, once (a package's
// code and its tests may import the same thing).
func houseViolations(mod, list string) []string {
	var bad []string
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		pkg, imps, _ := strings.Cut(line, "|")
		from := room(mod, pkg)
		seen := map[string]bool{}
		for _, imp := range strings.Fields(imps) {
			if seen[imp] {
				continue
			}
			seen[imp] = true
			if why := partViolation(mod, pkg, imp); why != "" {
				bad = append(bad, pkg+" imports "+imp+" ("+why+")")
				continue
			}
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

// engineParts are the engine's insides that tui must not name: what the
// console shows of them is re-exported as the engine's view types
// (engine/tui_types.go, engine/hands_ui.go). Their test helpers
// (engine/hands/handstest) are no part of this: a test may drive a fake
// runtime.
var engineParts = []string{"engine/hands", "engine/hooks", "engine/fleet"}

// partViolation says why import imp of package pkg breaks one of the
// finer arrows, the ones between parts of a room ("" when none does):
//
//   - a package under engine/ never imports one it is part of (engine,
//     or an engine/ package above it): a part that needs the whole engine
//     is a door, and lives under cmd/serve taking an engine.Host;
//   - tui never imports engineParts;
//   - a door (cmd/serve/...) never imports another command (cmd/warden
//     imports the doors, not the other way round).
func partViolation(mod, pkg, imp string) string {
	if room(mod, pkg) == "" || room(mod, imp) == "" {
		return ""
	}
	from, to := inModule(mod, pkg), inModule(mod, imp)
	switch {
	case room(mod, pkg) == "engine" && strings.HasPrefix(from, to+"/"):
		return "a part of the engine imports the whole it is part of; a door that needs the engine goes under cmd/serve and takes an engine.Host"
	case room(mod, pkg) == "tui" && contains(engineParts, to):
		return "tui names the engine's insides; re-export what the console shows as the engine's view types"
	case strings.HasPrefix(from, "cmd/serve/") && room(mod, imp) == "cmd" && !strings.HasPrefix(to, "cmd/serve/"):
		return "a door imports a command; the command imports its doors"
	}
	return ""
}

// inModule is import path p relative to module mod ("" for mod itself).
func inModule(mod, p string) string {
	return strings.TrimPrefix(strings.TrimPrefix(p, mod), "/")
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
// engine, a package outside every room; an engine part importing the
// engine or a part above it, tui naming the engine's insides, engine or
// tui importing a door, a door importing the command that opens it.
// What may be imported is not: the engine's face and test helpers from
// tui, one door from another, the doors from cmd.
func TestHouseArrowsCatchAWrongImport(t *testing.T) {
	list := strings.Join([]string{
		"m/engine/x|fmt m/tui m/storage",
		"m/storage|m/engine/perms",
		"m/tui/a|m/engine m/themes",
		"m/tools|m/engine",
		"m/cmd/w|m/tui m/storage m/cmd/serve/control",
		"m/engine/control|m/engine m/engine/hands",
		"m/engine/fleet/fleettest|m/engine/fleet m/storage",
		"m/tui|m/engine/hands m/engine/hooks m/engine/fleet m/engine/hands/handstest m/engine/termsafe",
		"m/engine/mcp|m/cmd/serve/mcp",
		"m/tui/b|m/cmd/serve/ssh",
		"m/cmd/serve/ssh|m/tui m/engine m/cmd/serve/control m/cmd/warden",
	}, "\n")
	got := houseViolations("m", list)
	want := []string{
		"m/engine/x imports m/tui (engine -> tui is not an arrow of the house)",
		"m/storage imports m/engine/perms (storage -> engine is not an arrow of the house)",
		"m/tools imports m/engine (other -> engine is not an arrow of the house)",
		"m/engine/control imports m/engine (a part of the engine imports the whole it is part of; a door that needs the engine goes under cmd/serve and takes an engine.Host)",
		"m/engine/fleet/fleettest imports m/engine/fleet (a part of the engine imports the whole it is part of; a door that needs the engine goes under cmd/serve and takes an engine.Host)",
		"m/tui imports m/engine/hands (tui names the engine's insides; re-export what the console shows as the engine's view types)",
		"m/tui imports m/engine/hooks (tui names the engine's insides; re-export what the console shows as the engine's view types)",
		"m/tui imports m/engine/fleet (tui names the engine's insides; re-export what the console shows as the engine's view types)",
		"m/engine/mcp imports m/cmd/serve/mcp (engine -> cmd is not an arrow of the house)",
		"m/tui/b imports m/cmd/serve/ssh (tui -> cmd is not an arrow of the house)",
		"m/cmd/serve/ssh imports m/cmd/warden (a door imports a command; the command imports its doors)",
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
