package jail

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// UsernsRefused says why this host refuses the jail an unprivileged user
// namespace, and what to do. Every jailed run needs one: the hook's bwrap
// (the inner one, as root) creates it, as an unprivileged uid.
type UsernsRefused struct {
	// Cause is the setting that refuses: "user.max_user_namespaces",
	// "kernel.unprivileged_userns_clone" or
	// "kernel.apparmor_restrict_unprivileged_userns".
	Cause   string
	Problem string // what happened, for the operator
	Fix     string // what to do
}

func (u *UsernsRefused) Error() string {
	return "user namespaces refused, so the jail cannot start: " + u.Problem + ". Fix: " + u.Fix
}

// ProbeUserns reads the sysctls that refuse unprivileged user namespaces
// under root ("/" on a real host; a test points it at a fake /proc/sys).
// bwrap is the bwrap the jail runs, named in the AppArmor fix. nil: none
// refuses (the kernel may still, for reasons no file shows: the run-time
// message covers that, see UsernsFailure).
func ProbeUserns(root, bwrap string) *UsernsRefused {
	if root == "" {
		root = "/"
	}
	if bwrap == "" {
		bwrap = DefaultBwrap
	}
	at := func(p string) string { return filepath.Join(root, p) }
	if readInt(at("/proc/sys/user/max_user_namespaces")) == 0 {
		return &UsernsRefused{Cause: "user.max_user_namespaces",
			Problem: "user.max_user_namespaces is 0 (/proc/sys/user/max_user_namespaces): no process here may create a user namespace",
			Fix:     "jail auto runs hooks under landlock meanwhile, where the kernel has it; turning user namespaces on for bwrap widens what every unprivileged user here may ask of the kernel, so do it only if you want that trade: as root: sysctl -w user.max_user_namespaces=15000, and a file in /etc/sysctl.d/ to keep it. The value is per user namespace: in a container with one of its own (rootless Podman, Docker with userns-remap, LXC), 0 is the container's setting: raise it there, as the container's root, or have the container started without it"}
	}
	if readInt(at("/proc/sys/kernel/unprivileged_userns_clone")) == 0 { // Debian's switch; absent elsewhere
		return &UsernsRefused{Cause: "kernel.unprivileged_userns_clone",
			Problem: "kernel.unprivileged_userns_clone is 0 (/proc/sys/kernel/unprivileged_userns_clone): unprivileged users may not create user namespaces",
			Fix:     "jail auto runs hooks under landlock meanwhile, where the kernel has it; turning user namespaces on for bwrap widens what every unprivileged user here may ask of the kernel, so do it only if you want that trade: as root: sysctl -w kernel.unprivileged_userns_clone=1, and a file in /etc/sysctl.d/ to keep it"}
	}
	if readInt(at("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")) == 1 {
		if p := apparmorProfileFor(at("/sys/kernel/security/apparmor/profiles"), bwrap); p != "" {
			return nil // a profile for bwrap is loaded; it is the operator's to grant userns
		}
		return &UsernsRefused{Cause: "kernel.apparmor_restrict_unprivileged_userns",
			Problem: "kernel.apparmor_restrict_unprivileged_userns is 1 (Ubuntu 23.10 and later) and no AppArmor profile for bwrap is loaded: bwrap gets a user namespace without the right to map a uid in it (it says \"setting up uid map: Permission denied\")",
			Fix:     AppArmorFix(bwrap)}
	}
	return nil
}

// AppArmorFix is how to give bwrap the AppArmor profile that lets it
// create user namespaces. The profile attaches to bwrap's path and, for
// warden as root, to the copy the outer jail layer execs it from
// (innerBwrap): AppArmor attaches by the path seen where it is exec'd.
func AppArmorFix(bwrap string) string {
	attach := bwrap
	if dir, base := filepath.Split(bwrap); base == filepath.Base(innerBwrap) {
		attach = "/{" + strings.Trim(dir, "/") + "," + strings.TrimPrefix(filepath.Dir(innerBwrap), "/") + "}/" + base
	}
	return "as root, write /etc/apparmor.d/bwrap with:  abi <abi/4.0>, include <tunables/global> profile bwrap " + attach +
		" flags=(unconfined) { userns, include if exists <local/bwrap> }  (one statement a line), then load it: apparmor_parser -r /etc/apparmor.d/bwrap"
}

// apparmorProfileFor names a loaded AppArmor profile that attaches to
// bwrap ("bwrap", or one named for its path), or "".
func apparmorProfileFor(profiles, bwrap string) string {
	f, err := os.Open(profiles)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "name (mode)"
		name, _, _ := strings.Cut(sc.Text(), " (")
		if name == "bwrap" || name == bwrap || name == filepath.Base(bwrap) {
			return name
		}
	}
	return ""
}

// UsernsFailure recognizes bwrap's own message when it could not create
// or map the jail's user namespace (a line of the run's stderr, before the
// hook started), and returns the message a run fails with: the cause
// found under root, or, when no setting shows one, what bwrap said and
// where to look. "" when line is not such a message.
func UsernsFailure(line, root, bwrap string) string {
	msg, ok := strings.CutPrefix(line, "bwrap: ")
	if !ok {
		return ""
	}
	for _, p := range []string{
		"Creating new namespace failed",          // ENOSPC (max_user_namespaces), EINVAL
		"No permissions to create new namespace", // EPERM (userns_clone, a seccomp filter)
		"setting up uid map",                     // AppArmor's restriction
		"setting up gid map",
	} {
		if strings.HasPrefix(msg, p) {
			if u := ProbeUserns(root, bwrap); u != nil {
				return u.Error() + " (bwrap said: " + strconv.Quote(msg) + ")"
			}
			return "user namespaces refused, so the jail cannot start (bwrap said: " + strconv.Quote(msg) + "), and no setting here shows why. In a container, its seccomp profile may refuse them (Docker's default does, without CAP_SYS_ADMIN): start it with a profile that allows clone and unshare with CLONE_NEWUSER. `warden doctor` and docs/jail.md (\"User namespaces\") say more"
		}
	}
	return ""
}
