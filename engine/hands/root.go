package hands

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// RootError says a hands root was refused before anything was touched.
type RootError struct {
	Root    string
	Problem string
	Fix     string
}

func (e *RootError) Error() string {
	return fmt.Sprintf("hands root %q %s; %s", e.Root, e.Problem, e.Fix)
}

// ValidateRoot holds a root that init is about to create to
// docs/operating.md: absolute, canonical, new, free of control characters and
// commas (a comma would split Docker's mount options), under ancestors
// that are real directories owned by root or the current user and not
// group- or world-writable (a root-owned sticky dir such as /tmp is fine:
// nobody else can rename our entries in it). It only looks.
func ValidateRoot(root string) error {
	bad := func(problem, fix string) error { return &RootError{Root: root, Problem: problem, Fix: fix} }
	switch {
	case root == "":
		return bad("is empty", "pass an absolute path that does not exist yet, e.g. --root $HOME/hands/task1")
	case hasControl(root):
		return bad("contains a control character", "pick a path of printable characters")
	case strings.Contains(root, ","):
		return bad("contains a comma (it would split Docker's mount options)", "pick a path without commas")
	case !filepath.IsAbs(root):
		return bad("is relative", "pass an absolute path, e.g. --root "+filepath.Join("$PWD", root))
	case filepath.Clean(root) != root:
		return bad("is not clean", "pass it as "+filepath.Clean(root))
	case root == "/":
		return bad("is the file system root", "pass a new directory below an existing one")
	case len(root) > 1024:
		return bad("is longer than 1024 bytes", "pick a shorter path")
	}
	if _, err := os.Lstat(root); err == nil {
		return bad("already exists", "warden never adopts an existing directory: pass a path that does not exist yet")
	} else if !errors.Is(err, fs.ErrNotExist) {
		return bad("cannot be checked: "+err.Error(), "check the path and its parents")
	}
	parent := filepath.Dir(root)
	if real, err := filepath.EvalSymlinks(parent); err != nil {
		return bad("has a parent that cannot be resolved: "+errText(err), "create the parent first (mkdir -p "+parent+")")
	} else if real != parent {
		return bad("is not canonical: its parent resolves to "+real, "pass it as "+filepath.Join(real, filepath.Base(root)))
	}
	uid := os.Geteuid()
	for dir := parent; ; dir = filepath.Dir(dir) {
		fi, err := os.Lstat(dir)
		if err != nil {
			return bad("has an ancestor "+dir+" that cannot be checked: "+errText(err), "check the path")
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return bad("has a symlinked ancestor "+dir, "pass the real path")
		}
		if !fi.IsDir() {
			return bad("has an ancestor "+dir+" that is not a directory", "pick another path")
		}
		st := fi.Sys().(*syscall.Stat_t)
		if int(st.Uid) != 0 && int(st.Uid) != uid {
			return bad(fmt.Sprintf("has an ancestor %s owned by uid %d (neither root nor you)", dir, st.Uid), "pick a path under directories owned by root or you")
		}
		perm := fi.Mode().Perm()
		if perm&0o022 != 0 && !(st.Uid == 0 && fi.Mode()&fs.ModeSticky != 0) {
			return bad(fmt.Sprintf("has an ancestor %s that is group- or world-writable (mode %04o)", dir, perm),
				"pick a path under directories only root or you can write, or `chmod go-w "+dir+"`")
		}
		if dir == "/" {
			return nil
		}
	}
}

func errText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
