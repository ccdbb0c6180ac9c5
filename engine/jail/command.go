package jail

import (
	"fmt"
	"path/filepath"
)

// Command is a run of an operator's own program (`warden run -- CMD`)
// rather than a module's hook: no module is bound; the program and what
// it needs to start are bound read-only at their host paths, the
// workspace and the session's home read-write at theirs. Every path is
// absolute and clean, and has been checked against what no run may see
// (CheckCommand) before it reaches a backend.
type Command struct {
	// Exe is the program, symlinks resolved: Argv[0] in the jail.
	Exe string `json:"exe"`
	// Binds are the read-only paths the program needs (its package
	// tree, its interpreter, --ro), each with why.
	Binds []Bind `json:"binds"`
	// Workspace is bound read-write; the program starts there.
	Workspace string `json:"workspace"`
	// Home is the session's private HOME, bound read-write.
	Home string `json:"home"`
}

// Bind is one read-only path of a Command.
type Bind struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// rows are the command's plan rows, after the system's and the run
// dir's: each at its own host path.
func (c *Command) rows() []Row {
	var rows []Row
	for _, b := range c.Binds {
		rows = append(rows, Row{Source: b.Path, Target: b.Path, Mode: ModeRO, Absence: Required, Reason: b.Reason})
	}
	return append(rows,
		Row{Source: c.Workspace, Target: c.Workspace, Mode: ModeRW, Absence: Required, Reason: "the workspace"},
		Row{Source: c.Home, Target: c.Home, Mode: ModeRW, Absence: Required, Reason: "the session's home (HOME)"},
	)
}

// CheckCommand refuses a command whose paths are not absolute and clean,
// or that reach what no run may see: no path may be or hold a secret (the
// operator's home, the data dir), and none but the session's home (which
// warden keeps there) may lie inside the data dir. A workspace or a bind
// inside the operator's home is what `warden run` is for: that one tree
// is bound, never the home.
func CheckCommand(c *Command, dataDir, home string) error {
	if c == nil {
		return nil
	}
	paths := []struct{ path, what string }{{c.Exe, "the command"}, {c.Workspace, "the workspace"}, {c.Home, "the home"}}
	for _, b := range c.Binds {
		paths = append(paths, struct{ path, what string }{b.Path, b.Reason})
	}
	for _, p := range paths {
		if p.path == "" || !filepath.IsAbs(p.path) || filepath.Clean(p.path) != p.path {
			return fmt.Errorf("%s %q: want an absolute, clean path", p.what, p.path)
		}
		if p.path == "/" {
			return fmt.Errorf("%s is /: that is the whole host; name a dir of its own", p.what)
		}
		rp := realPath(p.path)
		for _, s := range []Secret{{dataDir, "warden's data dir"}, {home, "the operator's home"}} {
			if s.Path == "" || s.Path == "/" {
				continue
			}
			sp := realPath(s.Path)
			switch {
			case within(sp, rp):
				return fmt.Errorf("%s %s holds %s (%s), which no run may reach: name a dir inside it instead", p.what, p.path, s.Path, s.What)
			case within(rp, sp) && s.Path == dataDir && p.path != c.Home:
				return fmt.Errorf("%s %s is inside %s (%s), which no run may reach: use a dir outside it", p.what, p.path, s.Path, s.What)
			}
		}
	}
	return nil
}
