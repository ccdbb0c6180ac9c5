package jail

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeSys makes a root holding the given files (path under root: content).
func fakeSys(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, body := range files {
		f := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

const (
	sysMaxUserns   = "proc/sys/user/max_user_namespaces"
	sysUsernsClone = "proc/sys/kernel/unprivileged_userns_clone"
	sysAppArmor    = "proc/sys/kernel/apparmor_restrict_unprivileged_userns"
	sysProfiles    = "sys/kernel/security/apparmor/profiles"
)

// ProbeUserns names the setting that refuses user namespaces, and its fix,
// read through a root a test points at a fake /proc/sys: this Debian
// kernel has no AppArmor to show the Ubuntu case for real.
func TestProbeUserns(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		cause string   // "" : not refused
		fix   []string // in the fix
	}{
		{"open", map[string]string{sysMaxUserns: "15000\n"}, "", nil},
		{"max zero", map[string]string{sysMaxUserns: "0\n"}, "user.max_user_namespaces", []string{"sysctl -w user.max_user_namespaces=15000", "container"}},
		{"debian clone off", map[string]string{sysMaxUserns: "15000\n", sysUsernsClone: "0\n"}, "kernel.unprivileged_userns_clone", []string{"sysctl -w kernel.unprivileged_userns_clone=1"}},
		{"ubuntu restricted, no profile", map[string]string{sysMaxUserns: "15000\n", sysAppArmor: "1\n", sysProfiles: "snap.lxd.lxc (enforce)\n/usr/bin/man (enforce)\n"}, "kernel.apparmor_restrict_unprivileged_userns",
			[]string{"/etc/apparmor.d/bwrap", "abi <abi/4.0>", "include <tunables/global>", "profile bwrap /{usr/bin,opt/warden/libexec}/bwrap flags=(unconfined)", "userns,", "include if exists <local/bwrap>", "apparmor_parser -r /etc/apparmor.d/bwrap"}},
		{"ubuntu restricted, profiles unreadable", map[string]string{sysMaxUserns: "15000\n", sysAppArmor: "1\n"}, "kernel.apparmor_restrict_unprivileged_userns", []string{"apparmor_parser -r"}},
		{"ubuntu restricted, bwrap profile loaded", map[string]string{sysMaxUserns: "15000\n", sysAppArmor: "1\n", sysProfiles: "bwrap (unconfined)\n/usr/bin/man (enforce)\n"}, "", nil},
		{"ubuntu unrestricted", map[string]string{sysMaxUserns: "15000\n", sysAppArmor: "0\n"}, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := fakeSys(t, tc.files)
			u := ProbeUserns(root, DefaultBwrap)
			h := ProbeHostAt(root, DefaultBwrap)
			if tc.cause == "" {
				if u != nil || !h.UserNamespaces {
					t.Fatalf("refused: %v (host %+v)", u, h)
				}
				return
			}
			if u == nil || u.Cause != tc.cause || h.UserNamespaces || h.UserNSRefused == nil {
				t.Fatalf("ProbeUserns = %+v, want cause %s (host %+v)", u, tc.cause, h)
			}
			if !strings.Contains(u.Problem, tc.cause) {
				t.Errorf("problem does not name %s: %s", tc.cause, u.Problem)
			}
			for _, want := range tc.fix {
				if !strings.Contains(u.Fix, want) {
					t.Errorf("fix lacks %q: %s", want, u.Fix)
				}
			}
		})
	}
}

// bwrap's own messages when it cannot create or map the user namespace
// become the run's one clear message; any other line is not one.
func TestUsernsFailure(t *testing.T) {
	maxZero := fakeSys(t, map[string]string{sysMaxUserns: "0\n"})
	restricted := fakeSys(t, map[string]string{sysMaxUserns: "15000\n", sysAppArmor: "1\n"})
	open := fakeSys(t, map[string]string{sysMaxUserns: "15000\n"})
	for _, tc := range []struct {
		line, root string
		want       []string // "" alone: not recognized
	}{
		{"bwrap: Creating new namespace failed: nesting depth or /proc/sys/user/max_*_namespaces exceeded (ENOSPC)", maxZero,
			[]string{"user namespaces refused", "user.max_user_namespaces is 0", "sysctl -w user.max_user_namespaces=15000", `bwrap said: "Creating new namespace failed`}},
		{"bwrap: setting up uid map: Permission denied", restricted,
			[]string{"user namespaces refused", "apparmor_restrict_unprivileged_userns is 1", "/etc/apparmor.d/bwrap", "apparmor_parser -r"}},
		{"bwrap: No permissions to create new namespace, likely because the kernel does not allow non-privileged user namespaces.", open,
			[]string{"user namespaces refused", "no setting here shows why", "seccomp"}},
		{"bwrap: Can't mount proc on /newroot/proc: Operation not permitted", maxZero, []string{""}},
		{"setting up uid map: Permission denied", maxZero, []string{""}},
		{"hello", maxZero, []string{""}},
	} {
		got := UsernsFailure(tc.line, tc.root, DefaultBwrap)
		if tc.want[0] == "" {
			if got != "" {
				t.Errorf("%q: %q, want none", tc.line, got)
			}
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%q: %q lacks %q", tc.line, got, w)
			}
		}
	}
}
