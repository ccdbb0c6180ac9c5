package jail

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The metadata supervisor of the landlock backend.
//
// Landlock has no access right for chmod, chown, utimensat by path or
// the xattr calls, so a landlock hook could change the metadata of any
// file its uid owns, anywhere (as root, a setuid-root binary).
// Denying the calls outright breaks real tools: git chmods its lock files,
// tar restores modes. So under landlock the filter hands them to the
// stage (SECCOMP_RET_USER_NOTIF), and the stage, which is outside the
// hook's Landlock domain, makes each call itself when, and only when,
// its target is beneath one of the run's writable rules:
//
//   - the target is opened by the stage (O_PATH, through the hook's own
//     cwd or dirfd in /proc), and the check and the call are both on that
//     descriptor, so the hook cannot swap the path between them;
//   - a file with more than one link is refused (a hard link into the
//     run dir could name a file outside it), as are setuid bits, a setgid
//     bit on anything but a directory, and xattrs outside "user.";
//   - the call is made on a thread that has the hook's credentials: as
//     root, every capability dropped, so the kernel's own owner checks
//     apply as they would to the hook.
//
// Anything else is refused with EPERM, the errno the hook would get from
// the filter without a supervisor.

// fdNotify is the hook process's end of the socket on which it sends its
// seccomp listener to the stage, before it execs the hook.
const fdNotify = 5

// Limits of linux/limits.h.
const (
	xattrNameMax = 255
	xattrSizeMax = 65536
)

// seccompNotif is struct seccomp_notif; seccompNotifResp is struct
// seccomp_notif_resp (linux/seccomp.h).
type seccompNotif struct {
	id    uint64
	pid   uint32
	flags uint32
	nr    int32
	arch  uint32
	ip    uint64
	args  [6]uint64
}

type seccompNotifResp struct {
	id    uint64
	val   int64
	error int32
	flags uint32
}

// installWithListener installs prog on this thread and returns the
// notification listener.
func installWithListener(prog []unix.SockFilter) (int, error) {
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	fd, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_NEW_LISTENER, uintptr(unsafe.Pointer(&fprog)))
	if errno != 0 {
		return -1, errno
	}
	return int(fd), nil
}

// sendListener hands the listener to the stage over fdNotify and closes
// both: the hook keeps neither.
func sendListener(listener int) error {
	err := unix.Sendmsg(fdNotify, []byte{0}, unix.UnixRights(listener), nil, 0)
	unix.Close(listener)
	unix.Close(fdNotify)
	return err
}

// receiveListener is the stage's side of sendListener.
func receiveListener(sock *os.File) (int, error) {
	buf, oob := make([]byte, 1), make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := unix.Recvmsg(int(sock.Fd()), buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return -1, err
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return -1, fmt.Errorf("no listener in the message (%v)", err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		return -1, fmt.Errorf("no listener in the message (%v)", err)
	}
	return fds[0], nil
}

// supervisor answers one hook's metadata calls.
type supervisor struct {
	uid, gid int // the hook's: the calls are made as it
	keep     int // the capability it keeps
	listener int
	writable []string // real paths of the writable rules
	names    map[int32]string
}

func newSupervisor(listener int, writable []string, uid, gid, keep int) *supervisor {
	s := &supervisor{uid: uid, gid: gid, keep: keep, listener: listener, names: map[int32]string{}}
	for _, w := range writable {
		s.writable = append(s.writable, realPath(w))
	}
	arch := filterArches[runtime.GOARCH]
	for _, r := range syscallTable {
		if r.landlock == supervise || r.landlock == check {
			if n := arch.nr(r); n != noNr {
				s.names[int32(n)] = r.name
			}
		}
	}
	return s
}

// serve answers notifications until the listener is gone (every process
// of the hook has exited). It locks its thread and, as root, gives that
// thread alone the hook's credentials (raw setfsuid, setfsgid and
// capset), so the kernel checks its calls as it would the hook's: the
// owner's rules for chmod and chown, and no capability but the hook's.
func (s *supervisor) serve() {
	runtime.LockOSThread() // never unlocked: the thread dies with it
	if os.Geteuid() == 0 {
		if err := s.actAsHook(); err != nil {
			fmt.Fprintf(os.Stderr, "warden: landlock jail: the supervisor cannot take the hook's credentials (%v): metadata calls are refused\n", err)
			s.refuseAll()
			return
		}
	}
	for {
		var req seccompNotif
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(s.listener), unix.SECCOMP_IOCTL_NOTIF_RECV, uintptr(unsafe.Pointer(&req)))
		switch errno {
		case 0:
		case unix.EINTR, unix.ENOENT:
			continue
		default:
			return
		}
		e := s.handle(&req)
		resp := seccompNotifResp{id: req.id}
		if e != 0 {
			resp.error = -int32(e)
		}
		unix.Syscall(unix.SYS_IOCTL, uintptr(s.listener), unix.SECCOMP_IOCTL_NOTIF_SEND, uintptr(unsafe.Pointer(&resp)))
	}
}

// actAsHook gives this (locked) thread the hook's credentials: its fsuid
// and fsgid, and the hook's capabilities only (keep for a hook run
// as another uid, none for uid 0). setfsuid comes first: it needs
// CAP_SETUID, which the capset then drops.
func (s *supervisor) actAsHook() error {
	if s.uid != 0 {
		unix.Syscall(unix.SYS_SETFSGID, uintptr(s.gid), 0, 0)
		unix.Syscall(unix.SYS_SETFSUID, uintptr(s.uid), 0, 0)
		// setfs*id returns the previous id, never an error: read back.
		if got, _, _ := unix.Syscall(unix.SYS_SETFSUID, ^uintptr(0), 0, 0); int(got) != s.uid {
			return fmt.Errorf("setfsuid %d: still %d", s.uid, got)
		}
		return keepOnly(s.keep, false)
	}
	var data [2]unix.CapUserData
	return unix.Capset(&unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}, &data[0])
}

// refuseAll answers every notification with EPERM.
func (s *supervisor) refuseAll() {
	for {
		var req seccompNotif
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(s.listener), unix.SECCOMP_IOCTL_NOTIF_RECV, uintptr(unsafe.Pointer(&req)))
		if errno != 0 && errno != unix.EINTR && errno != unix.ENOENT {
			return
		}
		resp := seccompNotifResp{id: req.id, error: -int32(unix.EPERM)}
		unix.Syscall(unix.SYS_IOCTL, uintptr(s.listener), unix.SECCOMP_IOCTL_NOTIF_SEND, uintptr(unsafe.Pointer(&resp)))
	}
}

// call is one metadata call, decoded.
type call struct {
	dirfd    int32
	path     uint64 // pointer into the hook's memory
	nofollow bool
	empty    bool // AT_EMPTY_PATH: the dirfd itself
	do       func(target string, st *unix.Stat_t) error
}

// handle decides one notification and returns the errno for the hook.
func (s *supervisor) handle(req *seccompNotif) unix.Errno {
	mem, err := os.Open("/proc/" + strconv.Itoa(int(req.pid)) + "/mem")
	if err != nil {
		return unix.EPERM
	}
	defer mem.Close()
	c, errno := s.decode(req, mem)
	if errno != 0 {
		return errno
	}
	path := ""
	if c.path != 0 {
		if path, err = readString(mem, c.path, unix.PathMax); err != nil {
			return unix.EFAULT
		}
	}
	base := "/proc/" + strconv.Itoa(int(req.pid))
	switch {
	case path == "" && c.empty:
		path = base + "/fd/" + strconv.Itoa(int(c.dirfd))
	case path == "":
		return unix.ENOENT
	case filepath.IsAbs(path):
	case c.dirfd == unix.AT_FDCWD:
		path = base + "/cwd/" + path
	default:
		path = base + "/fd/" + strconv.Itoa(int(c.dirfd)) + "/" + path
	}
	// The notification must still be the hook's call: its memory was read
	// from the pid it names (SECCOMP_IOCTL_NOTIF_ID_VALID).
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(s.listener), unix.SECCOMP_IOCTL_NOTIF_ID_VALID, uintptr(unsafe.Pointer(&req.id))); e != 0 {
		return unix.ENOENT
	}
	flags := unix.O_PATH | unix.O_CLOEXEC
	if c.nofollow {
		flags |= unix.O_NOFOLLOW
	}
	fd, err := unix.Open(path, flags, 0)
	if err != nil {
		return errnoOf(err)
	}
	defer unix.Close(fd)
	self := "/proc/self/fd/" + strconv.Itoa(fd)
	real, err := os.Readlink(self)
	if err != nil || !s.beneathWritable(real) {
		return unix.EPERM
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return errnoOf(err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR && st.Nlink > 1 {
		return unix.EPERM // a hard link could name a file outside the grant
	}
	return errnoOf(c.do(self, &st))
}

// beneathWritable: p is a writable rule's path or beneath one.
func (s *supervisor) beneathWritable(p string) bool {
	for _, w := range s.writable {
		if within(p, w) {
			return true
		}
	}
	return false
}

// decode reads the call's arguments (and, for xattrs and times, the
// memory they point to) and returns what to do with the target.
func (s *supervisor) decode(req *seccompNotif, mem *os.File) (call, unix.Errno) {
	a := req.args
	name := s.names[req.nr]
	chmod := func(mode uint64) func(string, *unix.Stat_t) error {
		return func(t string, st *unix.Stat_t) error {
			m := uint32(mode) & 0o7777
			dir := st.Mode&unix.S_IFMT == unix.S_IFDIR
			switch {
			case st.Mode&unix.S_IFMT == unix.S_IFLNK:
				return unix.EOPNOTSUPP
			case m&unix.S_ISUID != 0, m&unix.S_ISGID != 0 && !dir:
				return unix.EPERM
			}
			return unix.Chmod(t, m)
		}
	}
	chown := func(uid, gid uint64) func(string, *unix.Stat_t) error {
		return func(t string, st *unix.Stat_t) error {
			if st.Mode&unix.S_IFMT == unix.S_IFLNK {
				return unix.Lchown(t, int(int32(uid)), int(int32(gid)))
			}
			return unix.Chown(t, int(int32(uid)), int(int32(gid)))
		}
	}
	at := func(flags uint64) (nofollow, empty bool) {
		return flags&unix.AT_SYMLINK_NOFOLLOW != 0, flags&unix.AT_EMPTY_PATH != 0
	}
	switch name {
	case "chmod":
		return call{dirfd: unix.AT_FDCWD, path: a[0], do: chmod(a[1])}, 0
	case "fchmodat":
		return call{dirfd: int32(a[0]), path: a[1], do: chmod(a[2])}, 0
	case "fchmodat2":
		nf, em := at(a[3])
		return call{dirfd: int32(a[0]), path: a[1], nofollow: nf, empty: em, do: chmod(a[2])}, 0
	case "chown":
		return call{dirfd: unix.AT_FDCWD, path: a[0], do: chown(a[1], a[2])}, 0
	case "lchown":
		return call{dirfd: unix.AT_FDCWD, path: a[0], nofollow: true, do: chown(a[1], a[2])}, 0
	case "fchownat":
		nf, em := at(a[4])
		return call{dirfd: int32(a[0]), path: a[1], nofollow: nf, empty: em, do: chown(a[2], a[3])}, 0
	case "utimensat":
		var ts []unix.Timespec
		if a[2] != 0 {
			var raw [2]unix.Timespec
			b := unsafe.Slice((*byte)(unsafe.Pointer(&raw[0])), unsafe.Sizeof(raw))
			if _, err := mem.ReadAt(b, int64(a[2])); err != nil {
				return call{}, unix.EFAULT
			}
			ts = raw[:]
		}
		nf, _ := at(a[3])
		return call{dirfd: int32(a[0]), path: a[1], nofollow: nf, do: func(t string, st *unix.Stat_t) error {
			if st.Mode&unix.S_IFMT == unix.S_IFLNK {
				return unix.EPERM
			}
			var p unsafe.Pointer
			if ts != nil {
				p = unsafe.Pointer(&ts[0])
			}
			tb, err := unix.BytePtrFromString(t)
			if err != nil {
				return err
			}
			// t is absolute (/proc/self/fd/N): the dirfd is not used.
			_, _, e := unix.Syscall6(unix.SYS_UTIMENSAT, 0, uintptr(unsafe.Pointer(tb)), uintptr(p), 0, 0, 0)
			return errnoOrNil(e)
		}}, 0
	case "setxattr", "lsetxattr", "removexattr", "lremovexattr":
		attr, err := readString(mem, a[1], xattrNameMax+1)
		if err != nil {
			return call{}, unix.EFAULT
		}
		if !strings.HasPrefix(attr, "user.") {
			return call{}, unix.EPERM // security.capability, trusted.*: never a hook's
		}
		nf := strings.HasPrefix(name, "l")
		if strings.HasSuffix(name, "removexattr") {
			return call{dirfd: unix.AT_FDCWD, path: a[0], nofollow: nf, do: func(t string, st *unix.Stat_t) error {
				if st.Mode&unix.S_IFMT == unix.S_IFLNK {
					return unix.EPERM
				}
				return unix.Removexattr(t, attr)
			}}, 0
		}
		if a[3] > xattrSizeMax {
			return call{}, unix.E2BIG
		}
		val := make([]byte, a[3])
		if len(val) > 0 {
			if _, err := mem.ReadAt(val, int64(a[2])); err != nil {
				return call{}, unix.EFAULT
			}
		}
		flags := int(a[4])
		return call{dirfd: unix.AT_FDCWD, path: a[0], nofollow: nf, do: func(t string, st *unix.Stat_t) error {
			if st.Mode&unix.S_IFMT == unix.S_IFLNK {
				return unix.EPERM
			}
			return unix.Setxattr(t, attr, val, flags)
		}}, 0
	}
	return call{}, unix.EPERM
}

// readString reads a NUL-terminated string of at most max bytes at addr
// in the hook's memory.
func readString(mem *os.File, addr uint64, max int) (string, error) {
	buf := make([]byte, 0, 256)
	chunk := make([]byte, 256)
	for len(buf) < max {
		n, err := mem.ReadAt(chunk, int64(addr)+int64(len(buf)))
		if n == 0 && err != nil {
			return "", err
		}
		if i := bytes.IndexByte(chunk[:n], 0); i >= 0 {
			return string(append(buf, chunk[:i]...)), nil
		}
		buf = append(buf, chunk[:n]...)
	}
	return "", unix.ENAMETOOLONG
}

// errnoOf is err's errno (EPERM if it has none); 0 for nil.
func errnoOf(err error) unix.Errno {
	if err == nil {
		return 0
	}
	var e unix.Errno
	if errors.As(err, &e) {
		return e
	}
	return unix.EPERM
}

// errnoOrNil is e as an error, nil for 0.
func errnoOrNil(e unix.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}
