package jail

import (
	"os"
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
	// Seccomp: filters with the errno action are available.
	Seccomp       bool
	SeccompDetail string
	// LandlockABI is the landlock ABI version, 0 when absent.
	LandlockABI int
}

// ProbeHost reads what the kernel supports. It changes nothing.
func ProbeHost() HostSupport {
	var h HostSupport
	max := readInt("/proc/sys/user/max_user_namespaces")
	clone := readInt("/proc/sys/kernel/unprivileged_userns_clone") // Debian's switch; absent elsewhere
	switch {
	case max == 0:
		h.UserNSDetail = "user.max_user_namespaces is 0"
	case clone == 0:
		h.UserNSDetail = "kernel.unprivileged_userns_clone is 0"
	default:
		h.UserNamespaces = true
		h.UserNSDetail = "max_user_namespaces " + strconv.Itoa(max)
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
