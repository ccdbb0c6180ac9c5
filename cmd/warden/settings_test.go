package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wardenhq/warden/engine/hooks"
)

func TestSettingsPath(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", "/cfg")
	if p, _ := settingsPath(); p != "/cfg/warden/config.yaml" {
		t.Errorf("with XDG_CONFIG_HOME: %s", p)
	}
	t.Setenv("XDG_CONFIG_HOME", "relative/cfg") // ignored, as XDG says
	t.Setenv("HOME", "/home/op")
	if p, _ := settingsPath(); p != "/home/op/.config/warden/config.yaml" {
		t.Errorf("without XDG_CONFIG_HOME: %s", p)
	}
}

// The config file is decoded strictly; every error names file, line and key.
func TestParseSettings(t *testing.T) {
	const f = "/cfg/warden/config.yaml"
	for _, tc := range []struct{ in, theme, err string }{
		{in: "", theme: ""},
		{in: "# nothing here\n", theme: ""},
		{in: "theme: light\n", theme: "light"},
		{in: "# mine\ntheme: contrast # high\n", theme: "contrast"},
		{in: "theme: dark\ncolour: red\n", err: f + ":2: colour: unknown key (the config file knows: theme, bwrap, jail, limits, fleet)"},
		{in: "\n\nThemes: dark\n", err: f + ":3: Themes: unknown key"},
		{in: "theme: neon\n", err: f + ":1: theme: unknown theme \"neon\" (want contrast, dark, light, none)"},
		{in: "theme: 3\n", err: f + ":1: theme: want a theme name"},
		{in: "theme: [dark]\n", err: f + ":1: theme: want a theme name"},
		{in: "theme: dark\ntheme: light\n", err: f + ":2: theme: duplicated key (first at line 1)"},
		{in: "- dark\n", err: f + ":1: expected a mapping"},
		{in: "theme: dark\n---\ntheme: light\n", err: "more than one YAML document"},
		{in: "theme: [dark\n", err: f + ":1:8: invalid YAML"},
	} {
		s, err := parseSettings(f, []byte(tc.in))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.in, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: want error %q, got %v", tc.in, tc.err, err)
		case tc.err == "" && s.Theme != tc.theme:
			t.Errorf("%q: theme %q, want %q", tc.in, s.Theme, tc.theme)
		}
		var se *settingsError
		if err != nil && !errors.As(err, &se) {
			t.Errorf("%q: error %T is not a *settingsError", tc.in, err)
		}
	}
}

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", dir)
	p := filepath.Join(dir, "warden", "config.yaml")
	os.MkdirAll(filepath.Dir(p), 0o700)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// --theme overrides the file; the file overrides the default; NO_COLOR
// overrides both.
func TestConsoleThemeResolution(t *testing.T) {
	t.Setenv("NO_COLOR", "")
	t.Setenv("XDG_CONFIG_HOME", t.TempDir()) // no file
	if th, err := consoleTheme(""); err != nil || th.Name != "dark" {
		t.Errorf("no file, no flag: %s %v", th.Name, err)
	}
	writeConfig(t, "theme: light\n")
	if th, err := consoleTheme(""); err != nil || th.Name != "light" {
		t.Errorf("file light: %s %v", th.Name, err)
	}
	if th, err := consoleTheme("contrast"); err != nil || th.Name != "contrast" {
		t.Errorf("file light, flag contrast: %s %v", th.Name, err)
	}
	if _, err := consoleTheme("neon"); !isUsage(err) {
		t.Errorf("flag neon: want a usage error, got %v", err)
	}
	t.Setenv("NO_COLOR", "1")
	if th, err := consoleTheme("contrast"); err != nil || th.Name != "none" {
		t.Errorf("NO_COLOR with a flag: %s %v", th.Name, err)
	}
	if th, err := consoleTheme(""); err != nil || th.Name != "none" {
		t.Errorf("NO_COLOR with a file: %s %v", th.Name, err)
	}
	// The theme really differs: light's accent is not dark's.
	t.Setenv("NO_COLOR", "")
	l, _ := consoleTheme("light")
	d, _ := consoleTheme("dark")
	if l.Title.GetForeground() == d.Title.GetForeground() {
		t.Error("light and dark share the title colour")
	}
}

// The CLI reads the config before it needs a terminal: a broken file is
// reported with file, line and key (exit 1), and nothing is opened.
func TestConsoleConfigFile(t *testing.T) {
	c := newCLI(t)
	p := writeConfig(t, "theme: dark\ncolor: blue\n")
	r := c.run()
	if r.code != 1 || !strings.Contains(r.stderr, p+":2: color: unknown key") {
		t.Errorf("unknown key: %s", r)
	}
	// A broken file is reported even when --theme is given.
	if r := c.run("--theme", "light"); r.code != 1 || !strings.Contains(r.stderr, p+":2: color") {
		t.Errorf("unknown key with --theme: %s", r)
	}
	writeConfig(t, "theme: light\n")
	if r := c.run(); r.code != 2 || !strings.Contains(r.stderr, "needs a terminal") {
		t.Errorf("good file: %s", r)
	}
	if r := c.run("--theme", "neon"); r.code != 2 || !strings.Contains(r.stderr, "unknown theme \"neon\"") {
		t.Errorf("good file, bad flag: %s", r)
	}
	if _, err := os.Stat(c.dir); err == nil {
		t.Error("the data dir was created")
	}
}

func TestSettingsBwrap(t *testing.T) {
	s, err := parseSettings("/c.yaml", []byte("bwrap: /opt/bwrap/bin/bwrap\n"))
	if err != nil || s.Bwrap != "/opt/bwrap/bin/bwrap" {
		t.Fatalf("%+v %v", s, err)
	}
	for _, bad := range []string{"bwrap: bwrap\n", "bwrap: /usr/../usr/bin/bwrap\n", "bwrap: [x]\n"} {
		if _, err := parseSettings("/c.yaml", []byte(bad)); err == nil || !strings.Contains(err.Error(), "/c.yaml:1: bwrap:") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// A bwrap set in the config file is the one runs and doctor admit.
func TestConfigBwrapReachesDoctorAndRuns(t *testing.T) {
	c := newCLI(t)
	dir := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "warden")
	os.MkdirAll(dir, 0o700)
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte("bwrap: /nonexistent/bwrap\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// doctor points at the config line, not at installing a package.
	r := c.run("doctor")
	if r.code != 1 || !strings.Contains(r.stdout, "/nonexistent/bwrap") ||
		!strings.Contains(r.stdout, filepath.Join(dir, "config.yaml")+" line 1") || strings.Contains(r.stdout, "apt-get install bubblewrap") {
		t.Errorf("doctor with a configured bwrap: %s", r)
	}
	c.ok("module", "add", example(t, "hello"))
	if r := c.run("hook", "run", "hello", "greet", "--input", "target=x"); r.code != 1 || !strings.Contains(r.stderr, "/nonexistent/bwrap") || !strings.Contains(r.stderr, "apt-get install bubblewrap") {
		t.Errorf("run with a configured bwrap: %s", r)
	}
}

// The ceiling of hooks' limits is spelt as in module.yaml, checked as
// strictly, and partial: what it does not name keeps the default.
func TestSettingsLimits(t *testing.T) {
	s, err := parseSettings("/c.yaml", []byte("theme: dark\nlimits:\n  memory: 4GiB\n  pids: 2048\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := hooks.DefaultCeiling
	want.Memory, want.Pids = 4<<30, 2048
	if got := s.Limits.Or(hooks.DefaultCeiling); got != want {
		t.Errorf("ceiling = %+v, want %+v", got, want)
	}
	for in, msg := range map[string]string{
		"limits:\n  memory: 4GB\n":            "/c.yaml:2: limits.memory: invalid size",
		"limits:\n  disk: 4GiB\n":             "/c.yaml:2: limits.disk: unknown key (known: memory, pids, cpu, tmp, run_dir)",
		"limits:\n  pids: 1\n":                "/c.yaml:2: limits.pids: 1 is below the least a jail can run with (16)",
		"limits: 4GiB\n":                      "/c.yaml:1: limits: want a mapping of ceilings",
		"limits:\n  pids: 30\n  pids: 40\n":   "/c.yaml:3: limits.pids: duplicated key (first at line 2)",
		"theme: dark\nlimits:\n  cpu: many\n": "/c.yaml:3: limits.cpu: expected a number of CPUs",
	} {
		if _, err := parseSettings("/c.yaml", []byte(in)); err == nil || !strings.HasPrefix(err.Error(), msg) {
			t.Errorf("%q: %v\nwant %s...", in, err, msg)
		}
	}
}

// A module asking for more than the operator's ceiling is refused at
// `module add`, pointing at the manifest's line; within it, it is added.
func TestModuleAddAboveCeiling(t *testing.T) {
	c := newCLI(t)
	dir := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "warden")
	os.MkdirAll(dir, 0o700)
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte("limits:\n  memory: 1GiB\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mod := filepath.Join(privateDir(t, "warden-ceiling-"), "big")
	os.Mkdir(mod, 0o755)
	manifest := "id: big\nversion: 1.0.0\nhooks:\n  h:\n    run: [./h.sh]\n    limits:\n      pids: 300\n      memory: 1536MiB\n"
	if err := os.WriteFile(filepath.Join(mod, "module.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mod, "h.sh"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := c.run("module", "add", mod)
	want := filepath.Join(mod, "module.yaml") + ":8: hooks.h.limits.memory: 1536MiB is above the operator's ceiling of 1GiB (config.yaml limits.memory)"
	if r.code != 1 || !strings.Contains(r.stderr, want) {
		t.Fatalf("module add above the ceiling: %s\nwant %s", r, want)
	}
	if l := c.ok("module", "list"); strings.Contains(l.stdout, "big") {
		t.Errorf("a refused module was registered: %s", l.stdout)
	}
	os.WriteFile(filepath.Join(dir, "config.yaml"), []byte("limits:\n  memory: 2GiB\n"), 0o600)
	c.ok("module", "add", mod)
}
