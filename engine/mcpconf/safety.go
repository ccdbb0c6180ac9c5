package mcpconf

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// MaxConfigSize is the largest config file mcpconf reads (1 MiB).
const MaxConfigSize = 1 << 20

// Refusal is a file-safety check that failed: which check, what is wrong,
// and how to fix it. Nothing was changed.
type Refusal struct {
	Path    string
	Check   string
	Problem string
	Fix     string
}

func (r *Refusal) Error() string {
	return fmt.Sprintf("refusing %s: %s check: %s; fix: %s (nothing was changed)", r.Path, r.Check, r.Problem, r.Fix)
}

// fileID is what must not change between the read and the rename.
type fileID struct {
	dev, ino uint64
	size     int64
	mtime    unix.Timespec
}

func idOf(st *unix.Stat_t) fileID {
	return fileID{dev: uint64(st.Dev), ino: st.Ino, size: st.Size, mtime: st.Mtim}
}

// original is the config as read: absent, or its bytes and identity.
type original struct {
	exists bool
	data   []byte
	id     fileID
	mode   os.FileMode
	// missingDir: the file's directory does not exist (nor, then, the
	// file). A plan can still show its diff; writing needs the dir.
	missingDir string
}

// missingDirRefusal is why a config in a missing directory is not written:
// warden never creates a client's directories.
func missingDirRefusal(target, dir string) error {
	return &Refusal{Path: target, Check: "ancestors", Problem: fmt.Sprintf("%s: %v", dir, unix.ENOENT), Fix: "create the directory first (mkdir -p -m 700 " + dir + ")"}
}

// checkAncestors refuses a dir chain with a group/world writable dir, or
// one owned by someone else than root or the user, from dir up to /. Its
// fixes speak of the config; AdmitExecutable's speak of the binary.
func checkAncestors(target, dir string) error {
	return checkAncestorsOf(target, dir, "the config", "the file")
}

// checkAncestorsOf is checkAncestors for what ("the config", "the warden
// binary"), which others could swap as thing.
func checkAncestorsOf(target, dir, what, thing string) error {
	uid := uint32(os.Geteuid())
	for d := dir; ; d = filepath.Dir(d) {
		var st unix.Stat_t
		if err := unix.Lstat(d, &st); err != nil {
			return &Refusal{Path: target, Check: "ancestors", Problem: fmt.Sprintf("%s: %v", d, err), Fix: "create the directory first (mkdir -p -m 700 " + d + ")"}
		}
		switch {
		case st.Mode&unix.S_IFMT != unix.S_IFDIR:
			return &Refusal{Path: target, Check: "ancestors", Problem: d + " is not a directory (a symlink?)", Fix: "give the canonical path (realpath)"}
		case st.Uid != 0 && st.Uid != uid:
			return &Refusal{Path: target, Check: "ancestors", Problem: fmt.Sprintf("%s is owned by uid %d, neither root nor you", d, st.Uid), Fix: "keep " + what + " under directories you or root own"}
		case st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX != 0:
			// A shared scratch dir such as /tmp: loosening it would break
			// the machine, so the only advice is to move.
			return &Refusal{Path: target, Check: "ancestors", Problem: fmt.Sprintf("%s is group/world writable (mode %04o): others could swap %s", d, st.Mode&0o7777, thing),
				Fix: "keep " + what + " in a private directory (one only root or you can write), not under " + d}
		case st.Mode&0o022 != 0:
			return &Refusal{Path: target, Check: "ancestors", Problem: fmt.Sprintf("%s is group/world writable (mode %04o): others could swap %s", d, st.Mode&0o7777, thing),
				Fix: "chmod go-w " + d + " (or keep " + what + " elsewhere)"}
		}
		if d == "/" {
			return nil
		}
	}
}

// existingAncestor is dir when it exists (or cannot be looked at: the
// checks then say why), else its nearest ancestor that exists.
func existingAncestor(dir string) string {
	d := dir
	for {
		var st unix.Stat_t
		err := unix.Lstat(d, &st)
		if err == nil || !errors.Is(err, unix.ENOENT) || d == "/" {
			return d
		}
		d = filepath.Dir(d)
	}
}

// checkPath refuses a target that is not absolute and canonical.
func checkPath(path string) error {
	if !filepath.IsAbs(path) || filepath.Clean(path) != path {
		return &Refusal{Path: path, Check: "absolute and canonical", Problem: "not an absolute, clean path", Fix: "give the full path, e.g. " + filepath.Clean(path)}
	}
	dir := filepath.Dir(path)
	real, err := filepath.EvalSymlinks(dir)
	if err == nil && real != dir {
		return &Refusal{Path: path, Check: "absolute and canonical", Problem: dir + " goes through a symlink (its real path is " + real + ")",
			Fix: "give the canonical path " + filepath.Join(real, filepath.Base(path))}
	}
	return nil
}

// readTarget opens the config without following a symlink and checks it:
// the user's, a regular file, one link, at most MaxConfigSize, not
// group/world writable. A missing file is no error (a fresh config).
func readTarget(path string) (original, error) {
	if err := checkPath(path); err != nil {
		return original{}, err
	}
	dir := filepath.Dir(path)
	if up := existingAncestor(dir); up != dir {
		// The dir is missing, so the file is too: hold what exists above
		// it to the same checks, and say which dir a write needs.
		if err := checkAncestors(path, up); err != nil {
			return original{}, err
		}
		return original{missingDir: dir}, nil
	}
	if err := checkAncestors(path, dir); err != nil {
		return original{}, err
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	switch {
	case errors.Is(err, unix.ENOENT):
		return original{}, nil
	case errors.Is(err, unix.ELOOP):
		target, _ := filepath.EvalSymlinks(path)
		return original{}, &Refusal{Path: path, Check: "not a symlink", Problem: "it is a symlink (to " + target + ")", Fix: "give the real file's path, --config " + target}
	case err != nil:
		return original{}, &Refusal{Path: path, Check: "readable", Problem: err.Error(), Fix: "check the path and its permissions"}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return original{}, err
	}
	uid := uint32(os.Geteuid())
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return original{}, &Refusal{Path: path, Check: "regular file", Problem: "not a regular file", Fix: "point --config at the client's config file"}
	case st.Uid != uid:
		return original{}, &Refusal{Path: path, Check: "owned by you", Problem: fmt.Sprintf("owned by uid %d, not you (uid %d)", st.Uid, uid), Fix: fmt.Sprintf("run this as the file's owner (uid %d): warden does not write, or hand you, another user's file", st.Uid)}
	case st.Nlink != 1:
		return original{}, &Refusal{Path: path, Check: "one link", Problem: fmt.Sprintf("it has %d hard links: a write would split them", st.Nlink), Fix: "make it a single file: cp --remove-destination (or remove the other links)"}
	case st.Mode&0o022 != 0:
		return original{}, &Refusal{Path: path, Check: "not group/world writable", Problem: fmt.Sprintf("mode %04o lets others change it", st.Mode&0o7777), Fix: "chmod go-w " + path}
	case st.Size > MaxConfigSize:
		return original{}, &Refusal{Path: path, Check: "at most 1 MiB", Problem: fmt.Sprintf("it is %d bytes", st.Size), Fix: "trim the file, or edit warden's entry by hand"}
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxConfigSize+1))
	if err != nil {
		return original{}, err
	}
	if int64(len(data)) != st.Size {
		return original{}, &Refusal{Path: path, Check: "unchanged while read", Problem: "its size changed while it was read", Fix: "close the client and try again"}
	}
	return original{exists: true, data: data, id: idOf(&st), mode: os.FileMode(st.Mode & 0o777)}, nil
}

// beforeRename, when set (tests), runs between writing the temp file and
// the last identity check: it simulates a writer racing us.
var beforeRename func(path string)

// write replaces path with data: a temp file in the same dir (O_EXCL,
// 0600), fsynced; then, only if the original is still what was read
// (device, inode, size, mtime; or still absent), a .bak of the original,
// the rename, and an fsync of the dir.
func write(path string, orig original, data []byte) (backup string, err error) {
	return writeFile(path, orig, data, true)
}

// writeFile is write, keeping the original as .bak only with keepBackup.
func writeFile(path string, orig original, data []byte, keepBackup bool) (backup string, err error) {
	dir := filepath.Dir(path)
	var tmp *os.File
	for i := 0; ; i++ {
		name := filepath.Join(dir, fmt.Sprintf(".%s.warden-%d-%d.tmp", filepath.Base(path), os.Getpid(), i))
		tmp, err = os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) || i > 100 {
			return "", &Refusal{Path: path, Check: "temp file", Problem: err.Error(), Fix: "make " + dir + " writable by you"}
		}
	}
	tmpName := tmp.Name()
	done := false
	defer func() {
		if !done {
			os.Remove(tmpName)
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	if beforeRename != nil {
		beforeRename(path)
	}
	var st unix.Stat_t
	err = unix.Lstat(path, &st)
	switch {
	case !orig.exists && err == nil:
		return "", &Refusal{Path: path, Check: "unchanged since read", Problem: "the file appeared while warden prepared it", Fix: "run the command again"}
	case orig.exists && (err != nil || idOf(&st) != orig.id):
		return "", &Refusal{Path: path, Check: "unchanged since read", Problem: "another program changed the file while warden prepared it",
			Fix: "close the client (or whatever edits the file) and run the command again"}
	}
	// The backup comes after the check, so a refusal leaves no trace.
	if orig.exists && keepBackup {
		backup = path + ".bak"
		if err := writeBackup(backup, orig.data); err != nil {
			return "", err
		}
	}
	if err := os.Rename(tmpName, path); err != nil {
		return "", err
	}
	done = true
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return backup, nil
}

// writeBackup writes the original's bytes to path.bak, replacing an older
// backup (never through a symlink), 0600, fsynced.
func writeBackup(bak string, data []byte) error {
	var st unix.Stat_t
	if err := unix.Lstat(bak, &st); err == nil {
		if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Uid != uint32(os.Geteuid()) {
			return &Refusal{Path: bak, Check: "backup", Problem: "an old backup there is not your regular file", Fix: "remove " + bak}
		}
		if err := os.Remove(bak); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(bak, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return &Refusal{Path: bak, Check: "backup", Problem: err.Error(), Fix: "remove " + bak}
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// AdmitExecutable checks the warden binary a config will name, as
// bubblewrap is admitted: absolute and canonical (never from PATH), a
// regular file owned by root or the user, not writable by group or world,
// under directories owned by root or the user that are not group/world
// writable.
func AdmitExecutable(path string) error {
	if !filepath.IsAbs(path) || filepath.Clean(path) != path {
		return &Refusal{Path: path, Check: "warden binary: absolute and canonical", Problem: "not an absolute, clean path (warden is never looked up on PATH)", Fix: "give the full path of the warden binary"}
	}
	if real, err := filepath.EvalSymlinks(path); err != nil {
		return &Refusal{Path: path, Check: "warden binary", Problem: err.Error(), Fix: "build or install warden there"}
	} else if real != path {
		return &Refusal{Path: path, Check: "warden binary: canonical", Problem: "goes through a symlink (its real path is " + real + ")", Fix: "name the real file, " + real}
	}
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return err
	}
	uid := uint32(os.Geteuid())
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return &Refusal{Path: path, Check: "warden binary: regular file", Problem: "not a regular file", Fix: "name the warden binary itself"}
	case st.Uid != 0 && st.Uid != uid:
		return &Refusal{Path: path, Check: "warden binary: owner", Problem: fmt.Sprintf("owned by uid %d, neither root nor you", st.Uid), Fix: "install warden as root or as yourself"}
	case st.Mode&0o022 != 0:
		return &Refusal{Path: path, Check: "warden binary: not writable by others", Problem: fmt.Sprintf("mode %04o lets others replace what the client runs", st.Mode&0o7777), Fix: "chmod go-w " + path}
	case st.Mode&0o111 == 0:
		return &Refusal{Path: path, Check: "warden binary: executable", Problem: "not executable", Fix: "chmod u+x " + path}
	}
	if err := checkAncestorsOf(path, filepath.Dir(path), "the warden binary", "the binary the client runs"); err != nil {
		r := err.(*Refusal)
		r.Check = "warden binary: " + r.Check
		r.Fix += " (install it under /usr/local/bin, or ~/.local/bin in a private home)"
		return r
	}
	return nil
}
