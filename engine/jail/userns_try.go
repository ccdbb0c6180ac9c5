package jail

import (
	"errors"
	"os/exec"
	"sync"
	"syscall"
)

// TryUserns makes what every bwrap jail starts with, a child in a user
// namespace of its own, and says why it failed (nil: it worked). No file
// shows every refusal: a container's seccomp profile (Docker's default)
// fails clone(CLONE_NEWUSER) with EPERM while every sysctl says yes.
// The child is bwrap --version, run as nobody in the new namespace. The
// answer is kept for the life of the process (it costs a fork and an
// exec, and a host does not change it under a running engine).
func TryUserns(bwrap string) *UsernsRefused { return TryUsernsCached(bwrap, nil) }

// TryUsernsCached is TryUserns with the answer also kept in cache, for
// other processes, while bwrap, the boot, the user namespace and the uid
// stay the same (ProbeCache).
func TryUsernsCached(bwrap string, cache *ProbeCache) *UsernsRefused {
	usernsTries.Lock()
	defer usernsTries.Unlock()
	if r, ok := usernsTries.m[bwrap]; ok {
		return r
	}
	key, haveKey := usernsKey(bwrap)
	if e, ok := cache.get(key); ok && haveKey {
		if usernsTries.m == nil {
			usernsTries.m = map[string]*UsernsRefused{}
		}
		usernsTries.m[bwrap] = e.Userns
		return e.Userns
	}
	var refused *UsernsRefused
	cmd := exec.Command(bwrap, "--version")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER}
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) { // the clone or the exec failed, not bwrap
			refused = &UsernsRefused{Cause: "clone(CLONE_NEWUSER)",
				Problem: "creating a user namespace failed here (" + err.Error() + ") though no sysctl refuses one: a seccomp profile or a security module does, as a container's usually does (Docker's default profile, without CAP_SYS_ADMIN)",
				Fix:     "start the container with a seccomp profile that allows clone and unshare with CLONE_NEWUSER, or let warden use the landlock backend (jail: auto, the default, does)"}
		}
	}
	if usernsTries.m == nil {
		usernsTries.m = map[string]*UsernsRefused{}
	}
	usernsTries.m[bwrap] = refused
	if haveKey {
		cache.put(probeEntry{Key: key, Userns: refused})
	}
	return refused
}

var usernsTries struct {
	sync.Mutex
	m map[string]*UsernsRefused
}
