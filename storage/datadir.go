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
			return &PolicyError{Path: dir, Problem: "cannot create data dir: " + errText(err), Fix: OwnDirFix(dir)}
		}
		// MkdirAll is subject to umask; make the mode exact.
		if err := os.Chmod(dir, 0o700); err != nil {
			return err
		}
	}
	return CheckDir(dir)
}

// CheckDir holds an existing data dir to the policy without changing it.
// Its fixes never weaken anything: a dir that is not the user's, or not
// warden's, is never handed over (chown) or opened up; the way out is a
// private dir of the user's own.
func CheckDir(dir string) error {
	fi, err := os.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &PolicyError{Path: dir, Problem: "data dir does not exist", Fix: "create it with `mkdir -m 700 " + dir + "`"}
	case errors.Is(err, fs.ErrPermission):
		return &PolicyError{Path: dir, Problem: fmt.Sprintf("data dir cannot be reached: a dir above it is closed to you (uid %d), so it is another user's", os.Geteuid()),
			Fix: OwnDirFix(dir)}
	case err != nil:
		return &PolicyError{Path: dir, Problem: "cannot stat data dir: " + errText(err), Fix: OwnDirFix(dir)}
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		real, _ := filepath.EvalSymlinks(dir)
		return &PolicyError{Path: dir, Problem: "data dir is a symlink", Fix: "pass the real path with --data-dir " + real}
	}
	if !fi.IsDir() {
		return &PolicyError{Path: dir, Problem: "data dir is a file, not a directory", Fix: "--data-dir names a directory: " + useOwnDir(dir)}
	}
	st := fi.Sys().(*syscall.Stat_t)
	uid := os.Geteuid()
	if int(st.Uid) != uid {
		problem := fmt.Sprintf("data dir belongs to uid %d; you are uid %d", st.Uid, uid)
		if holdsStore(dir) {
			problem += fmt.Sprintf(" (its store is uid %d's: run warden as that user to use it)", st.Uid)
		}
		return &PolicyError{Path: dir, Problem: problem, Fix: OwnDirFix(dir)}
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		problem := fmt.Sprintf("data dir mode is %04o: group or world can reach it", perm)
		if !wardenDir(dir) {
			// Closing up a dir that holds other things would break whatever
			// shares it: warden wants a dir of its own.
			return &PolicyError{Path: dir, Problem: problem + ", and it holds files that are not warden's", Fix: OwnDirFix(dir)}
		}
		return &PolicyError{Path: dir, Problem: problem, Fix: "chmod 700 " + dir}
	}
	return nil
}

// OwnDirFix is the fix for a data dir warden will not use as it is: a
// new private dir of the user's own, never a change to this one.
func OwnDirFix(dir string) string {
	return "warden will not change a dir that is not its own: " + useOwnDir(dir)
}

func useOwnDir(dir string) string {
	own := ownDirSuggestion(dir)
	return fmt.Sprintf("use a private dir of yours instead, `mkdir -p -m 700 %s` and `--data-dir %s` (or WARDEN_DATA_DIR=%s)", own, own, own)
}

// ownDirSuggestion is the usual data dir under the user's home (or
// XDG_STATE_HOME), or a sibling of it when that is the dir refused.
func ownDirSuggestion(refused string) string {
	base := ""
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		base = filepath.Join(d, "warden")
	} else if home, err := os.UserHomeDir(); err == nil {
		base = filepath.Join(home, ".local", "state", "warden")
	} else {
		base = filepath.Join("/var/tmp", fmt.Sprintf("warden-%d", os.Geteuid()))
	}
	if filepath.Clean(base) == filepath.Clean(refused) {
		base = fmt.Sprintf("%s-%d", base, os.Geteuid())
	}
	return base
}

// holdsStore reports whether dir has a warden.db (it may not be readable).
func holdsStore(dir string) bool {
	_, err := os.Lstat(filepath.Join(dir, DBFile))
	return err == nil || errors.Is(err, fs.ErrPermission)
}

// wardenDir reports whether dir is empty or holds a warden store: a dir
// warden may tighten without breaking something else that lives there.
func wardenDir(dir string) bool {
	if holdsStore(dir) {
		return true
	}
	ents, err := os.ReadDir(dir)
	return err == nil && len(ents) == 0
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
		// Another user (warden run through sudo, say) made it: its content
		// is theirs, so the fix is not to take it over.
		return &PolicyError{Path: path, Problem: fmt.Sprintf("belongs to uid %d; you are uid %d", st.Uid, uid),
			Fix: fmt.Sprintf("run warden as uid %d for this data dir, or %s", st.Uid, useOwnDir(filepath.Dir(path)))}
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
