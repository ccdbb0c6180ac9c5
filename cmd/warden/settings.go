package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/engine/hooks"
	"github.com/wardenhq/warden/themes"
)

// settings is the console's config file, config.yaml under
// $XDG_CONFIG_HOME/warden (else ~/.config/warden):
//
//	theme: dark              # or light, contrast
//	bwrap: /usr/bin/bwrap    # the bubblewrap binary (absolute; never PATH)
//	limits:                  # the ceiling of module.yaml limits (these are the defaults)
//	  memory: 2GiB
//	  pids: 1024
//	  cpu: 2.0
//	  tmp: 512MiB
//	  run_dir: 64MiB
//	fleet: {url: tls://nats.example:4222, creds: /etc/warden/fleet.creds, host: web1, domain: hub}
//
// It is decoded strictly: an unknown key, a duplicated key or a value of
// the wrong kind is an error naming the file, line and key.
type settings struct {
	// File is where the settings came from ("" when there is no file).
	File  string
	Theme string
	// ThemeLine is the line of theme: in File.
	ThemeLine int
	// Bwrap is the bubblewrap binary hooks are jailed with ("" for the
	// default /usr/bin/bwrap). It is admitted like the default.
	Bwrap string
	// BwrapLine is the line of bwrap: in File.
	BwrapLine int
	// Jail is the jail mode of runs that ask for none: auto (the
	// default, "" here), bwrap or landlock.
	Jail string
	// Limits is the operator's ceiling of hooks' resource limits (zero
	// fields: hooks.DefaultCeiling's).
	Limits hooks.Resources
	// Fleet is the fleet serve joins and doctor checks
	// (fleet: {url: ..., creds: ..., host: ...}; flags override).
	Fleet fleetJoin
}

// maxSettingsSize bounds config.yaml.
const maxSettingsSize = 64 << 10

// settingsError is a problem in the config file, at a line and key.
type settingsError struct {
	File    string
	Line    int
	Col     int // 0 when unknown
	Key     string
	Problem string
}

func (e *settingsError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteString(":" + strconv.Itoa(e.Line))
		if e.Col > 0 {
			b.WriteString(":" + strconv.Itoa(e.Col))
		}
	}
	b.WriteString(": ")
	if e.Key != "" {
		b.WriteString(e.Key + ": ")
	}
	b.WriteString(e.Problem)
	return b.String()
}

// settingsPath is $XDG_CONFIG_HOME/warden/config.yaml, else
// ~/.config/warden/config.yaml (a relative XDG_CONFIG_HOME is ignored, as
// the XDG spec says).
func settingsPath() (string, error) {
	if d := os.Getenv("XDG_CONFIG_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "warden", "config.yaml"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no config dir: set XDG_CONFIG_HOME or HOME (%v)", err)
	}
	return filepath.Join(home, ".config", "warden", "config.yaml"), nil
}

// loadSettings reads the config file; a missing one is no settings.
func loadSettings() (settings, error) {
	path, err := settingsPath()
	if err != nil {
		return settings{}, err
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return settings{}, nil
	}
	if err != nil {
		return settings{}, fmt.Errorf("config file: %w", err)
	}
	return parseSettings(path, data)
}

// parseSettings decodes a config file strictly.
func parseSettings(file string, data []byte) (s settings, err error) {
	s.File = file
	bad := func(line int, key, format string, args ...any) error {
		return &settingsError{File: file, Line: line, Key: key, Problem: fmt.Sprintf(format, args...)}
	}
	defer func() {
		if r := recover(); r != nil {
			err = bad(0, "", "cannot parse (internal error: %v)", r)
		}
	}()
	if len(data) > maxSettingsSize {
		return s, bad(0, "", "too large (%d bytes; the limit is %d)", len(data), maxSettingsSize)
	}
	f, err := parser.ParseBytes(data, 0, parser.AllowDuplicateMapKey())
	if err != nil {
		line, col, msg := hooks.YAMLErrorAt(err)
		e := bad(line, "", "invalid YAML: %s", msg).(*settingsError)
		e.Col = col
		return s, e
	}
	var docs []*ast.DocumentNode
	for _, d := range f.Docs {
		if d != nil && d.Body != nil {
			docs = append(docs, d)
		}
	}
	switch {
	case len(docs) == 0:
		return s, nil // empty, or only comments
	case len(docs) > 1:
		return s, bad(line(docs[1].Body), "", "more than one YAML document; the config file holds one mapping")
	}
	var values []*ast.MappingValueNode
	switch v := docs[0].Body.(type) {
	case *ast.MappingNode:
		values = v.Values
	case *ast.MappingValueNode:
		values = []*ast.MappingValueNode{v}
	default:
		return s, bad(line(docs[0].Body), "", "expected a mapping such as `theme: dark`, got %s", docs[0].Body.Type())
	}
	seen := map[string]int{}
	for _, mv := range values {
		var kn ast.Node = mv.Key
		if k, ok := kn.(*ast.MappingKeyNode); ok {
			kn = k.Value
		}
		kl := line(kn)
		ks, ok := kn.(*ast.StringNode)
		if !ok {
			return s, bad(kl, "", "keys must be plain strings, got %s", kn.Type())
		}
		key := ks.Value
		if first, dup := seen[key]; dup {
			return s, bad(kl, key, "duplicated key (first at line %d)", first)
		}
		seen[key] = kl
		switch key {
		case "theme":
			v, ok := mv.Value.(*ast.StringNode)
			if !ok {
				return s, bad(kl, key, "want a theme name (%s), got %s", strings.Join(themes.Names(), ", "), mv.Value.Type())
			}
			if _, err := themes.ByName(v.Value); err != nil || v.Value == "" {
				return s, bad(kl, key, "unknown theme %q (want %s)", v.Value, strings.Join(themes.Names(), ", "))
			}
			s.Theme, s.ThemeLine = v.Value, kl
		case "bwrap":
			v, ok := mv.Value.(*ast.StringNode)
			if !ok || !filepath.IsAbs(v.Value) || filepath.Clean(v.Value) != v.Value {
				return s, bad(kl, key, "want an absolute, clean path to bwrap (it is never searched on PATH)")
			}
			s.Bwrap, s.BwrapLine = v.Value, kl
		case "jail":
			v, ok := mv.Value.(*ast.StringNode)
			if !ok || !engine.ValidJailMode(v.Value) {
				return s, bad(kl, key, "want auto (bwrap where it can run, else landlock), bwrap (never fall back) or landlock; `off` is only ever asked for per run (--jail=off)")
			}
			s.Jail = v.Value
		case "limits":
			if err := parseCeiling(&s, mv.Value, bad); err != nil {
				return s, err
			}
		case "fleet":
			if s.Fleet, err = parseFleetSettings(mv.Value, func(l int, k, format string, args ...any) error {
				if k != "" {
					k = "fleet." + k
				} else {
					k = "fleet"
				}
				return bad(l, k, format, args...)
			}); err != nil {
				return s, err
			}
		default:
			return s, bad(kl, key, "unknown key (the config file knows: theme, bwrap, jail, limits, fleet)")
		}
	}
	return s, nil
}

// parseCeiling decodes `limits:`, spelt as in module.yaml.
func parseCeiling(s *settings, n ast.Node, bad func(int, string, string, ...any) error) error {
	var values []*ast.MappingValueNode
	switch v := n.(type) {
	case *ast.MappingNode:
		values = v.Values
	case *ast.MappingValueNode:
		values = []*ast.MappingValueNode{v}
	default:
		return bad(line(n), "limits", "want a mapping of ceilings (%s), got %s", strings.Join(hooks.ResourceKeys, ", "), n.Type())
	}
	seen := map[string]int{}
	for _, mv := range values {
		var kn ast.Node = mv.Key
		if k, ok := kn.(*ast.MappingKeyNode); ok {
			kn = k.Value
		}
		kl := line(kn)
		ks, ok := kn.(*ast.StringNode)
		if !ok {
			return bad(kl, "limits", "keys must be plain strings, got %s", kn.Type())
		}
		key := "limits." + ks.Value
		if first, dup := seen[ks.Value]; dup {
			return bad(kl, key, "duplicated key (first at line %d)", first)
		}
		seen[ks.Value] = kl
		v, err := hooks.ParseResource(ks.Value, mv.Value)
		if err != nil {
			return bad(kl, key, "%v", err)
		}
		s.Limits = v.Or(s.Limits)
	}
	return nil
}

func line(n ast.Node) int {
	if n == nil {
		return 0
	}
	if tk := n.GetToken(); tk != nil && tk.Position != nil {
		return tk.Position.Line
	}
	return 0
}

// consoleTheme picks the console's theme: --theme, else the config file's,
// else dark. NO_COLOR wins over both (themes.ByName sees to it). A broken
// config file is an error even when --theme is given: it names the file,
// line and key to fix.
func consoleTheme(flag string) (themes.Theme, error) {
	set, err := loadSettings()
	if err != nil {
		return themes.Theme{}, err
	}
	if flag != "" {
		th, err := themes.ByName(flag)
		if err != nil {
			return th, usageError{err}
		}
		return th, nil
	}
	return themes.ByName(set.Theme) // checked while parsing
}
