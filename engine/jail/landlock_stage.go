package jail

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/wardenhq/warden/engine/hooks"
)

// StageArg0 is the argv[0] that makes this binary the landlock stage:
// warden re-execs itself (/proc/self/exe) under that name. The stage is
// the run's reaper (landlock_reaper.go): it starts itself once more as
// hookArg0, which restricts itself and execs the hook (see init below).
// Any binary that links this package (warden, its test binaries) can be
// the stage.
const StageArg0 = "warden-landlock-stage"

// hookArg0 is the argv[0] of the stage's child: the process that
// restricts itself and becomes the hook.
const hookArg0 = "warden-landlock-hook"

// Fds handed to the stage: the ruleset (closed once applied) and the
// broker's dialer, which the hook keeps (WARDEN_DIALER names it).
const (
	fdRuleset = 3
	FdDialer  = 4
)

// init makes every binary that imports this package (warden, warden's
// test binaries) able to be the landlock stage: a process started with
// argv[0] StageArg0 or hookArg0 becomes the stage, or the hook's side of
// it, before main runs, and never returns to main. Any other argv[0] is
// untouched. The engine starts it as a re-exec of its own binary, so the
// stage is exactly the code that laid the run out.
func init() {
	if len(os.Args) == 0 {
		return
	}
	switch os.Args[0] {
	case StageArg0:
		reaperStage(os.Args[1:]) // never returns
	case hookArg0:
		// Landlock and seccomp bind the calling thread: the same thread
		// must restrict itself and exec.
		runtime.LockOSThread()
		err := landlockStage(os.Args[1:])
		fmt.Fprintf(os.Stderr, "warden: landlock jail: %v\n", err)
		os.Exit(126)
	}
}

// landlockStage runs in the stage's child, in this order: its own process group,
// RLIMIT_NPROC as the bwrap path sets it, (as root) every capability
// dropped, no_new_privs, the Landlock ruleset, the seccomp filter, then
// execve of the hook. It returns only on failure.
//
// argv: stageArgs's.
func landlockStage(argv []string) error {
	a, err := parseStageArgs(argv)
	if err != nil {
		return err
	}
	nproc, network, hook := a.nproc, a.network, a.hook
	if unix.Getpgrp() != unix.Getpid() {
		if err := unix.Setpgid(0, 0); err != nil {
			return fmt.Errorf("setpgid: %w", err)
		}
	}
	if nproc > 0 {
		var cur unix.Rlimit
		if err := unix.Getrlimit(unix.RLIMIT_NPROC, &cur); err != nil {
			return fmt.Errorf("getrlimit: %w", err)
		}
		n := min(nproc, cur.Max)
		if err := unix.Setrlimit(unix.RLIMIT_NPROC, &unix.Rlimit{Cur: n, Max: n}); err != nil {
			return fmt.Errorf("RLIMIT_NPROC %d: %w", n, err)
		}
	}
	if err := a.rlimits.apply(); err != nil {
		return err
	}
	switch {
	case os.Geteuid() != 0:
	case a.uid != 0:
		if err := becomeHookUser(a.uid, a.gid, a.keep); err != nil {
			return fmt.Errorf("becoming uid %d: %w", a.uid, err)
		}
	default:
		if err := dropRoot(); err != nil {
			return fmt.Errorf("dropping root's capabilities: %w", err)
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("PR_SET_NO_NEW_PRIVS: %w", err)
	}
	if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fdRuleset, 0, 0); errno != 0 {
		return fmt.Errorf("landlock_restrict_self: %w", errno)
	}
	unix.Close(fdRuleset)
	prog, err := landlockSeccompProgram(network)
	if err != nil {
		return fmt.Errorf("seccomp filter: %w", err)
	}
	listener, err := installWithListener(prog)
	if err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	if err := sendListener(listener); err != nil {
		return fmt.Errorf("handing the seccomp listener to the stage: %w", err)
	}
	err = syscall.Exec(hook[0], hook, os.Environ())
	return fmt.Errorf("exec %s: %w", hook[0], err)
}

// stageArgs is the stage's argv after argv[0]:
//
//	UID:GID:KEEP NPROC RLIMITS NETWORK(0|1) N WRITABLE-1 ... WRITABLE-N -- HOOK-ARGV...
//
// UID:GID is who the hook runs as (a root stage changes to it unless it
// is 0:0), KEEP the one capability it keeps then (0: none).
//
// RLIMITS is Rlimits's DATA:CPU:FSIZE (0 where not set: a run with a
// cgroup has none of them).
//
// WRITABLE are the run's writable rules, beneath which the supervisor
// makes metadata calls for the hook (landlock_supervisor.go).
type stageArgs struct {
	uid, gid int
	keep     int // the capability a hook run as uid keeps (Jail.Keeps)
	nproc    uint64
	rlimits  Rlimits
	network  bool
	writable []string
	hook     []string
}

func (a stageArgs) argv() []string {
	network := "0"
	if a.network {
		network = "1"
	}
	out := []string{strconv.Itoa(a.uid) + ":" + strconv.Itoa(a.gid) + ":" + strconv.Itoa(a.keep), strconv.FormatUint(a.nproc, 10), a.rlimits.String(), network, strconv.Itoa(len(a.writable))}
	out = append(out, a.writable...)
	return append(append(out, "--"), a.hook...)
}

func parseStageArgs(argv []string) (stageArgs, error) {
	usage := errors.New("usage: " + StageArg0 + " UID:GID:KEEP NPROC RLIMITS NETWORK N WRITABLE... -- ARGV")
	if len(argv) < 7 {
		return stageArgs{}, usage
	}
	var a stageArgs
	var err error
	id := strings.Split(argv[0], ":")
	badID := fmt.Errorf("identity %q: want UID:GID:KEEP", argv[0])
	if len(id) != 3 {
		return stageArgs{}, badID
	}
	var e1, e2, e3 error
	a.uid, e1 = strconv.Atoi(id[0])
	a.gid, e2 = strconv.Atoi(id[1])
	a.keep, e3 = strconv.Atoi(id[2])
	if e1 != nil || e2 != nil || e3 != nil || a.uid < 0 || a.gid < 0 || a.keep < 0 || a.keep > 63 {
		return stageArgs{}, badID
	}
	argv = argv[1:]
	if a.nproc, err = strconv.ParseUint(argv[0], 10, 64); err != nil {
		return stageArgs{}, fmt.Errorf("nproc %q: %w", argv[0], err)
	}
	if a.rlimits, err = parseRlimits(argv[1]); err != nil {
		return stageArgs{}, err
	}
	argv = argv[1:]
	a.network = argv[1] == "1"
	n, err := strconv.Atoi(argv[2])
	if err != nil || n < 0 || len(argv) < 3+n+2 || argv[3+n] != "--" {
		return stageArgs{}, usage
	}
	a.writable = argv[3 : 3+n]
	a.hook = argv[4+n:]
	return a, nil
}

// Securebits (linux/securebits.h): root gets no capability from exec,
// and neither that nor the rest can be undone.
const (
	secNoroot            = 1 << 0
	secNorootLocked      = 1 << 1
	secNoSetuidFix       = 1 << 2
	secNoSetuidFixLocked = 1 << 3
	secKeepCapsLocked    = 1 << 5
	secNoAmbientRaise    = 1 << 6
	secNoAmbientLocked   = 1 << 7
)

// dropRoot leaves uid 0 without a capability, for good: the bounding
// set emptied, ambient cleared, securebits locked so exec grants none,
// and the effective, permitted and inheritable sets zero.
//
// Root that has no capability to drop (a container started with
// --cap-drop ALL) cannot set securebits (that needs CAP_SETPCAP), and
// needs not: with the bounding set empty, exec grants root nothing, and
// no_new_privs (set next) keeps setuid and file capabilities from adding
// any. Then only ambient and the sets are cleared, which any process may.
func dropRoot() error {
	if boundingEmpty() {
		if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
			return fmt.Errorf("PR_CAP_AMBIENT_CLEAR_ALL: %w", err)
		}
		var data [2]unix.CapUserData
		if err := unix.Capset(&unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}, &data[0]); err != nil {
			return fmt.Errorf("capset: %w", err)
		}
		return nil
	}
	if err := unix.Prctl(unix.PR_SET_SECUREBITS, secNoroot|secNorootLocked|secNoSetuidFix|secNoSetuidFixLocked|secKeepCapsLocked|secNoAmbientRaise|secNoAmbientLocked, 0, 0, 0); err != nil {
		return fmt.Errorf("PR_SET_SECUREBITS: %w", err)
	}
	for c := 0; c <= 63; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			if errors.Is(err, unix.EINVAL) {
				break // past the kernel's last capability
			}
			return fmt.Errorf("PR_CAPBSET_DROP %d: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("PR_CAP_AMBIENT_CLEAR_ALL: %w", err)
	}
	var data [2]unix.CapUserData
	if err := unix.Capset(&unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}

// NewLandlock is the Jail of the landlock backend: no bwrap. As root
// that can change its uid, hooks run as DefaultUID, as under bwrap;
// otherwise as warden's own uid, and RootWhy says why a root warden's
// hooks stay uid 0.
func NewLandlock() *Jail {
	j := &Jail{UID: os.Geteuid(), GID: os.Getegid()}
	if j.UID == 0 {
		if j.Keeps, j.RootWhy = hookUser(); j.RootWhy == "" {
			j.UID, j.GID = DefaultUID, DefaultGID
		}
	}
	return j
}

// The capabilities the stage needs to run a root warden's hook as
// DefaultUID: to change uid and gid and to shrink the bounding set.
var hookUserCaps = []int{unix.CAP_SETUID, unix.CAP_SETGID, unix.CAP_SETPCAP}

// lookupCaps are what a landlock hook run as DefaultUID may keep, best
// first: one capability, so that it can look up its granted paths at
// their host paths (the module dir and the run dir lie under root's
// 0700 dirs, and no mount can move them). Landlock still holds every
// access to the hook's rules.
//
// CAP_DAC_READ_SEARCH reads and searches past file modes and writes
// nothing it does not own. Docker's default set lacks it; there
// CAP_DAC_OVERRIDE, which also writes past modes within the rw rules,
// is kept instead: uid 0 would own every such root file anyway, and
// uid 60999 still cannot chmod or chown it, nor signal root.
var lookupCaps = []int{unix.CAP_DAC_READ_SEARCH, unix.CAP_DAC_OVERRIDE}

// hookUser is who a root warden's landlock hook can run as: the
// capability it keeps, or why it stays uid 0 (keep 0).
func hookUser() (keep int, why string) {
	var data [2]unix.CapUserData
	if err := unix.Capget(&unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}, &data[0]); err != nil {
		return 0, "its capabilities cannot be read (" + err.Error() + ")"
	}
	has := func(c int) bool {
		in, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0)
		return data[c/32].Effective&(1<<(c%32)) != 0 && err == nil && in == 1
	}
	var missing []string
	for _, c := range hookUserCaps {
		if !has(c) {
			missing = append(missing, capName[c])
		}
	}
	for _, c := range lookupCaps {
		if has(c) {
			keep = c
			break
		}
	}
	if keep == 0 {
		missing = append(missing, "CAP_DAC_READ_SEARCH or CAP_DAC_OVERRIDE")
	}
	if len(missing) > 0 {
		return 0, "warden runs as root without " + strings.Join(missing, ", ") + " (a container started with --cap-drop), so the stage cannot run the hook as another uid"
	}
	return keep, ""
}

var capName = map[int]string{unix.CAP_SETUID: "CAP_SETUID", unix.CAP_SETGID: "CAP_SETGID", unix.CAP_SETPCAP: "CAP_SETPCAP"}

// becomeHookUser turns this root process into uid and gid with no
// supplementary group and capability keep alone, kept across the hook's
// exec as an ambient capability; every other capability leaves the
// bounding set, so nothing the hook execs can gain one.
func becomeHookUser(uid, gid, keep int) error {
	if keep == 0 {
		return errors.New("no capability to keep: the hook could not reach its paths")
	}
	for c := 0; c <= 63; c++ {
		if c == keep {
			continue
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			if errors.Is(err, unix.EINVAL) {
				break // past the kernel's last capability
			}
			return fmt.Errorf("PR_CAPBSET_DROP %d: %w", c, err)
		}
	}
	// No uid change touches the capability sets from here on, locked:
	// the uid change below keeps them (trimmed next), and access(2),
	// which drops every capability of a non-root caller otherwise, checks
	// with keep as every other call does (git, test -x and
	// os.access look up granted paths with it).
	if err := unix.Prctl(unix.PR_SET_SECUREBITS, secNoroot|secNorootLocked|secNoSetuidFix|secNoSetuidFixLocked|secKeepCapsLocked, 0, 0, 0); err != nil {
		return fmt.Errorf("PR_SET_SECUREBITS: %w", err)
	}
	if err := syscall.Setgroups(nil); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := syscall.Setresgid(gid, gid, gid); err != nil {
		return fmt.Errorf("setresgid %d: %w", gid, err)
	}
	if err := syscall.Setresuid(uid, uid, uid); err != nil {
		return fmt.Errorf("setresuid %d: %w", uid, err)
	}
	if err := keepOnly(keep, true); err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_RAISE, uintptr(keep), 0, 0); err != nil {
		return fmt.Errorf("PR_CAP_AMBIENT_RAISE: %w", err)
	}
	return nil
}

// keepOnly sets this thread's effective and permitted sets (and, with
// inheritable, that set) to capability c alone.
func keepOnly(c int, inheritable bool) error {
	var data [2]unix.CapUserData
	data[c/32].Effective = 1 << (c % 32)
	data[c/32].Permitted = 1 << (c % 32)
	if inheritable {
		data[c/32].Inheritable = 1 << (c % 32)
	}
	if err := unix.Capset(&unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}

// LandlockSpawner returns the hooks.Spawner of one run under landlock.
// The hooks.Spawn it is given is in host terms (no mount namespace).
// dialer is the hook's end of the broker's dialer (broker.Dialer), the
// only way the hook reaches its broker: the stage's seccomp filter
// denies it socket(AF_UNIX). The spawner owns it (Release closes it).
func (j *Jail) LandlockSpawner(plan *Plan, lp *LandlockPlan, dialer *os.File) *Spawner {
	return &Spawner{j: j, plan: plan, network: lp.Network, ll: lp, files: []*os.File{dialer}, dialer: dialer}
}

// landlockCommand is Command for the landlock backend: this binary,
// re-exec'd as the stage, with the ruleset at fd 3.
func (s *Spawner) landlockCommand(sp hooks.Spawn) (*exec.Cmd, error) {
	rs, err := s.ll.Ruleset()
	if err != nil {
		return nil, err
	}
	s.files = append(s.files, rs)
	var writable []string
	for _, r := range s.ll.Rules {
		if r.Access == "rw" {
			writable = append(writable, r.Path)
		}
	}
	args := stageArgs{uid: s.j.UID, gid: s.j.GID, keep: s.j.Keeps, nproc: uint64(HookNproc()), rlimits: s.rl, network: s.network, writable: writable, hook: sp.Argv}
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = append([]string{StageArg0}, args.argv()...)
	cmd.Dir = sp.Dir
	cmd.Env = sp.Env
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	cmd.ExtraFiles = []*os.File{rs, s.dialer} // fdRuleset, FdDialer
	// If the engine dies the stage takes the whole run down with it
	// (landlock_reaper.go): a catchable signal, not the executor's SIGKILL.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: EngineGone}
	return cmd, nil
}

// boundingEmpty: this process's capability bounding set holds nothing.
func boundingEmpty() bool {
	for c := 0; c <= 63; c++ {
		in, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0)
		if err != nil {
			return true // past the kernel's last capability
		}
		if in == 1 {
			return false
		}
	}
	return true
}
