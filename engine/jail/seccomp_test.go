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
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
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
		case unix.BPF_JMP | unix.BPF_JA:
			pc += int(ins.K)
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

// nrOf is name's number on arch, from the table.
func nrOf(t testing.TB, arch, name string) uint32 {
	t.Helper()
	for _, r := range syscallTable {
		if r.name == name {
			if n := filterArches[arch].nr(r); n != noNr {
				return uint32(n)
			}
		}
	}
	t.Fatalf("%s has no %s in the table", arch, name)
	return 0
}

// want is what a filter returns for an action, arguments aside.
func want(a action) uint32 {
	switch a {
	case allow:
		return retAllow
	case nosys:
		return retENOSYS
	case notsup:
		return retENOTSUP
	case supervise:
		return retNotify
	}
	return retEPERM
}

func specs(t *testing.T) []filterSpec {
	var out []filterSpec
	for _, arch := range []string{"amd64", "arm64"} {
		for _, landlock := range []bool{false, true} {
			for _, network := range []bool{false, true} {
				out = append(out, filterSpec{arch: filterArches[arch], landlock: landlock, network: network})
			}
		}
	}
	return out
}

func (f filterSpec) String() string {
	b := "bwrap"
	if f.landlock {
		b = "landlock"
	}
	return fmt.Sprintf("%s/%s/network=%v", f.arch.name, b, f.network)
}

// TestEveryRuleIsEnforced walks the whole table for both architectures
// and both backends: each syscall gets its row's action, and every
// number the table does not name is denied.
func TestEveryRuleIsEnforced(t *testing.T) {
	for _, spec := range specs(t) {
		prog, err := buildFilter(spec)
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		named := map[uint32]bool{}
		for _, r := range syscallTable {
			n := spec.arch.nr(r)
			if n == noNr {
				continue
			}
			named[uint32(n)] = true
			act := spec.action(r)
			if act == check {
				continue // TestSeccompFilterDecisions
			}
			got, err := runFilter(prog, seccompData{nr: uint32(n), arch: spec.arch.audit})
			if err != nil || got != want(act) {
				t.Errorf("%s: %s (%d) = %#x %v, want %#x", spec, r.name, n, got, err, want(act))
			}
		}
		for _, n := range []uint32{0x40000000 | 39, 0xffffffff, 1000, 10000, 0x7fffffff} {
			if named[n] {
				continue
			}
			if got, err := runFilter(prog, seccompData{nr: n, arch: spec.arch.audit}); err != nil || got != retEPERM {
				t.Errorf("%s: unnamed number %#x = %#x %v, want EPERM", spec, n, got, err)
			}
		}
		for n := uint32(0); n < 600; n++ {
			if named[n] {
				continue
			}
			if got, err := runFilter(prog, seccompData{nr: n, arch: spec.arch.audit}); err != nil || got != retEPERM {
				t.Errorf("%s: unnamed number %d = %#x %v, want EPERM", spec, n, got, err)
			}
		}
		// A foreign ABI fails, never kills: i386 on x86_64, arm32 on arm64.
		for _, foreign := range []uint32{0x40000003, 0x40000028, auditArchX86_64 ^ auditArchAArch64 ^ spec.arch.audit} {
			if got, err := runFilter(prog, seccompData{nr: 20, arch: foreign}); err != nil || got != retEPERM {
				t.Errorf("%s: arch %#x = %#x %v, want EPERM", spec, foreign, got, err)
			}
		}
		if len(prog) > 1000 {
			t.Errorf("%s: %d instructions", spec, len(prog))
		}
	}
}

// TestEveryCheckHasCode: a checked row has its check, and every check
// belongs to a checked row.
func TestEveryCheckHasCode(t *testing.T) {
	checked := map[string]bool{}
	for _, r := range syscallTable {
		if r.bwrap == check || r.landlock == check {
			checked[r.name] = true
			if argChecks[r.name] == nil {
				t.Errorf("%s is checked but argChecks has no check for it", r.name)
			}
		}
		if strings.TrimSpace(r.why) == "" {
			t.Errorf("%s has no reason", r.name)
		}
	}
	for name := range argChecks {
		if !checked[name] {
			t.Errorf("argChecks[%s] belongs to no checked row", name)
		}
	}
	if !sort.SliceIsSorted(syscallTable, func(i, j int) bool { return syscallTable[i].name < syscallTable[j].name }) {
		t.Error("syscallTable is not sorted by name")
	}
}

// TestSyscallTableIsWhole: every syscall of x86_64's and arm64's tables
// (golang.org/x/sys's, and the host's kernel header where there is one)
// is named, with the same number.
func TestSyscallTableIsWhole(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "golang.org/x/sys").Output()
	if err != nil {
		t.Fatalf("go list golang.org/x/sys: %v", err)
	}
	dir := strings.TrimSpace(string(out))
	byName := map[string]syscallRule{}
	for _, r := range syscallTable {
		if _, dup := byName[r.name]; dup {
			t.Errorf("%s is in the table twice", r.name)
		}
		byName[r.name] = r
	}
	sysRe := regexp.MustCompile(`SYS_([A-Z0-9_]+)\s+=\s+(\d+)`)
	for _, arch := range []string{"amd64", "arm64"} {
		src, err := os.ReadFile(filepath.Join(dir, "unix", "zsysnum_linux_"+arch+".go"))
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, m := range sysRe.FindAllStringSubmatch(string(src), -1) {
			name := strings.ToLower(m[1])
			seen[name] = true
			checkNumber(t, byName, filterArches[arch], name, m[2], "x/sys")
		}
		if len(seen) < 300 {
			t.Fatalf("%s: only %d syscalls read from x/sys", arch, len(seen))
		}
		for _, r := range syscallTable {
			if filterArches[arch].nr(r) != noNr && !seen[r.name] {
				t.Errorf("%s: %s has number %d in the table, and x/sys does not know it", arch, r.name, filterArches[arch].nr(r))
			}
		}
	}
	if runtime.GOARCH != "amd64" {
		return
	}
	for _, h := range []string{"/usr/include/x86_64-linux-gnu/asm/unistd_64.h", "/usr/include/asm/unistd_64.h"} {
		src, err := os.ReadFile(h)
		if err != nil {
			continue
		}
		re := regexp.MustCompile(`(?m)^#define __NR_([a-z0-9_]+)\s+(\d+)`)
		ms := re.FindAllStringSubmatch(string(src), -1)
		for _, m := range ms {
			checkNumber(t, byName, filterArches["amd64"], m[1], m[2], h)
		}
		t.Logf("%s: %d syscalls, all named", h, len(ms))
		return
	}
	t.Log("no <asm/unistd_64.h> on this host: checked against x/sys only")
}

func checkNumber(t *testing.T, byName map[string]syscallRule, arch filterArch, name, num, source string) {
	t.Helper()
	r, ok := byName[name]
	if !ok {
		t.Errorf("%s: %s (%s in %s) is not in the table: add it to syscalls.go, allowed with a reason or denied", arch.name, name, num, source)
		return
	}
	if got := strconv.Itoa(arch.nr(r)); got != num {
		t.Errorf("%s: %s is %s in the table, %s in %s", arch.name, name, got, num, source)
	}
}

func TestSeccompFilterDecisions(t *testing.T) {
	const (
		sockDgram, sockSeqpacket  = 2, 5
		sockCloexec, sockNonblock = 0x80000, 0x800
		oCreat, oRdwr, oTmpfile   = 0x40, 2, 0x410000
	)
	type tc struct {
		what     string
		name     string
		args     [6]uint64
		bwrap    uint32
		landlock uint32
		// inet: allowed only with network (both backends)
		inet bool
	}
	thread := uint64(unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND | unix.CLONE_SYSVSEM | unix.CLONE_THREAD | unix.CLONE_SETTLS | unix.CLONE_PARENT_SETTID | unix.CLONE_CHILD_CLEARTID)
	const ok, no, sup = retAllow, retEPERM, retNotify
	cases := []tc{
		{what: "ioctl TIOCSTI", name: "ioctl", args: [6]uint64{0, tiocsti}, bwrap: no, landlock: no},
		{what: "ioctl TIOCSTI, high bits set", name: "ioctl", args: [6]uint64{0, 0xdead00000000 | tiocsti}, bwrap: no, landlock: no},
		{what: "ioctl TIOCLINUX", name: "ioctl", args: [6]uint64{0, tioclinux}, bwrap: no, landlock: no},
		{what: "ioctl TCGETS", name: "ioctl", args: [6]uint64{0, unix.TCGETS}, bwrap: ok, landlock: ok},
		{what: "ioctl on fd number TIOCSTI", name: "ioctl", args: [6]uint64{tiocsti, unix.TCGETS}, bwrap: ok, landlock: ok},
		{what: "socket AF_UNIX", name: "socket", args: [6]uint64{afUnix, sockStream}, bwrap: ok, landlock: no},
		{what: "socket AF_INET", name: "socket", args: [6]uint64{afInet, sockStream}, inet: true},
		{what: "socket AF_INET6", name: "socket", args: [6]uint64{afInet6, sockDgram}, inet: true},
		{what: "socket AF_INET, high bits set (the kernel reads an int)", name: "socket", args: [6]uint64{1<<32 | afInet}, inet: true},
		{what: "socket AF_NETLINK", name: "socket", args: [6]uint64{unix.AF_NETLINK}, bwrap: no, landlock: no},
		{what: "socket AF_PACKET", name: "socket", args: [6]uint64{unix.AF_PACKET}, bwrap: no, landlock: no},
		{what: "socketpair AF_UNIX stream", name: "socketpair", args: [6]uint64{afUnix, sockStream}, bwrap: ok, landlock: ok},
		{what: "socketpair AF_UNIX stream|CLOEXEC|NONBLOCK", name: "socketpair", args: [6]uint64{afUnix, sockStream | sockCloexec | sockNonblock}, bwrap: ok, landlock: ok},
		{what: "socketpair AF_UNIX dgram", name: "socketpair", args: [6]uint64{afUnix, sockDgram}, bwrap: ok, landlock: no},
		{what: "socketpair AF_UNIX seqpacket", name: "socketpair", args: [6]uint64{afUnix, sockSeqpacket}, bwrap: ok, landlock: no},
		{what: "socketpair AF_INET", name: "socketpair", args: [6]uint64{afInet, sockStream}, bwrap: no, landlock: no},
		{what: "clone a thread", name: "clone", args: [6]uint64{thread}, bwrap: ok, landlock: ok},
		{what: "clone vfork", name: "clone", args: [6]uint64{unix.CLONE_VFORK | unix.CLONE_VM | uint64(unix.SIGCHLD)}, bwrap: ok, landlock: ok},
		{what: "clone NEWUSER", name: "clone", args: [6]uint64{unix.CLONE_NEWUSER | uint64(unix.SIGCHLD)}, bwrap: no, landlock: no},
		{what: "clone NEWNS", name: "clone", args: [6]uint64{unix.CLONE_NEWNS}, bwrap: no, landlock: no},
		{what: "clone NEWNET", name: "clone", args: [6]uint64{unix.CLONE_NEWNET}, bwrap: no, landlock: no},
		{what: "openat O_RDWR", name: "openat", args: [6]uint64{0, 1, oRdwr, 0o4755}, bwrap: ok, landlock: ok},
		{what: "openat O_CREAT 0644", name: "openat", args: [6]uint64{0, 1, oCreat | oRdwr, 0o644}, bwrap: ok, landlock: ok},
		{what: "openat O_CREAT 04755 (setuid)", name: "openat", args: [6]uint64{0, 1, oCreat | oRdwr, 0o4755}, bwrap: no, landlock: no},
		{what: "openat O_TMPFILE 02755 (setgid)", name: "openat", args: [6]uint64{0, 1, oTmpfile | oRdwr, 0o2755}, bwrap: no, landlock: no},
		{what: "fchmod 0755", name: "fchmod", args: [6]uint64{3, 0o755}, bwrap: ok, landlock: ok},
		{what: "fchmod 04755", name: "fchmod", args: [6]uint64{3, 0o4755}, bwrap: no, landlock: no},
		{what: "fchmodat 0644 by path", name: "fchmodat", args: [6]uint64{0, 1, 0o644}, bwrap: ok, landlock: sup},
		{what: "fchmodat 04755 by path (the supervisor refuses it)", name: "fchmodat", args: [6]uint64{0, 1, 0o4755}, bwrap: no, landlock: sup},
		{what: "fchownat by path", name: "fchownat", args: [6]uint64{0, 1, 0, 0, 0}, bwrap: ok, landlock: sup},
		{what: "setxattr by path", name: "setxattr", args: [6]uint64{1, 2, 3, 1, 0}, bwrap: ok, landlock: sup},
		{what: "fsetxattr on an open file", name: "fsetxattr", args: [6]uint64{3, 2, 3, 1, 0}, bwrap: ok, landlock: ok},
		{what: "utimensat on an open file (futimens)", name: "utimensat", args: [6]uint64{3, 0, 0, 0}, bwrap: ok, landlock: ok},
		{what: "utimensat by path", name: "utimensat", args: [6]uint64{0, 0x7ffd0000, 0, 0}, bwrap: ok, landlock: sup},
		{what: "utimensat by path, pointer above 4 GiB", name: "utimensat", args: [6]uint64{0, 0x7ffd00000000, 0, 0}, bwrap: ok, landlock: sup},
		{what: "bind", name: "bind", args: [6]uint64{3, 1, 16}, bwrap: ok, inet: true},
		{what: "prlimit64 on itself", name: "prlimit64", args: [6]uint64{0, 7, 0, 1}, bwrap: ok, landlock: ok},
		{what: "prlimit64 on the engine", name: "prlimit64", args: [6]uint64{1234, 7, 1}, bwrap: ok, landlock: no},
		{what: "setpriority on itself", name: "setpriority", args: [6]uint64{prioProcess, 0, 19}, bwrap: ok, landlock: ok},
		{what: "setpriority on its process group", name: "setpriority", args: [6]uint64{prioPgrp, 0, 19}, bwrap: ok, landlock: ok},
		{what: "setpriority on the engine", name: "setpriority", args: [6]uint64{prioProcess, 1234, 19}, bwrap: ok, landlock: no},
		{what: "setpriority on every process of the uid", name: "setpriority", args: [6]uint64{2, 0, 19}, bwrap: ok, landlock: no},
		{what: "ioprio_set on itself", name: "ioprio_set", args: [6]uint64{ioprioWhoProcess, 0, 3 << 13}, bwrap: ok, landlock: ok},
		{what: "ioprio_set on the engine", name: "ioprio_set", args: [6]uint64{ioprioWhoProcess, 1234, 3 << 13}, bwrap: ok, landlock: no},
		{what: "ioprio_set on the uid", name: "ioprio_set", args: [6]uint64{3, 0, 3 << 13}, bwrap: ok, landlock: no},
		{what: "sched_setaffinity on itself", name: "sched_setaffinity", args: [6]uint64{0, 8, 1}, bwrap: ok, landlock: ok},
		{what: "sched_setaffinity on the engine", name: "sched_setaffinity", args: [6]uint64{1234, 8, 1}, bwrap: ok, landlock: no},
	}
	for _, spec := range specs(t) {
		prog, err := buildFilter(spec)
		if err != nil {
			t.Fatal(err)
		}
		arch := map[uint32]string{auditArchX86_64: "amd64", auditArchAArch64: "arm64"}[spec.arch.audit]
		for _, c := range cases {
			w := c.bwrap
			if spec.landlock {
				w = c.landlock
			}
			if c.inet && !(spec.landlock == false && c.name == "bind") {
				w = no
				if spec.network {
					w = ok
				}
			}
			got, err := runFilter(prog, seccompData{nr: nrOf(t, arch, c.name), arch: spec.arch.audit, args: c.args})
			if err != nil || got != w {
				t.Errorf("%s: %s: %#x %v, want %#x", spec, c.what, got, err, w)
			}
		}
		if spec.arch.name == "x86_64" { // open and creat are x86_64's only
			for _, c := range []struct {
				what string
				name string
				args [6]uint64
				want uint32
			}{
				{"open O_CREAT 0644", "open", [6]uint64{1, oCreat, 0o644}, ok},
				{"open O_CREAT 04755", "open", [6]uint64{1, oCreat, 0o4755}, no},
				{"open O_RDONLY, mode bits ignored", "open", [6]uint64{1, 0, 0o4755}, ok},
				{"creat 0644", "creat", [6]uint64{1, 0o644}, ok},
				{"creat 06755", "creat", [6]uint64{1, 0o6755}, no},
			} {
				got, err := runFilter(prog, seccompData{nr: nrOf(t, arch, c.name), arch: spec.arch.audit, args: c.args})
				if err != nil || got != c.want {
					t.Errorf("%s: %s: %#x %v, want %#x", spec, c.what, got, err, c.want)
				}
			}
		}
	}
	// The bytes bwrap reads are the program, instruction for instruction.
	b, err := SeccompFilter(false)
	if err != nil {
		t.Fatalf("SeccompFilter on %s: %v", runtime.GOARCH, err)
	}
	prog, _ := seccompProgram(false)
	if got := decodeFilter(t, b); fmt.Sprint(got) != fmt.Sprint(prog) {
		t.Error("SeccompFilter's bytes are not seccompProgram's instructions")
	}
}

// deniedRows are the table's rows this host's bwrap filter denies
// whatever the arguments.
func deniedRows() (out []syscallRule) {
	arch := filterArches[runtime.GOARCH]
	for _, r := range syscallTable {
		if r.bwrap == deny && arch.nr(r) != noNr {
			out = append(out, r)
		}
	}
	return out
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
		for _, s := range deniedRows() {
			if s.name == "ptrace" {
				continue
			}
			_, _, e := unix.Syscall6(uintptr(filterArches[runtime.GOARCH].nr(s)), 0, 0, 0, 0, 0, 0)
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
		_, _, e := unix.RawSyscall(0x40000000|unix.SYS_GETPID, 0, 0, 0)
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
			if len(keys) != len(deniedRows())-1 {
				t.Errorf("network=%v: probe reported %d syscalls, want %d: %v", network, len(keys), len(deniedRows())-1, keys)
			}
			for _, k := range keys {
				if res[k] != "EPERM" {
					t.Errorf("network=%v: %s = %s, want EPERM", network, k, res[k])
				}
			}
		}
	})
}

// TestSyscallDocIsCurrent: docs/jail.md's syscall table is the table in
// syscalls.go. WARDEN_UPDATE_DOCS=1 rewrites it.
func TestSyscallDocIsCurrent(t *testing.T) {
	const path = "../../docs/jail.md"
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	i, j := strings.Index(s, SyscallDocBegin), strings.Index(s, SyscallDocEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no syscall table markers", path)
	}
	current := s[i : j+len(SyscallDocEnd)]
	if want := SyscallDoc(); current != want {
		if os.Getenv("WARDEN_UPDATE_DOCS") == "1" {
			if err := os.WriteFile(path, []byte(s[:i]+want+s[j+len(SyscallDocEnd):]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("%s's syscall table is not syscalls.go's: run WARDEN_UPDATE_DOCS=1 go test ./engine/jail -run TestSyscallDocIsCurrent", path)
	}
}
