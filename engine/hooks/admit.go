package hooks

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// AdmissionError is the refusal of a module path by AdmitModulePath.
// Ancestor is the offending path component when it is not Path itself.
type AdmissionError struct {
	Path     string
	Ancestor string
	Problem  string
	Fix      string
}

func (e *AdmissionError) Error() string {
	var b strings.Builder
	b.WriteString("module path ")
	b.WriteString(strconv.Quote(e.Path))
	b.WriteString(" refused: ")
	if e.Ancestor != "" && e.Ancestor != e.Path {
		b.WriteString("ancestor ")
		b.WriteString(e.Ancestor)
		b.WriteString(" ")
	}
	b.WriteString(e.Problem)
	if e.Fix != "" {
		b.WriteString("; fix: ")
		b.WriteString(e.Fix)
	}
	return b.String()
}

// AdmitModulePath checks that a module folder is safe to run code from:
// an absolute, canonical (clean, symlink-free) path to a directory owned by
// root or the current user, which neither it nor any ancestor up to / is
// group- or world-writable (sticky bits do not help: modules are code),
// and every ancestor is owned by root or the current user.
func AdmitModulePath(path string) error {
	refuse := func(anc, problem, fix string) error {
		if anc == path {
			anc = ""
		}
		return &AdmissionError{Path: path, Ancestor: anc, Problem: problem, Fix: fix}
	}
	if path == "" {
		return refuse("", "the path is empty (check: absolute path)", "pass the module folder's absolute path")
	}
	if strings.ContainsRune(path, 0) {
		return refuse("", "the path contains a NUL byte (check: absolute path)", "pass the module folder's absolute path")
	}
	if !filepath.IsAbs(path) {
		fix := "pass an absolute path"
		if abs, err := filepath.Abs(path); err == nil {
			if real, err := filepath.EvalSymlinks(abs); err == nil {
				abs = real
			}
			fix = "pass the absolute path " + abs
		}
		return refuse("", "is relative (check: absolute path)", fix)
	}
	if c := filepath.Clean(path); c != path {
		return refuse("", "is not canonical: it cleans to "+c+" (check: canonical path)", "pass "+c)
	}

	// Every component from / down to path, top-down.
	comps := []string{"/"}
	if path != "/" {
		acc := ""
		for _, part := range strings.Split(path[1:], "/") {
			acc += "/" + part
			comps = append(comps, acc)
		}
	}
	type info struct {
		path string
		fi   fs.FileInfo
		st   *syscall.Stat_t
	}
	infos := make([]info, 0, len(comps))
	for _, c := range comps {
		fi, err := os.Lstat(c)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return refuse(c, "does not exist (check: exists)", "create the module folder or correct the path")
			}
			if errors.Is(err, syscall.ENOTDIR) {
				return refuse(c, "has a non-directory in it (check: directory)", "correct the path")
			}
			return refuse(c, "cannot be inspected: "+pathErrCause(err).Error()+" (check: stat)", "make the path readable by this user")
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			fix := "pass the real path instead"
			if real, err := filepath.EvalSymlinks(path); err == nil {
				fix = "pass the real path " + real
			}
			target, _ := os.Readlink(c)
			return refuse(c, "is a symlink to "+strconv.Quote(target)+" (check: canonical path, no symlinks)", fix)
		}
		if c != path && !fi.IsDir() {
			return refuse(c, "is not a directory (check: directory)", "correct the path")
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return refuse(c, "has no owner information (check: owner)", "use a local file system")
		}
		infos = append(infos, info{c, fi, st})
	}
	if real, err := filepath.EvalSymlinks(path); err != nil || real != path {
		fix := "pass the real path"
		if err == nil {
			fix = "pass the real path " + real
		}
		return refuse("", "is not canonical: it resolves elsewhere (check: canonical path, no symlinks)", fix)
	}

	last := infos[len(infos)-1]
	if !last.fi.IsDir() {
		return refuse("", "is not a directory but a "+fileKindName(last.fi.Mode())+" (check: directory)", "pass the module folder (the directory holding module.yaml)")
	}

	euid := uint32(os.Geteuid())
	// The module dir itself first, then ancestors from / down.
	order := append([]info{last}, infos[:len(infos)-1]...)
	for _, in := range order {
		anc := in.path
		if anc == path {
			anc = ""
		}
		uid := in.st.Uid
		if uid != 0 && uid != euid {
			// Never hand another user's dir over: copying the module
			// leaves theirs as it was.
			fix := "copy the module into a directory that only root or you own and can write (`cp -r " + path + " DIR`), and add it from there"
			return refuse(anc, fmt.Sprintf("is owned by %s, not root or the current user %s (check: owner)", uidName(uid), uidName(euid)), fix)
		}
		perm := in.fi.Mode().Perm()
		if perm&0o022 != 0 {
			var who string
			switch {
			case perm&0o022 == 0o022:
				who = "group- and world-writable"
			case perm&0o002 != 0:
				who = "world-writable"
			default:
				who = "group-writable"
			}
			mode := fmt.Sprintf("%04o", uint32(perm)|specialModeBits(in.fi.Mode()))
			extra := ""
			if in.fi.Mode()&fs.ModeSticky != 0 {
				extra = ", sticky bit or not: modules are code"
			}
			fix := "chmod go-w " + in.path
			switch {
			case anc != "" && in.fi.Mode()&fs.ModeSticky != 0:
				// A shared scratch dir such as /tmp: loosening it would
				// break the machine, so the only advice is to move.
				fix = "copy the module to a private directory (one only root or you can write, such as one under your home) and add it from there"
			case anc != "":
				fix += " (or move the module under a directory that only root or you can write)"
			}
			return refuse(anc, fmt.Sprintf("is %s (mode %s%s) (check: not group/world-writable)", who, mode, extra), fix)
		}
	}
	return nil
}

func specialModeBits(m fs.FileMode) uint32 {
	var b uint32
	if m&fs.ModeSetuid != 0 {
		b |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		b |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		b |= 0o1000
	}
	return b
}

func fileKindName(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "regular file"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "non-directory"
}

func uidName(uid uint32) string {
	id := strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(id); err == nil && u.Username != "" {
		return fmt.Sprintf("%s (uid %s)", u.Username, id)
	}
	return "uid " + id
}

func pathErrCause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
