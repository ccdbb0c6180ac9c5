package jail

// The hook jail's seccomp filters (docs/jail.md): classic-BPF programs
// built from one table, syscalls.go, for bubblewrap (handed to it through
// --seccomp FD) and for the landlock stage (installed by the stage).
//
// The program is assembled here, by hand, rather than by a library, so
// that every instruction can be read and reviewed. It sees a struct
// seccomp_data:
//
//	offset  0  u32 nr                  syscall number
//	offset  4  u32 arch                AUDIT_ARCH_* of the calling ABI
//	offset  8  u64 instruction_pointer
//	offset 16  u64 args[6]             little-endian on x86_64 and arm64,
//	                                   so the low 32 bits of args[i] are at
//	                                   16+8*i and the high ones at 20+8*i
//
// Policy: an allow-list. A syscall the table allows passes; one it
// checks passes only if its arguments do; everything else, including
// every number the table does not name, fails with EPERM (an errno, never
// a kill, so that a hook sees a clear error and not a crash). A foreign
// ABI (i386 through int 0x80, arm32 compat) fails with EPERM too: its
// numbers mean different things. x32 numbers (bit 30 set) are not in the
// table, so they fail.
//
// The program is a binary search over the table's numbers, so a syscall
// costs about nine comparisons whatever its number.
//
// Argument checks compare only the low 32 bits where the kernel truncates
// the argument to an int (ioctl's cmd, socket's domain, a pid): a check
// that also required the high word to be zero could be bypassed by
// setting high bits (the flatpak CVE-2019-10063 pattern). A pointer is
// compared on both halves.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// seccomp_data field offsets.
const (
	offNr   = 0
	offArch = 4
)

// offArgLo and offArgHi are the offsets of the low and high 32 bits of
// args[i].
func offArgLo(i int) uint32 { return uint32(16 + 8*i) }
func offArgHi(i int) uint32 { return uint32(20 + 8*i) }

// Return values and ABI constants (linux/seccomp.h, linux/audit.h).
const (
	retAllow   = 0x7fff0000 // SECCOMP_RET_ALLOW
	retErrno   = 0x00050000 // SECCOMP_RET_ERRNO; low 16 bits are the errno
	retEPERM   = retErrno | uint32(unix.EPERM)
	retENOSYS  = retErrno | uint32(unix.ENOSYS)
	retENOTSUP = retErrno | uint32(unix.EOPNOTSUPP)
	retNotify  = unix.SECCOMP_RET_USER_NOTIF // to the landlock stage's supervisor

	auditArchX86_64  = 0xc000003e // AUDIT_ARCH_X86_64
	auditArchAArch64 = 0xc00000b7 // AUDIT_ARCH_AARCH64

	tiocsti   = 0x5412 // TIOCSTI: push a byte into a terminal's input queue
	tioclinux = 0x541c // TIOCLINUX: VT console tricks (selection paste, ...)

	afUnix = 1
	// socket types: the low 4 bits of socket's and socketpair's type
	sockTypeMask = 0xf
	sockStream   = 1
	afInet       = 2
	afInet6      = 10

	// CLONE_NEWNS|CLONE_NEWCGROUP|CLONE_NEWUTS|CLONE_NEWIPC|CLONE_NEWUSER|
	// CLONE_NEWPID|CLONE_NEWNET: clone(2) creating namespaces is the same
	// thing as unshare(2), which is denied. (CLONE_NEWTIME, 0x80, is not
	// listed: in clone(2) that bit belongs to the exit signal.)
	cloneNewNamespaces = 0x7e020000

	// O_CREAT | __O_TMPFILE: open flags that make a file, and so give it
	// a mode. The same on x86_64 and arm64.
	openCreates = 0x40 | 0x400000
	// S_ISUID | S_ISGID: a mode bit no hook may set on a file.
	setIDBits = 0o6000

	prioProcess      = 0 // PRIO_PROCESS
	prioPgrp         = 1 // PRIO_PGRP
	ioprioWhoProcess = 1 // IOPRIO_WHO_PROCESS
	ioprioWhoPgrp    = 2 // IOPRIO_WHO_PGRP
)

// filterArch is one architecture's ABI: its audit value and how to read
// a syscall's number from the table.
type filterArch struct {
	name  string
	audit uint32
	nr    func(syscallRule) int
}

var filterArches = map[string]filterArch{
	"amd64": {"x86_64", auditArchX86_64, func(r syscallRule) int { return r.amd64 }},
	"arm64": {"arm64", auditArchAArch64, func(r syscallRule) int { return r.arm64 }},
}

// filterSpec says which filter to build.
type filterSpec struct {
	arch     filterArch
	landlock bool // the landlock backend's column, not bwrap's
	network  bool // the hook was granted the host network (or egress)
}

func (f filterSpec) action(r syscallRule) action {
	if f.landlock {
		return r.landlock
	}
	return r.bwrap
}

// SeccompFilter returns the compiled classic-BPF program of the bwrap
// backend (the raw bytes bwrap's --seccomp FD expects: an array of struct
// sock_filter, 8 bytes each, native endian). network=true additionally
// allows AF_INET and AF_INET6 sockets.
//
// It is built for the architecture warden runs on, x86_64 or arm64; on
// any other it returns an error rather than a filter that would deny
// every syscall.
func SeccompFilter(network bool) ([]byte, error) {
	prog, err := seccompProgram(network)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, 8*len(prog))
	for _, ins := range prog {
		out = binary.NativeEndian.AppendUint16(out, ins.Code)
		out = append(out, ins.Jt, ins.Jf)
		out = binary.NativeEndian.AppendUint32(out, ins.K)
	}
	return out, nil
}

// hostSpec is the filter spec for this machine's architecture.
func hostSpec(landlock, network bool) (filterSpec, error) {
	arch, ok := filterArches[runtime.GOARCH]
	if !ok {
		return filterSpec{}, fmt.Errorf("seccomp filter: only x86_64 and arm64 are supported, not %s", runtime.GOARCH)
	}
	return filterSpec{arch: arch, landlock: landlock, network: network}, nil
}

// SeccompFile returns a read-only *os.File positioned at 0 holding the
// program, for exec.Cmd.ExtraFiles (bwrap reads it from the fd number
// given to --seccomp). It is a sealed memfd, or a pipe if memfd_create is
// unavailable. bwrap consumes it by reading, and ExtraFiles share the
// file offset, so use a fresh file for every bwrap spawn, and close it
// after Start.
func SeccompFile(network bool) (*os.File, error) {
	prog, err := SeccompFilter(network)
	if err != nil {
		return nil, err
	}
	f, err := seccompMemfd(prog)
	if err == nil {
		return f, nil
	}
	if !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EPERM) {
		return nil, err
	}
	return seccompPipe(prog)
}

// seccompMemfd writes prog into a memfd, seals it against any change and
// returns a read-only descriptor of it at offset 0. The memfd is CLOEXEC:
// exec.Cmd dup2()s ExtraFiles into the child, and the dup has no CLOEXEC.
func seccompMemfd(prog []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate("warden-seccomp", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("seccomp filter: memfd_create: %w", err)
	}
	rw := os.NewFile(uintptr(fd), "warden-seccomp")
	defer rw.Close()
	if _, err := rw.Write(prog); err != nil {
		return nil, fmt.Errorf("seccomp filter: write memfd: %w", err)
	}
	seals := unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE | unix.F_SEAL_SEAL
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
		return nil, fmt.Errorf("seccomp filter: seal memfd: %w", err)
	}
	// A fresh O_RDONLY open file description: offset 0, not writable.
	ro, err := os.OpenFile("/proc/self/fd/"+strconv.Itoa(fd), os.O_RDONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("seccomp filter: reopen memfd read-only: %w", err)
	}
	return ro, nil
}

// seccompPipe returns the read end of a pipe already holding prog, its
// write end closed. The program is far smaller than a pipe's buffer.
func seccompPipe(prog []byte) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("seccomp filter: pipe: %w", err)
	}
	_, werr := w.Write(prog)
	cerr := w.Close()
	if err := errors.Join(werr, cerr); err != nil {
		r.Close()
		return nil, fmt.Errorf("seccomp filter: write pipe: %w", err)
	}
	return r, nil
}

// seccompProgram is the bwrap backend's filter.
func seccompProgram(network bool) ([]unix.SockFilter, error) {
	spec, err := hostSpec(false, network)
	if err != nil {
		return nil, err
	}
	return buildFilter(spec)
}

// landlockSeccompProgram is the landlock backend's filter: the table's
// landlock column. The hook shares the host's mount, IPC and pid
// namespaces, so besides the bwrap filter's rules it may not change file
// metadata by path (Landlock has no right for it), make a Unix socket
// (connect by path would reach the host's), use SysV IPC, or renice,
// limit or pin another process of its uid.
func landlockSeccompProgram(network bool) ([]unix.SockFilter, error) {
	spec, err := hostSpec(true, network)
	if err != nil {
		return nil, err
	}
	return buildFilter(spec)
}

// nrRange is a run of syscall numbers [lo, hi] with one action; a checked
// syscall is a range of its own.
type nrRange struct {
	lo, hi uint32
	act    action
	rule   *syscallRule // the checked syscall, for check ranges
}

// ranges cuts the whole 32-bit number space into runs of one action:
// every number the table does not name for this architecture is deny.
func ranges(spec filterSpec) ([]nrRange, error) {
	type numbered struct {
		nr   uint32
		rule *syscallRule
	}
	var rows []numbered
	for i := range syscallTable {
		r := &syscallTable[i]
		if n := spec.arch.nr(*r); n != noNr {
			rows = append(rows, numbered{uint32(n), r})
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].nr < rows[j].nr })
	var out []nrRange
	add := func(lo, hi uint32, act action, rule *syscallRule) {
		if n := len(out); n > 0 && act != check && out[n-1].act == act && out[n-1].hi+1 == lo {
			out[n-1].hi = hi
			return
		}
		out = append(out, nrRange{lo, hi, act, rule})
	}
	next := uint32(0)
	for i, r := range rows {
		if i > 0 && r.nr == rows[i-1].nr {
			return nil, fmt.Errorf("seccomp filter: %s and %s share number %d on %s", rows[i-1].rule.name, r.rule.name, r.nr, spec.arch.name)
		}
		if r.nr > next {
			add(next, r.nr-1, deny, nil)
		}
		act := spec.action(*r.rule)
		if act == supervise && !spec.landlock {
			return nil, fmt.Errorf("seccomp filter: %s is supervised under bwrap, which has no supervisor", r.rule.name)
		}
		if act == check {
			if _, ok := argChecks[r.rule.name]; !ok {
				return nil, fmt.Errorf("seccomp filter: %s is checked but has no check", r.rule.name)
			}
		}
		add(r.nr, r.nr, act, r.rule)
		next = r.nr + 1
	}
	add(next, math.MaxUint32, deny, nil)
	return out, nil
}

// buildFilter assembles spec's program. Reading it top to bottom:
//
//	arch check -> binary search on nr -> out-of-line argument checks.
func buildFilter(spec filterSpec) ([]unix.SockFilter, error) {
	rs, err := ranges(spec)
	if err != nil {
		return nil, err
	}
	var a bpfAsm
	a.load(offArch)
	a.ins = append(a.ins, unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 1, K: spec.arch.audit})
	a.ret(retEPERM) // a foreign ABI
	a.load(offNr)
	a.search(rs)

	var checked []*syscallRule
	for _, r := range rs {
		if r.act == check {
			checked = append(checked, r.rule)
		}
	}
	for _, r := range checked {
		a.label("check:" + r.name)
		a.scope = r.name
		argChecks[r.name](&a, spec)
	}
	a.scope = ""
	a.label("eperm")
	a.ret(retEPERM)
	return a.assemble()
}

// search emits a binary search over rs, which covers every number from
// 0 up in order. Each node is "if nr >= k goto right": its jump goes
// through an unconditional jump (32-bit offset), so no subtree is too big
// for classic BPF's 8-bit conditional offsets.
func (a *bpfAsm) search(rs []nrRange) {
	if len(rs) == 1 {
		switch r := rs[0]; r.act {
		case allow:
			a.ret(retAllow)
		case nosys:
			a.ret(retENOSYS)
		case notsup:
			a.ret(retENOTSUP)
		case supervise:
			a.ret(retNotify)
		case check:
			a.ja("check:" + r.rule.name)
		default:
			a.ret(retEPERM)
		}
		return
	}
	mid := len(rs) / 2
	right := fmt.Sprintf("nr>=%d", rs[mid].lo)
	a.jgeK(rs[mid].lo, 0, 1) // true: the next instruction, the jump right
	a.ja(right)
	a.search(rs[:mid])
	a.label(right)
	a.search(rs[mid:])
}

// argChecks are the argument checks of the table's checked syscalls, by
// name. Each ends every path in a RET, with the syscall's arguments in
// seccomp_data and the accumulator free.
var argChecks = map[string]func(a *bpfAsm, spec filterSpec){
	// ioctl(fd, cmd, arg): cmd is an unsigned int.
	"ioctl": func(a *bpfAsm, _ filterSpec) {
		a.load(offArgLo(1))
		a.jeq(tiocsti, "eperm", "")
		a.jeq(tioclinux, "eperm", "")
		a.ret(retAllow)
	},
	"socket": func(a *bpfAsm, spec filterSpec) {
		a.load(offArgLo(0))
		if !spec.landlock {
			a.jeq(afUnix, ".allow", "")
		}
		if spec.network {
			a.jeq(afInet, ".allow", "")
			a.jeq(afInet6, ".allow", "")
		}
		a.ret(retEPERM)
		a.label(".allow")
		a.ret(retAllow)
	},
	// socketpair(domain, type, ...): the type carries SOCK_NONBLOCK and
	// SOCK_CLOEXEC above its low 4 bits.
	"socketpair": func(a *bpfAsm, spec filterSpec) {
		a.load(offArgLo(0))
		a.jeq(afUnix, "", "eperm")
		if spec.landlock {
			a.load(offArgLo(1))
			a.and(sockTypeMask)
			a.jeq(sockStream, "", "eperm")
		}
		a.ret(retAllow)
	},
	// clone(flags, ...): the kernel uses the low 32 bits of the flags.
	"clone": func(a *bpfAsm, _ filterSpec) {
		a.load(offArgLo(0))
		a.jset(cloneNewNamespaces, "eperm", "")
		a.ret(retAllow)
	},
	"open":      createMode(1, 2),
	"openat":    createMode(2, 3),
	"creat":     setIDMode(1),
	"fchmod":    setIDMode(1),
	"chmod":     setIDMode(1),
	"fchmodat":  setIDMode(2),
	"fchmodat2": setIDMode(2),
	// utimensat(dirfd, path, times, flags) with path NULL is futimens:
	// the file the hook holds open. The pointer is checked on both halves.
	// By path it goes to the supervisor.
	"utimensat": func(a *bpfAsm, _ filterSpec) {
		a.load(offArgLo(1))
		a.jeq(0, "", ".notify")
		a.load(offArgHi(1))
		a.jeq(0, "", ".notify")
		a.ret(retAllow)
		a.label(".notify")
		a.ret(retNotify)
	},
	// bind: without network, nothing a hook binds is of use to it, and an
	// AF_UNIX bind on a socketpair end would squat an abstract name in
	// the host's network namespace.
	"bind": func(a *bpfAsm, spec filterSpec) {
		if spec.network {
			a.ret(retAllow)
		} else {
			a.ret(retEPERM)
		}
	},
	"prlimit64":          selfOnly(0),
	"sched_setaffinity":  selfOnly(0),
	"sched_setparam":     selfOnly(0),
	"sched_setscheduler": selfOnly(0),
	"sched_setattr":      selfOnly(0),
	// setpriority(which, who, prio): the hook itself or its own process
	// group, never PRIO_USER (every process of the uid).
	"setpriority": selfOrGroup(prioProcess, prioPgrp),
	"ioprio_set":  selfOrGroup(ioprioWhoProcess, ioprioWhoPgrp),
}

// createMode checks open's or openat's mode when its flags make a file.
func createMode(flagsArg, modeArg int) func(*bpfAsm, filterSpec) {
	return func(a *bpfAsm, _ filterSpec) {
		a.load(offArgLo(flagsArg))
		a.jset(openCreates, "", ".allow")
		a.load(offArgLo(modeArg))
		a.jset(setIDBits, "eperm", "")
		a.label(".allow")
		a.ret(retAllow)
	}
}

// setIDMode refuses a mode argument with a setuid or setgid bit.
func setIDMode(modeArg int) func(*bpfAsm, filterSpec) {
	return func(a *bpfAsm, _ filterSpec) {
		a.load(offArgLo(modeArg))
		a.jset(setIDBits, "eperm", "")
		a.ret(retAllow)
	}
}

// selfOnly allows the call only on the calling process: pid (an int) 0.
func selfOnly(pidArg int) func(*bpfAsm, filterSpec) {
	return func(a *bpfAsm, _ filterSpec) {
		a.load(offArgLo(pidArg))
		a.jeq(0, "", "eperm")
		a.ret(retAllow)
	}
}

// selfOrGroup allows (which, who) with which one of the two given and
// who 0: the calling process or its own process group.
func selfOrGroup(process, group uint32) func(*bpfAsm, filterSpec) {
	return func(a *bpfAsm, _ filterSpec) {
		a.load(offArgLo(1))
		a.jeq(0, "", "eperm")
		a.load(offArgLo(0))
		a.jeq(process, ".ok", "")
		a.jeq(group, ".ok", "eperm")
		a.label(".ok")
		a.ret(retAllow)
	}
}

// bpfAsm is a minimal classic-BPF assembler with forward jumps to named
// labels ("" means fall through to the next instruction).
type bpfAsm struct {
	ins       []unix.SockFilter
	jumps     []bpfJump
	longJumps []bpfJump // ja: jt is the label
	labels    map[string]int
	scope     string // qualifies labels that start with "."
	err       error  // a label defined twice
}

// qualify makes a label that starts with "." local to the current scope
// (one syscall's check), so that checks can share label names.
func (a *bpfAsm) qualify(label string) string {
	if strings.HasPrefix(label, ".") {
		return a.scope + label
	}
	return label
}

type bpfJump struct {
	at     int
	jt, jf string
}

// load: A = 32-bit word at offset off of seccomp_data.
func (a *bpfAsm) load(off uint32) {
	a.ins = append(a.ins, unix.SockFilter{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: off})
}

// and: A &= k.
func (a *bpfAsm) and(k uint32) {
	a.ins = append(a.ins, unix.SockFilter{Code: unix.BPF_ALU | unix.BPF_AND | unix.BPF_K, K: k})
}

// jeq: if A == k goto jt else goto jf.
func (a *bpfAsm) jeq(k uint32, jt, jf string) { a.jump(unix.BPF_JEQ, k, jt, jf) }

// jgeK: if A >= k skip jt instructions, else skip jf: a conditional
// jump with literal offsets, for search's local pattern.
func (a *bpfAsm) jgeK(k uint32, jt, jf uint8) {
	a.ins = append(a.ins, unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K, Jt: jt, Jf: jf, K: k})
}

// ja: goto label, whatever the distance (a 32-bit offset).
func (a *bpfAsm) ja(label string) {
	a.longJumps = append(a.longJumps, bpfJump{at: len(a.ins), jt: a.qualify(label)})
	a.ins = append(a.ins, unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JA})
}

// jset: if A & k != 0 goto jt else goto jf.
func (a *bpfAsm) jset(k uint32, jt, jf string) { a.jump(unix.BPF_JSET, k, jt, jf) }

func (a *bpfAsm) jump(op uint16, k uint32, jt, jf string) {
	a.jumps = append(a.jumps, bpfJump{at: len(a.ins), jt: a.qualify(jt), jf: a.qualify(jf)})
	a.ins = append(a.ins, unix.SockFilter{Code: unix.BPF_JMP | op | unix.BPF_K, K: k})
}

// ret: return k to the kernel (a SECCOMP_RET_* action).
func (a *bpfAsm) ret(k uint32) {
	a.ins = append(a.ins, unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: k})
}

func (a *bpfAsm) label(name string) {
	if a.labels == nil {
		a.labels = map[string]int{}
	}
	name = a.qualify(name)
	if _, dup := a.labels[name]; dup && a.err == nil {
		a.err = fmt.Errorf("seccomp filter: label %q defined twice", name)
	}
	a.labels[name] = len(a.ins)
}

// assemble resolves jump labels into the 8-bit forward offsets classic
// BPF uses, refusing backward, unknown or too-long jumps.
func (a *bpfAsm) assemble() ([]unix.SockFilter, error) {
	if a.err != nil {
		return nil, a.err
	}
	off := func(at int, name string) (uint8, error) {
		if name == "" {
			return 0, nil
		}
		to, ok := a.labels[name]
		if !ok {
			return 0, fmt.Errorf("seccomp filter: unknown label %q", name)
		}
		d := to - at - 1
		if d < 0 || d > 255 {
			return 0, fmt.Errorf("seccomp filter: jump from %d to %q (%d) out of range", at, name, to)
		}
		return uint8(d), nil
	}
	for _, j := range a.jumps {
		jt, err := off(j.at, j.jt)
		if err != nil {
			return nil, err
		}
		jf, err := off(j.at, j.jf)
		if err != nil {
			return nil, err
		}
		a.ins[j.at].Jt, a.ins[j.at].Jf = jt, jf
	}
	for _, j := range a.longJumps {
		to, ok := a.labels[j.jt]
		if !ok || to <= j.at {
			return nil, fmt.Errorf("seccomp filter: jump from %d to %q: unknown or backward", j.at, j.jt)
		}
		a.ins[j.at].K = uint32(to - j.at - 1)
	}
	if n := len(a.ins); n > unix.BPF_MAXINSNS {
		return nil, fmt.Errorf("seccomp filter: %d instructions, limit %d", n, unix.BPF_MAXINSNS)
	}
	return a.ins, nil
}
