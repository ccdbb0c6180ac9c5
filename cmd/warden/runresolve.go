package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/wardenhq/warden/engine/jail"
)

// systemDirs are bound into every run already (docs/jail.md): a program
// or interpreter found there needs no bind of its own.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"}

// resolvedCommand is a command found on the operator's PATH, with what
// it needs to start bound read-only.
type resolvedCommand struct {
	Found string      `json:"found"` // where PATH found it
	Exe   string      `json:"exe"`   // symlinks resolved
	Binds []jail.Bind `json:"binds"`
}

// maxPackageBinds bounds the package dirs one command binds (its
// package and the dependencies found beside it).
const maxPackageBinds = 64

// resolveCommand finds name as a shell would (exec.LookPath on the
// operator's PATH), resolves its symlinks, and binds what it needs to
// start: for a program inside an npm package, that package and the
// dependencies installed beside it (an npm CLI's native binary comes in
// an optional dependency); for a script, its interpreter (and, for one
// outside the system dirs, the install prefix it lives in).
func resolveCommand(name string) (*resolvedCommand, error) {
	found, err := exec.LookPath(name)
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return nil, fmt.Errorf("command %q not found on your PATH (give a path, or install it)", name)
		}
		return nil, fmt.Errorf("command %q: %w", name, err)
	}
	if found, err = filepath.Abs(found); err != nil {
		return nil, err
	}
	exe, err := filepath.EvalSymlinks(found)
	if err != nil {
		return nil, fmt.Errorf("command %s: %w", found, err)
	}
	rc := &resolvedCommand{Found: found, Exe: exe}
	rc.bindProgram(exe, "the command")
	if interp := interpreter(exe); interp != "" {
		if p, err := exec.LookPath(interp); err == nil {
			if p, err = filepath.EvalSymlinks(p); err == nil {
				rc.bindProgram(p, "its interpreter "+filepath.Base(p))
				if dir := filepath.Dir(p); filepath.Base(dir) == "bin" && !inSystem(p) {
					rc.add(filepath.Dir(dir), "the install prefix of its interpreter (its libraries)")
				}
			}
		}
	}
	return rc, nil
}

// bindProgram binds a program: its npm package (and that package's
// dependencies beside it) when it is in one, else the file itself.
// Nothing for a program in the system dirs.
func (rc *resolvedCommand) bindProgram(p, what string) {
	if inSystem(p) {
		return
	}
	pkg, ok := npmPackage(p)
	if !ok {
		rc.add(p, what)
		return
	}
	rc.add(pkg, "the npm package of "+what)
	queue := []string{pkg}
	for len(queue) > 0 && len(rc.Binds) < maxPackageBinds {
		dir := queue[0]
		queue = queue[1:]
		for _, dep := range npmDependencies(dir) {
			if rc.add(dep.dir, "a dependency of "+dep.of+" (npm)") {
				queue = append(queue, dep.dir)
			}
		}
	}
}

// add binds p once (nothing already held by a bind); it reports whether
// p is new.
func (rc *resolvedCommand) add(p, reason string) bool {
	for _, b := range rc.Binds {
		if p == b.Path || strings.HasPrefix(p, b.Path+"/") {
			return false
		}
	}
	rc.Binds = append(rc.Binds, jail.Bind{Path: p, Reason: reason})
	return true
}

func inSystem(p string) bool {
	return slices.ContainsFunc(systemDirs, func(d string) bool { return p == d || strings.HasPrefix(p, d+"/") })
}

// interpreter is the program a script's #! line names ("" for a binary):
// for `#!/usr/bin/env node`, node, found on PATH as env would.
func interpreter(exe string) string {
	f, err := os.Open(exe)
	if err != nil {
		return ""
	}
	defer f.Close()
	head := make([]byte, 256)
	n, _ := io.ReadFull(f, head)
	line, _, _ := bytes.Cut(head[:n], []byte("\n"))
	rest, ok := bytes.CutPrefix(line, []byte("#!"))
	if !ok {
		return ""
	}
	fields := strings.Fields(string(rest))
	switch {
	case len(fields) == 0:
		return ""
	case filepath.Base(fields[0]) == "env":
		for _, f := range fields[1:] {
			if !strings.HasPrefix(f, "-") {
				return f
			}
		}
		return ""
	}
	return fields[0]
}

// npmPackage is the package dir holding p: the nearest dir with a
// package.json right under node_modules (or node_modules/@scope).
func npmPackage(p string) (string, bool) {
	for d := filepath.Dir(p); d != "/" && d != "."; d = filepath.Dir(d) {
		parent := filepath.Dir(d)
		if filepath.Base(parent) != "node_modules" && !(strings.HasPrefix(filepath.Base(parent), "@") && filepath.Base(filepath.Dir(parent)) == "node_modules") {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "package.json")); err == nil {
			return d, true
		}
	}
	return "", false
}

type npmDep struct{ dir, of string }

// npmDependencies are the dependencies (optional ones too) of the
// package in dir that are installed in the node_modules beside it or in
// its own.
func npmDependencies(dir string) []npmDep {
	raw, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err != nil || len(raw) > 1<<20 {
		return nil
	}
	var pj struct {
		Name     string            `json:"name"`
		Deps     map[string]string `json:"dependencies"`
		Optional map[string]string `json:"optionalDependencies"`
	}
	if json.Unmarshal(raw, &pj) != nil {
		return nil
	}
	modules := filepath.Dir(dir)
	if strings.HasPrefix(filepath.Base(modules), "@") {
		modules = filepath.Dir(modules)
	}
	// A dependency is bound at its real path, and only inside the
	// node_modules tree it was installed in (a pnpm store is in there
	// too): a link out of it would bind whatever it points at.
	tree, err := filepath.EvalSymlinks(modules)
	if err != nil {
		return nil
	}
	var out []npmDep
	for _, names := range []map[string]string{pj.Deps, pj.Optional} {
		for _, name := range slices.Sorted(maps.Keys(names)) {
			if strings.Contains(name, "..") || strings.Count(name, "/") > 1 {
				continue
			}
			for _, base := range []string{filepath.Join(dir, "node_modules"), modules} {
				d, err := filepath.EvalSymlinks(filepath.Join(base, filepath.FromSlash(name)))
				if err != nil || !(d == tree || strings.HasPrefix(d, tree+"/")) {
					continue
				}
				if st, err := os.Stat(d); err == nil && st.IsDir() {
					out = append(out, npmDep{dir: d, of: pj.Name})
					break
				}
			}
		}
	}
	return out
}
