// Package jail jails hook runs (docs/jail.md). Its public surface is the
// Backend interface and the Chooser that picks one per run: bwrap
// (bwrap_backend.go: bubblewrap's namespaces and mounts) or landlock
// (landlock_backend.go: a Landlock ruleset on the host's tree, for hosts
// that refuse bwrap its user namespace). Both share the mount plan
// (plan.go), the seccomp allow-list (syscalls.go), the resource limits
// (tree.go, rlimits.go, watch.go) and the check of path inputs
// (inputs.go). This file admits the bwrap binary.
//
// Importing this package makes any binary able to be the landlock stage:
// its init (landlock_stage.go) turns a process started as StageArg0 into
// the stage before main runs.
package jail

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// DefaultBwrap is where Debian's bubblewrap package puts bwrap.
const DefaultBwrap = "/usr/bin/bwrap"

// Bwrap is an admitted bubblewrap binary.
type Bwrap struct {
	Path    string
	Version string
}

// AdmissionError says why a bwrap path was refused, and how to fix it.
type AdmissionError struct {
	Path    string
	Absent  bool // the file is missing (as opposed to present but untrusted)
	Problem string
	Fix     string
}

func (e *AdmissionError) Error() string {
	return fmt.Sprintf("bubblewrap %s refused: %s; fix: %s", e.Path, e.Problem, e.Fix)
}

// AdmitBwrap holds path to the rules: absolute and never searched on PATH;
// a regular file owned by root and not group- or world-writable; every
// ancestor a root-owned directory held to the same rule. It then reads the
// version once.
func AdmitBwrap(path string) (*Bwrap, error) { return AdmitBwrapCached(path, nil) }

// AdmitBwrapCached is AdmitBwrap with the version kept in cache while the
// binary stays the same (ProbeCache).
func AdmitBwrapCached(path string, cache *ProbeCache) (*Bwrap, error) {
	if path == "" {
		path = DefaultBwrap
	}
	refuse := func(problem, fix string) (*Bwrap, error) {
		return nil, &AdmissionError{Path: path, Problem: problem, Fix: fix}
	}
	if !filepath.IsAbs(path) || filepath.Clean(path) != path {
		return refuse("not an absolute, clean path (bwrap is never searched on PATH)", "give the full path, e.g. "+DefaultBwrap)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, &AdmissionError{Path: path, Absent: true, Problem: "not found", Fix: "apt-get install bubblewrap"}
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		target, _ := filepath.EvalSymlinks(path)
		return refuse("is a symlink", "point warden at the real file "+target)
	}
	if !fi.Mode().IsRegular() {
		return refuse("not a regular file", "apt-get install --reinstall bubblewrap")
	}
	if err := rootOwnedNotWritable(path, fi); err != nil {
		return refuse(err.Error(), fmt.Sprintf("chown root:root %s && chmod go-w %s (or apt-get install --reinstall bubblewrap)", path, path))
	}
	for dir := filepath.Dir(path); ; dir = filepath.Dir(dir) {
		dfi, err := os.Lstat(dir)
		if err != nil {
			return refuse("ancestor "+dir+": "+err.Error(), "check the path")
		}
		if dfi.Mode()&fs.ModeSymlink != 0 {
			// /bin -> usr/bin style links on merged-usr systems are fine only if root's.
			if st := dfi.Sys().(*syscall.Stat_t); st.Uid != 0 {
				return refuse("ancestor "+dir+" is a symlink not owned by root", "use a path under root-owned directories")
			}
		} else if err := rootOwnedNotWritable(dir, dfi); err != nil {
			fix := "chmod go-w " + dir
			switch {
			case dfi.Mode()&fs.ModeSticky != 0 && dfi.Mode().Perm()&0o002 != 0,
				dfi.Sys().(*syscall.Stat_t).Uid != 0:
				// A shared scratch dir such as /tmp, or a dir that is a
				// user's: taking it over (or closing it) would break what
				// else lives there, so the way out is another place.
				fix = "install bubblewrap under root-owned directories (apt-get install bubblewrap puts it at /usr/bin/bwrap), not under " + dir
			}
			return refuse("ancestor "+err.Error(), fix)
		}
		if dir == "/" {
			break
		}
	}
	id, haveID := binaryID(path)
	if e, ok := cache.get("version|" + id); ok && haveID && e.Version != "" {
		return &Bwrap{Path: path, Version: e.Version}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").Output()
	if err != nil {
		return refuse("`"+path+" --version` failed: "+err.Error(), "apt-get install --reinstall bubblewrap")
	}
	b := &Bwrap{Path: path, Version: strings.TrimSpace(string(bytes.TrimPrefix(out, []byte("bubblewrap "))))}
	if haveID && b.Version != "" {
		cache.put(probeEntry{Key: "version|" + id, Version: b.Version})
	}
	return b, nil
}

func rootOwnedNotWritable(path string, fi fs.FileInfo) error {
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid != 0 {
		return fmt.Errorf("%s is owned by uid %d, not root", path, st.Uid)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s is group- or world-writable (mode %04o)", path, fi.Mode().Perm())
	}
	return nil
}
