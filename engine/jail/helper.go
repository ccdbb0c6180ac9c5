package jail

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// HelperName is the small in-jail helper's file name (cmd/warden-hook).
const HelperName = "warden-hook"

// Helper is the binary a jailed hook finds as `warden` (WardenTarget).
type Helper struct {
	// Path is the host file bound at WardenTarget.
	Path string
	// Small is true when Path is warden-hook, false when it is the full
	// warden binary (no admissible warden-hook was found).
	Small bool
	// Why says, when Small is false, why: where warden-hook was looked
	// for, or why the one found was refused (Refused).
	Why     string
	Refused bool
}

// Reason is the plan row's reason for the helper.
func (h Helper) Reason() string {
	if h.Small {
		return "the warden helper (warden-hook), first on PATH"
	}
	if h.Refused {
		return "the warden helper (the full warden binary: warden-hook was refused, see warden doctor), first on PATH"
	}
	return "the warden helper (the full warden binary: " + h.Why + "), first on PATH"
}

// HelperCandidates are where warden-hook is looked for, given the warden
// binary: beside it, then in ../libexec/warden (a packager's place).
func HelperCandidates(warden string) []string {
	dir := filepath.Dir(warden)
	return []string{
		filepath.Join(dir, HelperName),
		filepath.Join(filepath.Dir(dir), "libexec", "warden", HelperName),
	}
}

// FindHelper picks the binary to bind as the jail's `warden`: warden-hook
// from HelperCandidates when one is admitted, else the warden binary
// itself, which answers the same verbs. warden is the running warden
// binary, symlinks resolved.
//
// warden-hook is admitted like bubblewrap, measured against the warden
// binary rather than against root alone, since it stands in for that
// binary: a regular file (not a symlink), executable, not group- or
// world-writable, owned by root or by the warden binary's owner (only
// root when the warden binary is root's); and every directory from it up
// to the directories the warden binary's path shares held to the same rule, so that it
// is no easier to replace than the binary it stands in for.
func FindHelper(warden string) Helper {
	full := Helper{Path: warden}
	wfi, err := os.Stat(warden)
	if err != nil {
		full.Why = "cannot stat " + warden + ": " + err.Error()
		return full
	}
	owner := wfi.Sys().(*syscall.Stat_t).Uid
	var refusals []string
	for _, cand := range HelperCandidates(warden) {
		fi, err := os.Lstat(cand)
		if err != nil {
			continue
		}
		if err := admitHelper(cand, fi, filepath.Dir(warden), owner); err != nil {
			refusals = append(refusals, err.Error())
			continue
		}
		return Helper{Path: cand, Small: true}
	}
	if len(refusals) > 0 {
		full.Why, full.Refused = refusals[0], true
	} else {
		full.Why = "no " + HelperName + " beside it"
	}
	return full
}

func admitHelper(path string, fi fs.FileInfo, wardenDir string, owner uint32) error {
	refuse := func(problem string) error { return fmt.Errorf("%s refused: %s", path, problem) }
	if fi.Mode()&fs.ModeSymlink != 0 {
		return refuse("is a symlink (install the file itself)")
	}
	if !fi.Mode().IsRegular() {
		return refuse("not a regular file")
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return refuse("not executable")
	}
	if err := ownedLikeWarden(path, fi, owner); err != nil {
		return refuse(err.Error())
	}
	// Up to the first directory the warden binary's path shares: from
	// there on the helper is as safe as warden itself.
	for dir := filepath.Dir(path); !strings.HasPrefix(wardenDir+"/", dir+"/"); dir = filepath.Dir(dir) {
		if dir == "/" || dir == "." {
			break
		}
		dfi, err := os.Lstat(dir)
		if err != nil {
			return refuse(err.Error())
		}
		if err := ownedLikeWarden(dir, dfi, owner); err != nil {
			return refuse("its directory " + err.Error())
		}
	}
	return nil
}

func ownedLikeWarden(path string, fi fs.FileInfo, owner uint32) error {
	uid := fi.Sys().(*syscall.Stat_t).Uid
	if uid != 0 && uid != owner {
		if owner == 0 {
			return fmt.Errorf("%s is owned by uid %d, not root (as the warden binary is)", path, uid)
		}
		return fmt.Errorf("%s is owned by uid %d, neither root nor the warden binary's owner (uid %d)", path, uid, owner)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s is group- or world-writable (mode %04o)", path, fi.Mode().Perm())
	}
	return nil
}
