package jail

import (
	"fmt"
	"os"
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
	// Asked: the operator named it (--ro, a profile's ro:), rather than
	// warden finding it for the program.
	Asked bool `json:"asked,omitempty"`
}

// rows are the command's plan rows, after the system's and the run
// dir's: each at its own host path. The workspace comes first, so that a
// read-only bind inside it is mounted over it and stays read-only.
func (c *Command) rows() []Row {
	rows := []Row{
		{Source: c.Workspace, Target: c.Workspace, Mode: ModeRW, Absence: Required, Reason: "the workspace"},
		{Source: c.Home, Target: c.Home, Mode: ModeRW, Absence: Required, Reason: "the session's home (HOME)"},
	}
	for _, b := range c.Binds {
		rows = append(rows, Row{Source: b.Path, Target: b.Path, Mode: ModeRO, Absence: Required, Reason: b.Reason})
	}
	return rows
}

// sharedDirs hold what many programs share: sockets above all (an
// ssh-agent's and X11's in /tmp, D-Bus's in /run/user/UID). A bound
// tree that holds one reaches them by path, past the jail's empty
// network namespace.
var sharedDirs = []string{"/tmp", "/var/tmp", "/dev", "/dev/shm", "/run", "/var/run", "/proc", "/sys"}

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
	shared := sharedDirs
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" && filepath.IsAbs(d) {
		shared = append(append([]string{}, shared...), filepath.Clean(d))
	}
	for _, p := range paths {
		if p.path == "" || !filepath.IsAbs(p.path) || filepath.Clean(p.path) != p.path {
			return fmt.Errorf("%s %q: want an absolute, clean path", p.what, p.path)
		}
		if p.path == "/" {
			return fmt.Errorf("%s is /: that is the whole host; name a dir of its own", p.what)
		}
		rp := realPath(p.path)
		if p.path != c.Home && rp != p.path {
			// What is checked is what is mounted: a link swapped in
			// between would otherwise take the mount elsewhere.
			return fmt.Errorf("%s %s is reached through a symlink (it is %s): name the real path", p.what, p.path, rp)
		}
		for _, d := range shared {
			if within(realPath(d), rp) {
				return fmt.Errorf("%s %s is or holds %s, where programs keep their sockets (ssh-agent, X11, D-Bus): the command would reach them by path; name a dir of its own inside it", p.what, p.path, d)
			}
		}
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
