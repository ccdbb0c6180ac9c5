package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// DefaultDir is $XDG_STATE_HOME/warden, else ~/.local/state/warden
// (docs/operating.md). WARDEN_DATA_DIR overrides both.
func DefaultDir() (string, error) {
	if d := os.Getenv("WARDEN_DATA_DIR"); d != "" {
		return d, nil
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "warden"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no data dir: $HOME is unset; pass --data-dir or set WARDEN_DATA_DIR")
	}
	return filepath.Join(home, ".local", "state", "warden"), nil
}

// EnsureDir creates dir 0700 when it is missing and then holds it to the
// policy: a real directory (not a symlink), owned by the current user, with
// no group or world access.
func EnsureDir(dir string) error {
	if !filepath.IsAbs(dir) {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return err
		}
		dir = abs
	}
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("create data dir: %w", err)
		}
		// MkdirAll is subject to umask; make the mode exact.
		if err := os.Chmod(dir, 0o700); err != nil {
			return err
		}
	}
	return CheckDir(dir)
}

// CheckDir holds an existing data dir to the policy without changing it.
func CheckDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return &PolicyError{Path: dir, Problem: "cannot stat data dir: " + errText(err), Fix: "create it with `mkdir -m 700 " + dir + "`"}
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		real, _ := filepath.EvalSymlinks(dir)
		return &PolicyError{Path: dir, Problem: "data dir is a symlink", Fix: "pass the real path with --data-dir " + real}
	}
	if !fi.IsDir() {
		return &PolicyError{Path: dir, Problem: "data dir is not a directory", Fix: "move it aside and let warden create the directory"}
	}
	st := fi.Sys().(*syscall.Stat_t)
	uid := os.Geteuid()
	if int(st.Uid) != uid {
		return &PolicyError{Path: dir, Problem: fmt.Sprintf("data dir is owned by uid %d, not by you (uid %d)", st.Uid, uid),
			Fix: fmt.Sprintf("chown %d:%d %s", uid, os.Getegid(), dir)}
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return &PolicyError{Path: dir, Problem: fmt.Sprintf("data dir mode is %04o: group or world can reach it", perm),
			Fix: "chmod 700 " + dir}
	}
	return nil
}

// checkPrivateFile holds a file of the data dir to the policy for files
// that hold secrets or state: regular, not a symlink, one link, owned by
// the current user, mode 0600.
func checkPrivateFile(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return &PolicyError{Path: path, Problem: "is a symlink", Fix: "remove the link (`rm " + path + "`) and put the real file in its place"}
	}
	if !fi.Mode().IsRegular() {
		return &PolicyError{Path: path, Problem: "is not a regular file", Fix: "move it aside (`mv " + path + " " + path + ".bad`)"}
	}
	st := fi.Sys().(*syscall.Stat_t)
	if st.Nlink != 1 {
		return &PolicyError{Path: path, Problem: fmt.Sprintf("has %d hard links", st.Nlink), Fix: "remove the other links, or copy it: `cp " + path + " " + path + ".new && mv " + path + ".new " + path + "`"}
	}
	uid := os.Geteuid()
	if int(st.Uid) != uid {
		return &PolicyError{Path: path, Problem: fmt.Sprintf("is owned by uid %d, not by you (uid %d)", st.Uid, uid), Fix: fmt.Sprintf("chown %d:%d %s", uid, os.Getegid(), path)}
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		return &PolicyError{Path: path, Problem: fmt.Sprintf("mode is %04o, want 0600", perm), Fix: "chmod 600 " + path}
	}
	return nil
}

func errText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
