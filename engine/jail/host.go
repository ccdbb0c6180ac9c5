package jail

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// HostSupport is what the kernel offers the jail.
type HostSupport struct {
	// UserNamespaces: unprivileged user namespaces can be created.
	UserNamespaces bool
	UserNSDetail   string
	// UserNSRefused says why not, and what to do (nil when they can).
	UserNSRefused *UsernsRefused
	// Seccomp: filters with the errno action are available.
	Seccomp       bool
	SeccompDetail string
	// LandlockABI is the landlock ABI version, 0 when absent.
	LandlockABI int
}

// ProbeHost reads what the kernel supports. It changes nothing.
func ProbeHost() HostSupport { return ProbeHostAt("/", DefaultBwrap) }

// ProbeHostAt is ProbeHost reading the user namespace sysctls under root
// (a test's fake /proc/sys), for the jail's bwrap.
func ProbeHostAt(root, bwrap string) HostSupport {
	var h HostSupport
	if u := ProbeUserns(root, bwrap); u != nil {
		h.UserNSRefused = u
		h.UserNSDetail = u.Problem
	} else {
		h.UserNamespaces = true
		h.UserNSDetail = "max_user_namespaces " + strconv.Itoa(readInt(filepath.Join(root, "/proc/sys/user/max_user_namespaces")))
		if readInt(filepath.Join(root, "/proc/sys/kernel/apparmor_restrict_unprivileged_userns")) == 1 {
			h.UserNSDetail += "; AppArmor restricts unprivileged user namespaces, and a profile for bwrap is loaded"
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/seccomp/actions_avail"); err == nil {
		h.Seccomp = strings.Contains(string(b), "errno")
		h.SeccompDetail = "actions: " + strings.TrimSpace(string(b))
	} else {
		h.SeccompDetail = "no /proc/sys/kernel/seccomp/actions_avail"
	}
	// landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)
	// returns the ABI version.
	if v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(nil)), 0, 1); errno == 0 {
		h.LandlockABI = int(v)
	}
	return h
}

// readInt reads a number from a sysctl file; -1 when it is absent.
func readInt(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return -1
	}
	return n
}
