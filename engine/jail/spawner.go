package jail

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/wardenhq/warden/engine/hooks"
)

// Default unprivileged identity of jailed hooks, inside the user namespace
// and (when warden runs as root) on the host too.
const (
	DefaultUID = 60999
	DefaultGID = 60999
)

// DefaultSetpriv drops the outer jail's root to the hook's identity.
const DefaultSetpriv = "/usr/bin/setpriv"

// Jail is how hooks are jailed under either backend, bwrap (New) or
// landlock (NewLandlock): the identity they run as, their RLIMIT_NPROC,
// and, under bwrap only, the admitted bubblewrap binary (Bwrap is nil
// under landlock).
type Jail struct {
	Bwrap    *Bwrap
	Setpriv  string
	UID, GID int
	// Prlimit is util-linux's prlimit, which starts bwrap with the hooks'
	// RLIMIT_NPROC set ("" when absent: doctor says so). Not used when
	// OwnNproc.
	Prlimit string
	// OwnNproc: warden (as root) holds RLIMIT_NPROC at HookNproc itself,
	// and every hook inherits it (see New).
	OwnNproc bool

	// RootWhy, under landlock, says why a root warden's hooks stay uid
	// 0 ("" when they run as DefaultUID, or warden is not root).
	RootWhy string
	// Keeps is the one capability such a hook keeps (lookupCaps); 0,
	// CAP_CHOWN, which is never kept, is none.
	Keeps int

	bwrapID fileID // tells bwrap's own processes from the hook's
}

// DefaultPrlimit is where util-linux puts prlimit.
const DefaultPrlimit = "/usr/bin/prlimit"

// HookNproc is the RLIMIT_NPROC of jailed hooks: a bound on the processes
// of the hooks' host uid together, below the kernel's pid_max, so that
// even with no cgroup to hold each run, hooks cannot exhaust the host's
// pid space. It is the second line of defence behind each run's pids
// limit. It is never above warden's own hard limit: an unprivileged
// process cannot raise its hard limit, so asking for more would fail
// every run (see hookNproc).
func HookNproc() int { return int(hookNprocOnce().n) }

// HookNprocSource says which bound set HookNproc: one of NprocFromHard,
// NprocFromPidMax, NprocFromCap.
func HookNprocSource() string { return hookNprocOnce().source }

// Where HookNproc comes from.
const (
	NprocFromHard   = "your hard limit (ulimit -Hu)"
	NprocFromPidMax = "pid_max/4"
	NprocFromCap    = "warden's cap 8192"
)

// NprocCap is warden's own ceiling of the hooks' RLIMIT_NPROC.
const NprocCap = 8192

// hookNprocOnce reads the bounds once, when first asked: as root, New
// lowers this process's hard limit to the value (holdNproc), and a second
// look would then credit the hard limit with it.
var hookNprocOnce = sync.OnceValue(func() nproc {
	pidMax := uint64(0)
	if m := readInt("/proc/sys/kernel/pid_max"); m > 0 {
		pidMax = uint64(m)
	}
	hard := uint64(unix.RLIM_INFINITY)
	var cur unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NPROC, &cur); err == nil {
		hard = cur.Max
	}
	n, source := hookNproc(pidMax, hard)
	return nproc{n, source}
})

type nproc struct {
	n      uint64
	source string
}

// hookNproc is min(NprocCap, pidMax/4, hard), with the bound that won
// (the cap on a tie with it, then pid_max). pidMax 0 means unknown;
// hard is RLIM_INFINITY when unlimited. Never above hard: it is lowered,
// never raised.
func hookNproc(pidMax, hard uint64) (n uint64, source string) {
	n, source = NprocCap, NprocFromCap
	if pidMax > 0 && pidMax/4 < n {
		n, source = pidMax/4, NprocFromPidMax
	}
	if hard < n {
		n, source = hard, NprocFromHard
	}
	return n, source
}

// New admits bwrap (and setpriv, needed when warden runs as root).
func New(bwrapPath string) (*Jail, error) { return newJail(bwrapPath, nil) }

func newJail(bwrapPath string, cache *ProbeCache) (*Jail, error) {
	b, err := AdmitBwrapCached(bwrapPath, cache)
	if err != nil {
		return nil, err
	}
	j := &Jail{Bwrap: b, Setpriv: DefaultSetpriv, UID: DefaultUID, GID: DefaultGID, bwrapID: idOf(b.Path)}
	if fi, err := os.Lstat(DefaultPrlimit); err == nil && rootOwnedNotWritable(DefaultPrlimit, fi) == nil {
		j.Prlimit = DefaultPrlimit
	}
	if os.Geteuid() == 0 {
		fi, err := os.Lstat(j.Setpriv)
		if err != nil {
			return nil, &AdmissionError{Path: j.Setpriv, Absent: true, Problem: "setpriv not found (needed to run hooks as an unprivileged host user when warden runs as root)", Fix: "apt-get install util-linux"}
		}
		if err := rootOwnedNotWritable(j.Setpriv, fi); err != nil {
			return nil, &AdmissionError{Path: j.Setpriv, Problem: err.Error(), Fix: "apt-get install --reinstall util-linux"}
		}
	}
	j.OwnNproc = os.Geteuid() == 0 && holdNproc() == nil
	return j, nil
}

// holdNproc lowers this process's own RLIMIT_NPROC (soft and hard) to
// HookNproc (never above the hard limit it had). As root, warden and the root half of the jail are exempt
// from it (CAP_SYS_RESOURCE); every hook, an unprivileged uid by then,
// inherits it and cannot raise it. That spares each run an exec of
// prlimit (a few ms on a busy host). Never raised: only lowered.
func holdNproc() error {
	n := uint64(HookNproc())
	var cur unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NPROC, &cur); err != nil {
		return err
	}
	if cur.Max <= n && cur.Cur <= n {
		return nil
	}
	return unix.Setrlimit(unix.RLIMIT_NPROC, &unix.Rlimit{Cur: min(cur.Cur, n), Max: min(cur.Max, n)})
}

// Spawner returns the hooks.Spawner for one run's plan. Argv, Dir and Env
// of the hooks.Spawn it is given must already be in jail terms (/module,
// /run/warden/broker.sock, ...).
func (j *Jail) Spawner(plan *Plan, network bool) *Spawner {
	return &Spawner{j: j, plan: plan, network: network}
}

// Spawner builds the bwrap command of one run. Release must be called
// once the command has started (or failed to): it closes the parent's
// copies of the files handed to bwrap.
type Spawner struct {
	j       *Jail
	plan    *Plan
	network bool
	egress  bool          // see egress.go
	ll      *LandlockPlan // the landlock backend (landlock_stage.go); nil: bwrap
	dialer  *os.File      // landlock: the hook's end of the broker's dialer
	files   []*os.File
	spawnerState
}

// Release closes the files handed to bwrap; if the command never started,
// the run's cgroup goes too.
func (s *Spawner) Release() {
	for _, f := range s.files {
		f.Close()
	}
	s.files = nil
	s.mu.Lock()
	started := s.pid != 0
	s.mu.Unlock()
	if !started {
		s.unblockHook()
		s.Close()
	}
}

// Fds handed to bwrap: ExtraFiles[i] is fd 3+i in the child.
const (
	fdSeccomp = 3
	fdPasswd  = 4
	fdGroup   = 5
	fdArgs    = 6
	fdBlock   = 7 // bwrap --block-fd: the hook waits until its tmpfs are pinned
	fdOuter   = 8 // as root, the outer layer's options (--args)
)

// Paths of the jail's own tools inside the outer layer.
const (
	innerBwrap   = "/opt/warden/libexec/bwrap"
	innerSetpriv = "/opt/warden/libexec/setpriv"
)

// Command implements hooks.Spawner.
//
// As root the jail has two layers. The outer bwrap runs as root only to
// lay out the mount plan (it can reach sources an unprivileged user
// cannot, such as the 0700 data dir) and a pid namespace; setpriv then
// drops to the unprivileged host uid, and the inner bwrap unshares the
// remaining namespaces, maps that uid, drops capabilities, clears the
// environment and loads the seccomp filter. So the hook is an unprivileged
// user on the host as well as in its namespace: a uid that maps to host
// root could read every root-only file it is shown.
//
// Not as root, one bwrap does all of it.
//
// The inner options travel through --args FD, never argv: they carry
// WARDEN_TOKEN, and a process's argv is world-readable in /proc. Only the
// hook's own command (which holds no secret) is on argv.
func (s *Spawner) Command(sp hooks.Spawn) (*exec.Cmd, error) {
	if len(sp.Argv) == 0 {
		return nil, errors.New("jail: empty argv")
	}
	if s.ll != nil {
		return s.landlockCommand(sp)
	}
	if s.egress {
		sp.Argv = bridgeArgv(sp.Argv)
	}
	seccomp, err := SeccompFile(s.network || s.egress)
	if err != nil {
		return nil, fmt.Errorf("jail: seccomp filter: %w", err)
	}
	s.files = append(s.files, seccomp)
	passwd, err := memFile("passwd", []byte(fmt.Sprintf("hook:x:%d:%d:warden hook:/tmp:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n", s.j.UID, s.j.GID)))
	if err != nil {
		s.Release()
		return nil, err
	}
	s.files = append(s.files, passwd)
	group, err := memFile("group", []byte(fmt.Sprintf("hook:x:%d:\nnogroup:x:65534:\n", s.j.GID)))
	if err != nil {
		s.Release()
		return nil, err
	}
	s.files = append(s.files, group)

	root := os.Geteuid() == 0
	inner := s.innerArgs(sp, !root)
	// The bwrap that lays out the mounts waits on fdBlock, after its
	// pivot and before it execs anything more, until pinTmpfs holds the
	// jail's sized tmpfs: a hook that fills /tmp and exits at once is
	// then seen to have filled it, however fast it is.
	block, unblock, err := os.Pipe()
	if err != nil {
		s.Release()
		return nil, fmt.Errorf("jail: pipe for --block-fd: %w", err)
	}
	s.files = append(s.files, block)
	s.mu.Lock()
	s.unblock = unblock
	s.mu.Unlock()
	blockArgs := []string{"--block-fd", strconv.Itoa(fdBlock)}
	if !root {
		inner = append(blockArgs, inner...)
	}
	argsFile, err := memFile("bwrap-args", nulJoin(inner))
	if err != nil {
		s.Release()
		return nil, err
	}
	s.files = append(s.files, argsFile)

	var argv []string
	files := []*os.File{seccomp, passwd, group, argsFile, block}
	if root {
		// The outer layer's options name host paths (the data dir, the
		// module's source): through --args, never argv, which the hook
		// reads as the jail's /proc/1/cmdline.
		outerFile, err := memFile("bwrap-outer-args", nulJoin(append(blockArgs, s.outerArgs()...)))
		if err != nil {
			s.Release()
			return nil, err
		}
		s.files = append(s.files, outerFile)
		files = append(files, outerFile)
		argv = []string{s.j.Bwrap.Path, "--args", strconv.Itoa(fdOuter)}
		argv = append(argv, "--", innerSetpriv,
			"--reuid", strconv.Itoa(s.j.UID), "--regid", strconv.Itoa(s.j.GID), "--clear-groups",
			"--inh-caps=-all", "--bounding-set=-all", "--",
			innerBwrap, "--args", strconv.Itoa(fdArgs))
	} else {
		argv = []string{s.j.Bwrap.Path, "--args", strconv.Itoa(fdArgs)}
	}
	argv = append(append(argv, "--"), sp.Argv...)
	if s.j.Prlimit != "" {
		// prlimit sets the limits and execs bwrap: the pid is the same,
		// and nothing of the run ever runs without them. (As root warden
		// holds RLIMIT_NPROC itself; the rlimits of a run without a
		// cgroup are the run's own.)
		var pre []string
		if !s.j.OwnNproc {
			n := strconv.Itoa(HookNproc())
			pre = append(pre, "--nproc="+n+":"+n)
		}
		pre = append(pre, s.rl.prlimitArgs()...)
		if len(pre) > 0 {
			argv = append(append(append([]string{s.j.Prlimit}, pre...), "--"), argv...)
		}
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=/usr/bin:/bin"} // bwrap's own; the hook's is set inside
	cmd.ExtraFiles = files
	return cmd, nil
}

// mountArgs turns the plan into bwrap mount options.
func (s *Spawner) mountArgs() []string {
	var a []string
	// bwrap makes missing parents of a target 0700 as root, which the
	// unprivileged hook could not enter: make every parent 0755 first.
	made := map[string]bool{"/": true}
	dirs := func(target string) {
		var chain []string
		for d := path.Dir(target); !made[d]; d = path.Dir(d) {
			chain = append([]string{d}, chain...)
			made[d] = true
		}
		for _, d := range chain {
			a = append(a, "--perms", "0755", "--dir", d)
		}
	}
	for _, r := range s.plan.Rows {
		dirs(r.Target)
	}
	dirs("/etc/passwd")
	dirs(innerBwrap)
	for _, r := range s.plan.Rows {
		switch {
		case r.Symlink != "":
			a = append(a, "--symlink", r.Symlink, r.Target)
		case r.Mode == ModeTmpfs:
			// Sized: an unsized tmpfs may take half the host's RAM.
			if size := s.tmpfsSize(r.Target); size > 0 {
				a = append(a, "--size", strconv.FormatInt(size, 10))
			}
			a = append(a, "--perms", "1777", "--tmpfs", r.Target)
		case r.Mode == ModeRW:
			a = append(a, "--bind", r.Source, r.Target)
		default:
			a = append(a, "--ro-bind", r.Source, r.Target)
		}
	}
	if s.egress {
		// The run dir is a tmpfs of its own: the proxy's socket is bound
		// in beside the broker's, from the same host run dir.
		for _, r := range s.plan.Rows {
			if r.Target == SocketTarget {
				a = append(a, "--bind", path.Join(path.Dir(r.Source), EgressSocketName), EgressSocketTarget)
			}
		}
	}
	// --ro-bind-data makes a 0600 file owned by whoever runs bwrap: as
	// root, the outer layer, so the hook could not read its own passwd
	// entry. 0644, as on any host.
	return append(a,
		"--perms", "0644", "--ro-bind-data", strconv.Itoa(fdPasswd), "/etc/passwd",
		"--perms", "0644", "--ro-bind-data", strconv.Itoa(fdGroup), "/etc/group",
		"--dev", "/dev")
}

// tmpfsSize is the size of the jail's tmpfs at target (0: unsized).
func (s *Spawner) tmpfsSize(target string) int64 {
	switch target {
	case "/tmp":
		return s.res.Tmp
	case RunTarget:
		return s.res.RunDir
	}
	return 0
}

// outerArgs: the root layer. Mounts and a pid namespace, nothing else;
// it ends by exec'ing setpriv.
func (s *Spawner) outerArgs() []string {
	a := []string{"--die-with-parent", "--unshare-pid"}
	a = append(a, s.mountArgs()...)
	return append(a, "--proc", "/proc",
		"--ro-bind", s.j.Bwrap.Path, innerBwrap,
		"--ro-bind", s.j.Setpriv, innerSetpriv)
}

// innerArgs: the jail proper. With standalone set (not root) it also lays
// out the mounts; nested, it takes the outer layer's root as it is.
func (s *Spawner) innerArgs(sp hooks.Spawn, standalone bool) []string {
	a := []string{"--unshare-user", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"}
	if !s.network {
		a = append(a, "--unshare-net")
	}
	a = append(a, "--uid", strconv.Itoa(s.j.UID), "--gid", strconv.Itoa(s.j.GID),
		"--die-with-parent", "--cap-drop", "ALL", "--hostname", "warden-hook")
	if sp.PTY == nil {
		// A session of its own, so that the hook cannot reach a
		// terminal it inherits (TIOCSTI into the operator's). A run
		// with a pty keeps the session the executor made for it: its
		// controlling terminal is that pty, warden's own, not the
		// operator's, and its job control and SIGWINCH need it.
		a = append(a, "--new-session")
	}
	if standalone {
		a = append(a, "--unshare-pid")
		a = append(a, s.mountArgs()...)
		a = append(a, "--proc", "/proc")
	} else {
		// The outer layer's /proc already shows only the jail's pid
		// namespace; a fresh proc mount is refused in a nested user
		// namespace because the outer one has locked submounts.
		a = append(a, "--bind", "/", "/", "--dev-bind", "/dev", "/dev")
	}
	a = append(a, "--seccomp", strconv.Itoa(fdSeccomp), "--clearenv")
	for _, kv := range sp.Env {
		if k, v, ok := cut(kv); ok {
			a = append(a, "--setenv", k, v)
		}
	}
	dir := sp.Dir
	if dir == "" {
		dir = ModuleTarget
	}
	// bwrap takes options from --args FD but the command only from argv.
	return append(a, "--chdir", dir)
}

func cut(kv string) (string, string, bool) {
	i := bytes.IndexByte([]byte(kv), '=')
	if i <= 0 {
		return "", "", false
	}
	return kv[:i], kv[i+1:], true
}

func nulJoin(args []string) []byte {
	var b bytes.Buffer
	for _, a := range args {
		b.WriteString(a)
		b.WriteByte(0)
	}
	return b.Bytes()
}

// memFile holds data in an anonymous memory file, positioned at 0.
func memFile(name string, data []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate("warden-"+name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("jail: memfd for %s: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), "warden-"+name)
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.Seek(0, 0); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// HandOver gives paths of the run dir (the dir itself, its socket, its
// tmp) to the jail's uid when warden runs as root, so the unprivileged
// hook can reach them. They stay private (0700/0600) and the data dir
// above them stays root's.
func (j *Jail) HandOver(paths ...string) error {
	if os.Geteuid() != 0 || j.UID == 0 {
		return nil
	}
	for _, p := range paths {
		if err := os.Lchown(p, j.UID, j.GID); err != nil {
			return fmt.Errorf("jail: hand %s to uid %d: %w", p, j.UID, err)
		}
	}
	return nil
}
