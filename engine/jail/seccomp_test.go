package jail

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ---------------------------------------------------------------------
// Unit tests: decode the bytes SeccompFilter returns and run them through
// a small classic-BPF interpreter, so every branch (including the foreign
// arch kill, which a Go probe cannot trigger in the kernel) is checked.

type seccompData struct {
	nr   uint32
	arch uint32
	args [6]uint64
}

func (d seccompData) word(off uint32) (uint32, error) {
	var buf [64]byte
	binary.LittleEndian.PutUint32(buf[0:], d.nr)
	binary.LittleEndian.PutUint32(buf[4:], d.arch)
	for i, a := range d.args {
		binary.LittleEndian.PutUint64(buf[16+8*i:], a)
	}
	if off%4 != 0 || off+4 > uint32(len(buf)) {
		return 0, fmt.Errorf("bad load offset %d", off)
	}
	return binary.LittleEndian.Uint32(buf[off:]), nil
}

func decodeFilter(t *testing.T, b []byte) []unix.SockFilter {
	t.Helper()
	if len(b) == 0 || len(b)%8 != 0 {
		t.Fatalf("filter is %d bytes, want a non-empty multiple of 8", len(b))
	}
	prog := make([]unix.SockFilter, len(b)/8)
	for i := range prog {
		p := b[8*i:]
		prog[i] = unix.SockFilter{
			Code: binary.NativeEndian.Uint16(p[0:]),
			Jt:   p[2],
			Jf:   p[3],
			K:    binary.NativeEndian.Uint32(p[4:]),
		}
	}
	return prog
}

// runFilter interprets the subset of classic BPF the filter uses, with
// the same rules the kernel's checker enforces (forward jumps in range,
// every path ends in RET).
func runFilter(prog []unix.SockFilter, d seccompData) (uint32, error) {
	var acc uint32
	for pc := 0; pc < len(prog); pc++ {
		ins := prog[pc]
		switch ins.Code {
		case unix.BPF_LD | unix.BPF_W | unix.BPF_ABS:
			w, err := d.word(ins.K)
			if err != nil {
				return 0, err
			}
			acc = w
		case unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K,
			unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K,
			unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K:
			var cond bool
			switch ins.Code &^ (unix.BPF_JMP | unix.BPF_K) {
			case unix.BPF_JEQ:
				cond = acc == ins.K
			case unix.BPF_JGE:
				cond = acc >= ins.K
			case unix.BPF_JSET:
				cond = acc&ins.K != 0
			}
			if cond {
				pc += int(ins.Jt)
			} else {
				pc += int(ins.Jf)
			}
			if pc+1 >= len(prog) {
				return 0, fmt.Errorf("jump past end at %d", pc)
			}
		case unix.BPF_ALU | unix.BPF_AND | unix.BPF_K:
			acc &= ins.K
		case unix.BPF_RET | unix.BPF_K:
			return ins.K, nil
		default:
			return 0, fmt.Errorf("unexpected opcode %#x at %d", ins.Code, pc)
		}
	}
	return 0, errors.New("fell off the end of the program")
}

func TestSeccompFilterDecisions(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		if _, err := SeccompFilter(false); err == nil {
			t.Fatal("SeccompFilter succeeded on a non-x86_64 GOARCH")
		}
		t.Skip("the filter is x86_64-only")
	}
	progs := map[bool][]unix.SockFilter{}
	for _, network := range []bool{false, true} {
		b, err := SeccompFilter(network)
		if err != nil {
			t.Fatal(err)
		}
		progs[network] = decodeFilter(t, b)
	}
	if len(progs[false]) == len(progs[true]) {
		t.Fatal("network=true produced the same program length as network=false")
	}

	const (
		allow  = retAllow
		eperm  = retEPERM
		enosys = retENOSYS
		kill   = retKillProcess
		x86    = auditArchX86_64
		i386   = 0x40000003 // AUDIT_ARCH_I386
	)
	type tc struct {
		name    string
		network bool
		d       seccompData
		want    uint32
	}
	cases := []tc{
		{"read", false, seccompData{nr: 0, arch: x86}, allow},
		{"getpid", false, seccompData{nr: 39, arch: x86}, allow},
		{"i386 getpid is killed", false, seccompData{nr: 20, arch: i386}, kill},
		{"i386 ptrace is killed", true, seccompData{nr: 26, arch: i386}, kill},
		{"x32 getpid", false, seccompData{nr: x32SyscallBit | 39, arch: x86}, eperm},
		{"x32 ioctl", true, seccompData{nr: x32SyscallBit | 514, arch: x86}, eperm},
		{"nr -1", false, seccompData{nr: 0xffffffff, arch: x86}, eperm},
		{"ioctl TIOCSTI", false, seccompData{nr: sysIoctl, arch: x86, args: [6]uint64{0, tiocsti}}, eperm},
		{"ioctl TIOCSTI high bits", true, seccompData{nr: sysIoctl, arch: x86, args: [6]uint64{0, 0xdead00000000 | tiocsti}}, eperm},
		{"ioctl TIOCLINUX", false, seccompData{nr: sysIoctl, arch: x86, args: [6]uint64{0, tioclinux}}, eperm},
		{"ioctl TCGETS", false, seccompData{nr: sysIoctl, arch: x86, args: [6]uint64{0, unix.TCGETS}}, allow},
		{"ioctl fd == TIOCSTI", false, seccompData{nr: sysIoctl, arch: x86, args: [6]uint64{tiocsti, unix.TCGETS}}, allow},
		{"socket AF_UNIX", false, seccompData{nr: sysSocket, arch: x86, args: [6]uint64{afUnix}}, allow},
		{"socket AF_INET", false, seccompData{nr: sysSocket, arch: x86, args: [6]uint64{afInet}}, eperm},
		{"socket AF_INET6", false, seccompData{nr: sysSocket, arch: x86, args: [6]uint64{afInet6}}, eperm},
		{"socket AF_INET high bits", false, seccompData{nr: sysSocket, arch: x86, args: [6]uint64{1<<32 | afInet}}, eperm},
		{"socket AF_NETLINK", false, seccompData{nr: sysSocket, arch: x86, args: [6]uint64{unix.AF_NETLINK}}, eperm},
		{"socket AF_UNIX net", true, seccompData{nr: sysSocket, arch: x86, args: [6]uint64{afUnix}}, allow},
		{"socket AF_INET net", true, seccompData{nr: sysSocket, arch: x86, args: [6]uint64{afInet}}, allow},
		{"socket AF_INET6 net", true, seccompData{nr: sysSocket, arch: x86, args: [6]uint64{afInet6}}, allow},
		{"socket AF_NETLINK net", true, seccompData{nr: sysSocket, arch: x86, args: [6]uint64{unix.AF_NETLINK}}, eperm},
		{"socket AF_PACKET net", true, seccompData{nr: sysSocket, arch: x86, args: [6]uint64{unix.AF_PACKET}}, eperm},
		{"socketpair AF_UNIX", false, seccompData{nr: sysSocketpair, arch: x86, args: [6]uint64{afUnix}}, allow},
		{"socketpair AF_INET", false, seccompData{nr: sysSocketpair, arch: x86, args: [6]uint64{afInet}}, eperm},
		{"socketpair AF_INET net", true, seccompData{nr: sysSocketpair, arch: x86, args: [6]uint64{afInet}}, allow},
		{"clone thread", false, seccompData{nr: sysClone, arch: x86, args: [6]uint64{unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND | unix.CLONE_SYSVSEM | unix.CLONE_THREAD | unix.CLONE_SETTLS | unix.CLONE_PARENT_SETTID | unix.CLONE_CHILD_CLEARTID}}, allow},
		{"clone vfork", false, seccompData{nr: sysClone, arch: x86, args: [6]uint64{unix.CLONE_VFORK | unix.CLONE_VM | uint64(unix.SIGCHLD)}}, allow},
		{"clone NEWUSER", false, seccompData{nr: sysClone, arch: x86, args: [6]uint64{unix.CLONE_NEWUSER | uint64(unix.SIGCHLD)}}, eperm},
		{"clone NEWNS", true, seccompData{nr: sysClone, arch: x86, args: [6]uint64{unix.CLONE_NEWNS}}, eperm},
		{"clone NEWNET", true, seccompData{nr: sysClone, arch: x86, args: [6]uint64{unix.CLONE_NEWNET}}, eperm},
		{"clone3", false, seccompData{nr: sysClone3, arch: x86}, enosys},
	}
	for _, s := range deniedSyscalls {
		for _, network := range []bool{false, true} {
			cases = append(cases, tc{s.name, network, seccompData{nr: s.nr, arch: x86}, eperm})
		}
	}
	for _, c := range cases {
		got, err := runFilter(progs[c.network], c.d)
		if err != nil {
			t.Errorf("%s (network=%v): %v", c.name, c.network, err)
			continue
		}
		if got != c.want {
			t.Errorf("%s (network=%v): filter returned %#x, want %#x", c.name, c.network, got, c.want)
		}
	}
}

// The hard-coded x86_64 numbers must agree with x/sys on amd64.
func TestSeccompSyscallNumbers(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("syscall numbers are x86_64's")
	}
	want := map[string]uint32{
		"ptrace": unix.SYS_PTRACE, "mount": unix.SYS_MOUNT, "umount2": unix.SYS_UMOUNT2,
		"pivot_root": unix.SYS_PIVOT_ROOT, "chroot": unix.SYS_CHROOT, "unshare": unix.SYS_UNSHARE,
		"setns": unix.SYS_SETNS, "keyctl": unix.SYS_KEYCTL, "add_key": unix.SYS_ADD_KEY,
		"request_key": unix.SYS_REQUEST_KEY, "bpf": unix.SYS_BPF, "perf_event_open": unix.SYS_PERF_EVENT_OPEN,
		"kexec_load": unix.SYS_KEXEC_LOAD, "kexec_file_load": unix.SYS_KEXEC_FILE_LOAD,
		"init_module": unix.SYS_INIT_MODULE, "finit_module": unix.SYS_FINIT_MODULE,
		"delete_module": unix.SYS_DELETE_MODULE, "open_by_handle_at": unix.SYS_OPEN_BY_HANDLE_AT,
		"userfaultfd": unix.SYS_USERFAULTFD, "open_tree": unix.SYS_OPEN_TREE, "move_mount": unix.SYS_MOVE_MOUNT,
		"fsopen": unix.SYS_FSOPEN, "fsconfig": unix.SYS_FSCONFIG, "fsmount": unix.SYS_FSMOUNT,
		"fspick": unix.SYS_FSPICK, "mount_setattr": unix.SYS_MOUNT_SETATTR,
		"io_uring_setup": unix.SYS_IO_URING_SETUP, "io_uring_enter": unix.SYS_IO_URING_ENTER,
		"io_uring_register": unix.SYS_IO_URING_REGISTER,
	}
	if len(want) != len(deniedSyscalls) {
		t.Errorf("deniedSyscalls has %d entries, the check table %d", len(deniedSyscalls), len(want))
	}
	for _, s := range deniedSyscalls {
		if w, ok := want[s.name]; !ok || w != s.nr {
			t.Errorf("%s = %d, x/sys says %d (known: %v)", s.name, s.nr, w, ok)
		}
	}
	for name, pair := range map[string][2]uint32{
		"ioctl": {sysIoctl, unix.SYS_IOCTL}, "socket": {sysSocket, unix.SYS_SOCKET},
		"socketpair": {sysSocketpair, unix.SYS_SOCKETPAIR}, "clone": {sysClone, unix.SYS_CLONE},
		"clone3": {sysClone3, unix.SYS_CLONE3},
	} {
		if pair[0] != pair[1] {
			t.Errorf("%s = %d, x/sys says %d", name, pair[0], pair[1])
		}
	}
	if unix.TIOCSTI != tiocsti || unix.TIOCLINUX != tioclinux {
		t.Errorf("TIOCSTI/TIOCLINUX constants disagree with x/sys")
	}
	ns := unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
		unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET
	if ns != cloneNewNamespaces {
		t.Errorf("cloneNewNamespaces = %#x, want %#x", cloneNewNamespaces, ns)
	}
}

func TestSeccompFile(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the filter is x86_64-only")
	}
	for _, network := range []bool{false, true} {
		want, err := SeccompFilter(network)
		if err != nil {
			t.Fatal(err)
		}
		f, err := SeccompFile(network)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte("x")); err == nil {
			t.Errorf("network=%v: SeccompFile is writable", network)
		}
		got, err := io.ReadAll(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("network=%v: SeccompFile holds %d bytes differing from SeccompFilter's %d", network, len(got), len(want))
		}
	}
	// The pipe fallback holds the same bytes.
	want, _ := SeccompFilter(false)
	p, err := seccompPipe(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(p)
	p.Close()
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("pipe fallback: %v, equal=%v", err, bytes.Equal(got, want))
	}
}

// ---------------------------------------------------------------------
// Integration tests: the real kernel, through bubblewrap. The test binary
// re-executes itself inside bwrap as a probe (TestSeccompProbeHelper)
// that makes one kind of syscall and prints the outcome.

const seccompProbeEnv = "WARDEN_SECCOMP_PROBE"

// probePath is where the test binary is bound inside the sandbox.
const probePath = "/tmp/.warden-probe/jail.test"

// TestSeccompProbeHelper is not a test: it is the probe run inside bwrap.
func TestSeccompProbeHelper(t *testing.T) {
	name := os.Getenv(seccompProbeEnv)
	if name == "" {
		return
	}
	for _, line := range seccompProbe(name) {
		fmt.Println(line)
	}
	os.Exit(0)
}

func errnoResult(err error) string {
	if err == nil {
		return "OK"
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		if n := unix.ErrnoName(e); n != "" {
			return n
		}
	}
	return "ERROR(" + err.Error() + ")"
}

func sysResult(e syscall.Errno) string {
	if e == 0 {
		return "OK"
	}
	return errnoResult(e)
}

func cstr(s string) uintptr {
	p, err := unix.BytePtrFromString(s)
	if err != nil {
		panic(err)
	}
	return uintptr(unsafe.Pointer(p))
}

// ptyIoctl opens a pty pair, makes the slave this session's controlling
// terminal (so that, unfiltered, TIOCSTI is permitted and succeeds or
// fails with EIO under dev.tty.legacy_tiocsti=0, never EPERM), and issues
// ioctl(slave, req, &byte).
func ptyIoctl(req uintptr) string {
	// Closing the master of our controlling terminal hangs it up, which
	// would SIGHUP this process before it reports.
	signal.Ignore(syscall.SIGHUP)
	_, _ = unix.Setsid()
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "SETUP(open /dev/ptmx: " + err.Error() + ")"
	}
	defer unix.Close(m)
	if err := unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0); err != nil {
		return "SETUP(unlockpt: " + err.Error() + ")"
	}
	s, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(m), unix.TIOCGPTPEER, unix.O_RDWR|unix.O_CLOEXEC)
	if e != 0 {
		return "SETUP(TIOCGPTPEER: " + e.Error() + ")"
	}
	defer unix.Close(int(s))
	if err := unix.IoctlSetInt(int(s), unix.TIOCSCTTY, 0); err != nil {
		return "SETUP(TIOCSCTTY: " + err.Error() + ")"
	}
	b := byte('x')
	if req == tioclinux {
		b = 12 // TIOCL_GETKMSGREDIRECT: harmless query
	}
	_, _, e = unix.Syscall(unix.SYS_IOCTL, s, req, uintptr(unsafe.Pointer(&b)))
	return sysResult(e)
}

func socketProbe(sys, domain, typ, proto uintptr) string {
	if sys == unix.SYS_SOCKETPAIR {
		var fds [2]int32
		_, _, e := unix.RawSyscall6(sys, domain, typ, proto, uintptr(unsafe.Pointer(&fds)), 0, 0)
		if e == 0 {
			unix.Close(int(fds[0]))
			unix.Close(int(fds[1]))
		}
		return sysResult(e)
	}
	fd, _, e := unix.RawSyscall(sys, domain, typ, proto)
	if e == 0 {
		unix.Close(int(fd))
	}
	return sysResult(e)
}

func ordinaryProbe() error {
	if err := os.WriteFile("/tmp/warden-probe.txt", []byte("hello"), 0o600); err != nil {
		return err
	}
	if b, err := os.ReadFile("/tmp/warden-probe.txt"); err != nil || string(b) != "hello" {
		return fmt.Errorf("read back /tmp file: %q, %v", b, err)
	}
	if _, err := os.ReadFile("/etc/hostname"); err != nil {
		return err
	}
	if err := exec.Command("/bin/true").Run(); err != nil {
		return fmt.Errorf("/bin/true: %w", err)
	}
	// dash forks via glibc, a pipe, a second process.
	out, err := exec.Command("/bin/sh", "-c", "echo piped | /bin/cat").Output()
	if err != nil || string(out) != "piped\n" {
		return fmt.Errorf("/bin/sh pipeline: %q, %w", out, err)
	}
	// An allowed ioctl on a pty (tcgetattr) still works.
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(m)
	if _, err := unix.IoctlGetTermios(m, unix.TCGETS); err != nil {
		return fmt.Errorf("TCGETS: %w", err)
	}
	return nil
}

// seccompProbe runs inside the sandbox and returns "key=value" lines;
// single-syscall probes report under "result".
func seccompProbe(name string) []string {
	r := func(v string) []string { return []string{"result=" + v} }
	switch name {
	case "ptrace":
		// A pid that cannot exist: ESRCH unfiltered.
		_, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_ATTACH, 0x3ffffff0, 0, 0, 0, 0)
		return r(sysResult(e))
	case "mount":
		// fstype is a bad pointer: EFAULT unfiltered (checked before privilege).
		_, _, e := unix.Syscall6(unix.SYS_MOUNT, cstr("none"), cstr("/tmp"), 1, 0, 0, 0)
		return r(sysResult(e))
	case "umount2":
		// Unknown flag: EINVAL unfiltered.
		_, _, e := unix.Syscall(unix.SYS_UMOUNT2, cstr("/tmp"), 0x100, 0)
		return r(sysResult(e))
	case "unshare":
		_, _, e := unix.Syscall(unix.SYS_UNSHARE, unix.CLONE_NEWUSER, 0, 0)
		return r(sysResult(e))
	case "setns":
		_, _, e := unix.Syscall(unix.SYS_SETNS, ^uintptr(0), 0, 0) // fd -1: EBADF unfiltered
		return r(sysResult(e))
	case "chroot":
		_, _, e := unix.Syscall(unix.SYS_CHROOT, cstr("/nonexistent-warden-probe"), 0, 0)
		return r(sysResult(e))
	case "keyctl":
		_, _, e := unix.Syscall(unix.SYS_KEYCTL, 9999, 0, 0) // EOPNOTSUPP unfiltered
		return r(sysResult(e))
	case "add_key":
		_, _, e := unix.Syscall6(unix.SYS_ADD_KEY, 1, 1, 0, 0, 0, 0) // EFAULT unfiltered
		return r(sysResult(e))
	case "bpf":
		_, _, e := unix.Syscall(unix.SYS_BPF, 9999, 0, 0)
		return r(sysResult(e))
	case "perf_event_open":
		_, _, e := unix.Syscall6(unix.SYS_PERF_EVENT_OPEN, 0, 0, ^uintptr(0), ^uintptr(0), 0, 0) // EFAULT
		return r(sysResult(e))
	case "io_uring_setup":
		_, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, 1, 0, 0) // EFAULT unfiltered
		return r(sysResult(e))
	case "denied-table":
		// Every unconditionally denied syscall, with zeroed arguments
		// (ptrace skipped: ptrace(0) is PTRACE_TRACEME). Only run filtered.
		var out []string
		for _, s := range deniedSyscalls {
			if s.name == "ptrace" {
				continue
			}
			_, _, e := unix.Syscall6(uintptr(s.nr), 0, 0, 0, 0, 0, 0)
			out = append(out, s.name+"="+sysResult(e))
		}
		return out
	case "socket-unix":
		return r(socketProbe(unix.SYS_SOCKET, unix.AF_UNIX, unix.SOCK_STREAM, 0))
	case "socket-inet":
		return r(socketProbe(unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_STREAM, 0))
	case "socket-inet-hibits":
		// The kernel truncates domain to int: this is AF_INET.
		return r(socketProbe(unix.SYS_SOCKET, 1<<32|unix.AF_INET, unix.SOCK_STREAM, 0))
	case "socket-inet6":
		return r(socketProbe(unix.SYS_SOCKET, unix.AF_INET6, unix.SOCK_STREAM, 0))
	case "socket-netlink":
		return r(socketProbe(unix.SYS_SOCKET, unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE))
	case "socketpair-unix":
		return r(socketProbe(unix.SYS_SOCKETPAIR, unix.AF_UNIX, unix.SOCK_STREAM, 0))
	case "socketpair-inet":
		return r(socketProbe(unix.SYS_SOCKETPAIR, unix.AF_INET, unix.SOCK_STREAM, 0)) // EOPNOTSUPP unfiltered
	case "tiocsti":
		return r(ptyIoctl(unix.TIOCSTI))
	case "tiocsti-hibits":
		// The kernel truncates cmd to unsigned int: this is TIOCSTI.
		return r(ptyIoctl(1<<32 | unix.TIOCSTI))
	case "tioclinux":
		return r(ptyIoctl(unix.TIOCLINUX)) // ENOTTY unfiltered on a pty
	case "x32-getpid":
		_, _, e := unix.RawSyscall(x32SyscallBit|unix.SYS_GETPID, 0, 0, 0)
		return r(sysResult(e))
	case "clone3":
		_, _, e := unix.RawSyscall(unix.SYS_CLONE3, 0, 0, 0) // EINVAL unfiltered
		return r(sysResult(e))
	case "clone-newuser":
		cmd := exec.Command("/bin/true")
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER}
		return r(errnoResult(cmd.Run()))
	case "ordinary":
		return r(errnoResult(ordinaryProbe()))
	}
	return r("UNKNOWN-PROBE")
}

// seccompBwrap finds bubblewrap: a CI run must have it, elsewhere its
// absence skips the kernel tests.
func seccompBwrap(t *testing.T) string {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		t.Skip("the filter is x86_64-only")
	}
	if _, err := os.Stat(DefaultBwrap); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but bubblewrap is not usable at %s: %v", DefaultBwrap, err)
		}
		t.Skipf("bubblewrap not installed at %s (%v); install it to run the seccomp kernel tests", DefaultBwrap, err)
	}
	return DefaultBwrap
}

// runSeccompProbe runs probe in bwrap; seccomp=false runs the same probe
// without the filter (the control). It returns the probe's key=value map.
func runSeccompProbe(t *testing.T, bwrap, probe string, seccomp, network bool) map[string]string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--unshare-all"}
	if network {
		args = append(args, "--share-net")
	}
	args = append(args,
		// An unprivileged uid with no capabilities, as a hook runs
		// (docs/jail.md), so denials come from seccomp, not from
		// missing privilege, and the unfiltered control runs are harmless.
		"--unshare-user", "--uid", "65534", "--gid", "65534",
		"--die-with-parent",
		"--ro-bind", "/", "/",
		"--dev", "/dev",
		"--proc", "/proc",
		"--tmpfs", "/tmp",
		"--ro-bind", exe, probePath,
	)
	var files []*os.File
	if seccomp {
		f, err := SeccompFile(network)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		files = append(files, f) // fd 3 in bwrap
		args = append(args, "--seccomp", "3")
	}
	args = append(args, "--", probePath, "-test.run=^TestSeccompProbeHelper$")

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bwrap, args...)
	// Under -race the probe would otherwise sleep 1s at exit (tsan's
	// atexit_sleep_ms); later GORACE options win, earlier ones are kept.
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	cmd.Env = append(os.Environ(), seccompProbeEnv+"="+probe, "GORACE="+gorace)
	cmd.ExtraFiles = files
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("bwrap probe %s (seccomp=%v network=%v): %v\nstdout:\n%s\nstderr:\n%s",
			probe, seccomp, network, err, stdout.String(), stderr.String())
	}
	res := map[string]string{}
	for _, line := range strings.Split(stdout.String(), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			res[k] = v
		}
	}
	if len(res) == 0 {
		t.Fatalf("bwrap probe %s printed no result\nstdout:\n%s\nstderr:\n%s", probe, stdout.String(), stderr.String())
	}
	return res
}

func TestSeccompInBwrap(t *testing.T) {
	bwrap := seccompBwrap(t)
	cases := []struct {
		probe   string
		network bool
		want    string // exact filtered result, if set
		wantNot string // filtered result must differ from this, if set
		control bool   // unfiltered, the result must differ from want
	}{
		{probe: "ptrace", want: "EPERM", control: true},
		{probe: "mount", want: "EPERM", control: true},
		{probe: "umount2", want: "EPERM", control: true},
		{probe: "unshare", want: "EPERM", control: true},
		{probe: "setns", want: "EPERM", control: true},
		{probe: "chroot", want: "EPERM", control: true},
		{probe: "keyctl", want: "EPERM", control: true},
		{probe: "add_key", want: "EPERM", control: true},
		{probe: "bpf", want: "EPERM", control: true},
		{probe: "perf_event_open", want: "EPERM", control: true},
		{probe: "io_uring_setup", want: "EPERM", control: true},
		{probe: "socket-inet", want: "EPERM", control: true},
		{probe: "socket-inet-hibits", want: "EPERM", control: true},
		{probe: "socket-inet6", want: "EPERM", control: true},
		{probe: "socket-netlink", network: true, want: "EPERM", control: true},
		{probe: "socketpair-inet", want: "EPERM", control: true},
		{probe: "tiocsti", want: "EPERM", control: true},
		{probe: "tiocsti", network: true, want: "EPERM"},
		{probe: "tiocsti-hibits", want: "EPERM", control: true},
		{probe: "tioclinux", want: "EPERM", control: true},
		{probe: "x32-getpid", want: "EPERM", control: true},
		{probe: "clone3", want: "ENOSYS", control: true},
		{probe: "clone-newuser", want: "EPERM", control: true},
		{probe: "socket-unix", want: "OK"},
		{probe: "socket-unix", network: true, want: "OK"},
		{probe: "socketpair-unix", want: "OK"},
		{probe: "socket-inet", network: true, want: "OK"},
		{probe: "socket-inet6", network: true, wantNot: "EPERM"}, // EAFNOSUPPORT if IPv6 is off
		{probe: "ordinary", want: "OK"},
		{probe: "ordinary", network: true, want: "OK"},
	}
	for _, c := range cases {
		name := fmt.Sprintf("%s/network=%v", c.probe, c.network)
		t.Run(name, func(t *testing.T) {
			got := runSeccompProbe(t, bwrap, c.probe, true, c.network)["result"]
			if c.want != "" && got != c.want {
				t.Errorf("filtered: got %s, want %s", got, c.want)
			}
			if c.wantNot != "" && got == c.wantNot {
				t.Errorf("filtered: got %s", got)
			}
			if !c.control {
				return
			}
			ctl := runSeccompProbe(t, bwrap, c.probe, false, c.network)["result"]
			t.Logf("filtered %s, unfiltered %s", got, ctl)
			if strings.HasPrefix(ctl, "SETUP(") || ctl == "UNKNOWN-PROBE" {
				t.Fatalf("unfiltered control probe broke: %s", ctl)
			}
			if ctl == c.want {
				t.Errorf("unfiltered control also got %s: the filtered result does not show the filter working", ctl)
			}
		})
	}

	t.Run("denied-table", func(t *testing.T) {
		for _, network := range []bool{false, true} {
			res := runSeccompProbe(t, bwrap, "denied-table", true, network)
			var keys []string
			for k := range res {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			if len(keys) != len(deniedSyscalls)-1 {
				t.Errorf("network=%v: probe reported %d syscalls, want %d: %v", network, len(keys), len(deniedSyscalls)-1, keys)
			}
			for _, k := range keys {
				if res[k] != "EPERM" {
					t.Errorf("network=%v: %s = %s, want EPERM", network, k, res[k])
				}
			}
		}
	})
}

// The landlock backend's filter: the hook shares the host's mount
// namespace, so it may not make a Unix socket (connect by path reaches
// the host's) nor a datagram pair (sendto by path); a stream pair, the
// way to its broker's dialer, it may. The rest is the bwrap filter's.
func TestLandlockSeccompDecisions(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the filter is x86_64-only")
	}
	const (
		sockDgram, sockSeqpacket  = 2, 5
		sockCloexec, sockNonblock = 0x80000, 0x800
	)
	for _, network := range []bool{false, true} {
		prog, err := landlockSeccompProgram(network)
		if err != nil {
			t.Fatal(err)
		}
		inet := uint32(retEPERM)
		if network {
			inet = retAllow
		}
		for _, c := range []struct {
			what string
			nr   uint32
			args [6]uint64
			want uint32
		}{
			{"socket(AF_UNIX)", sysSocket, [6]uint64{afUnix, sockStream}, retEPERM},
			{"socket(AF_INET)", sysSocket, [6]uint64{afInet, sockStream}, inet},
			{"socket(AF_INET6)", sysSocket, [6]uint64{afInet6, sockDgram}, inet},
			{"socketpair(AF_UNIX, SOCK_STREAM)", sysSocketpair, [6]uint64{afUnix, sockStream}, retAllow},
			{"socketpair(AF_UNIX, SOCK_STREAM|SOCK_CLOEXEC|SOCK_NONBLOCK)", sysSocketpair, [6]uint64{afUnix, sockStream | sockCloexec | sockNonblock}, retAllow},
			{"socketpair(AF_UNIX, SOCK_DGRAM)", sysSocketpair, [6]uint64{afUnix, sockDgram}, retEPERM},
			{"socketpair(AF_UNIX, SOCK_SEQPACKET)", sysSocketpair, [6]uint64{afUnix, sockSeqpacket}, retEPERM},
			{"socketpair(AF_INET, SOCK_STREAM)", sysSocketpair, [6]uint64{afInet, sockStream}, retEPERM},
			{"ptrace", 101, [6]uint64{}, retEPERM},
			{"read", 0, [6]uint64{}, retAllow},
		} {
			got, err := runFilter(prog, seccompData{nr: c.nr, arch: auditArchX86_64, args: c.args})
			if err != nil || got != c.want {
				t.Errorf("network=%v %s: %#x %v, want %#x", network, c.what, got, err, c.want)
			}
		}
	}
	// The bwrap filter is unchanged: its hooks are in a mount namespace
	// of their own and reach their broker by its socket.
	prog, _ := seccompProgram(false)
	if got, _ := runFilter(prog, seccompData{nr: sysSocket, arch: auditArchX86_64, args: [6]uint64{afUnix, sockStream}}); got != retAllow {
		t.Errorf("bwrap filter socket(AF_UNIX): %#x, want allow", got)
	}
}
