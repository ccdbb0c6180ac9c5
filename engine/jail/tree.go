package jail

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wardenhq/warden/engine/hooks"
	"github.com/wardenhq/warden/engine/jail/cgroup"
)

// Enforcement says which of a run's limits the kernel holds it to.
type Enforcement struct {
	// Cgroup: memory and pids (and cpu when CPU) are enforced by the
	// run's cgroup. False is "limits off": only the tmpfs sizes and the
	// hooks' RLIMIT_NPROC stand.
	Cgroup bool
	CPU    bool
	// Why is, when Cgroup is false, why not (from cgroup.Probe).
	Why string
	// Rlimit, when Cgroup is false: the run's processes have rlimits
	// (Rlimits) and warden watches the tree's memory and pids
	// (watch.go): per process and by looking, weaker than a cgroup.
	Rlimit  bool
	Rlimits Rlimits
}

// Limit sets the resource limits of the run (named run, a path element,
// of timeout) and makes its cgroup, when the host has one to offer;
// without one, the run gets rlimits and warden's watch instead. The
// tmpfs sizes hold in any case. Call it before Command.
func (s *Spawner) Limit(run string, r hooks.Resources, timeout time.Duration) (Enforcement, error) {
	s.res = r
	sup := cgroup.Probe()
	if sup.Version == 0 {
		s.rl, s.watched = rlimitsFor(r, timeout), true
		return Enforcement{Why: sup.Detail, Rlimit: true, Rlimits: s.rl}, nil
	}
	g, err := cgroup.New(run, cgroup.Limits{Memory: r.Memory, Pids: r.Pids, CPU: r.CPU})
	if err != nil {
		return Enforcement{}, err
	}
	s.group = g
	return Enforcement{Cgroup: true, CPU: sup.CPU}, nil
}

// Start implements hooks.Tree: the command's process is born in the run's
// cgroup.
func (s *Spawner) Start(cmd *exec.Cmd) error {
	var err error
	if s.group != nil {
		err = s.group.Start(cmd)
	} else {
		err = cmd.Start()
	}
	if err == nil {
		done := make(chan struct{})
		s.mu.Lock()
		s.pid, s.done = cmd.Process.Pid, done
		s.mu.Unlock()
		if s.ll == nil { // landlock: no tmpfs to pin, nothing held back
			go s.pinTmpfs(done)
		}
		if s.watched {
			go s.watch(cmd.Process.Pid, s.ll != nil, done)
		}
	}
	return err
}

// pinCap bounds how long pinTmpfs looks for the jail's tmpfs; holdCap,
// how long the hook is held back for it. Past holdCap (a host where the
// tmpfs cannot be pinned at all: no /proc/PID/task/PID/children, an
// unreadable /proc/PID/root) the hook goes on, and a full tmpfs may then
// go unnamed; the time is the hook's own, so it is kept short.
const (
	pinCap  = 10 * time.Second
	holdCap = 2 * time.Second
)

// pinDelay holds pinTmpfs back before it first looks: 0, but for the
// test that stands in for a host too loaded to look at once.
var pinDelay time.Duration

// pinTmpfs opens the jail's /tmp and run dir as soon as bwrap has mounted
// them, and keeps them open until Close: so a hook that fills one and
// exits at once is still seen to have filled it (the tmpfs outlives the
// jail's mount namespace while it is held).
//
// bwrap waits (--block-fd) until they are held, or until holdCap has
// passed, so nothing of the hook runs before.
func (s *Spawner) pinTmpfs(done <-chan struct{}) {
	defer s.unblockHook()
	wantTmp, wantRun := s.sizedTmpfs()
	start := time.Now()
	deadline := start.Add(pinCap)
	if pinDelay > 0 {
		time.Sleep(pinDelay)
	}
	for time.Now().Before(deadline) {
		if time.Since(start) > holdCap {
			s.unblockHook() // the hook goes on; the tmpfs are still looked for
		}
		root := s.jailRoot()
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return
		}
		if root != "" {
			if s.tmpFD == nil && wantTmp {
				s.tmpFD = openTmpfs(root+"/tmp", s.res.Tmp)
			}
			if s.runFD == nil && wantRun {
				s.runFD = openTmpfs(root+RunTarget, s.res.RunDir)
			}
		}
		pinned := (s.tmpFD != nil || !wantTmp) && (s.runFD != nil || !wantRun)
		s.mu.Unlock()
		if pinned {
			return
		}
		select {
		case <-done:
			return
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// unblockHook lets bwrap go on to the hook (see pinTmpfs); idempotent.
func (s *Spawner) unblockHook() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unblock != nil {
		s.unblock.Close() // bwrap's read of --block-fd returns: EOF
		s.unblock = nil
	}
}

// sizedTmpfs: the plan mounts /tmp, the run dir, as tmpfs of a size
// (the ones pinTmpfs holds).
func (s *Spawner) sizedTmpfs() (tmp, run bool) {
	if s.plan == nil {
		return false, false
	}
	for _, r := range s.plan.Rows {
		if r.Mode == ModeTmpfs && r.Symlink == "" && s.tmpfsSize(r.Target) > 0 {
			tmp = tmp || r.Target == "/tmp"
			run = run || r.Target == RunTarget
		}
	}
	return tmp, run
}

// openTmpfs opens dir if it is the jail's tmpfs of that size, rounded
// up to whole blocks as the kernel does (before bwrap has set up the
// jail, the path is somewhere else).
func openTmpfs(dir string, size int64) *os.File {
	f, err := os.OpenFile(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	var st unix.Statfs_t
	if unix.Fstatfs(int(f.Fd()), &st) != nil || st.Type != unix.TMPFS_MAGIC || size <= 0 || st.Bsize <= 0 ||
		st.Blocks != (uint64(size)+uint64(st.Bsize)-1)/uint64(st.Bsize) {
		f.Close()
		return nil
	}
	return f
}

// Terminate implements hooks.Tree. SIGTERM goes to every process of the
// run except bubblewrap's own (the outer monitor, the pid namespace's
// init and, as root, the inner monitor): those stay up while the hook
// stops, and follow it out when it exits. Sent to bwrap, SIGTERM would end
// the pid namespace and with it the hook, at once.
func (s *Spawner) Terminate() {
	if s.group != nil {
		_ = s.group.Signal(syscall.SIGTERM, s.isBwrap)
		return
	}
	if s.ll != nil {
		// No bwrap around the hook: the stage exec'd it, in its own
		// process group.
		s.mu.Lock()
		pid := s.pid
		s.mu.Unlock()
		if pid > 0 {
			_ = syscall.Kill(-pid, syscall.SIGTERM)
		}
	}
	for _, p := range s.procs() {
		if !s.isBwrap(p) {
			_ = syscall.Kill(p, syscall.SIGTERM)
		}
	}
}

// Kill implements hooks.Tree: the run's cgroup, all of it. Without one
// there is nothing more to do than the executor's SIGKILL to bwrap's
// process group: the pid namespace's init dies with it, and the kernel
// kills everything in the namespace.
//
// Under landlock with no cgroup, the stage is the run's subreaper
// (landlock_reaper.go): everything of the run, setsid'd daemons
// included, is a descendant of it. They are killed here, before the
// executor's SIGKILL to the process group ends the stage: after that
// they would be init's, and nothing would find them.
func (s *Spawner) Kill() {
	if s.group != nil {
		_ = s.group.Kill()
		return
	}
	if s.ll != nil {
		// pid is still the stage's: the executor calls Kill only before
		// it reaps the stage (hooks.Process waits without reaping), so
		// the pid cannot have gone to another process.
		s.mu.Lock()
		pid := s.pid
		s.mu.Unlock()
		if pid > 0 {
			killBelow(pid)
		}
	}
}

// killBelow SIGKILLs the live descendants of pid (not pid itself) until
// none is left, a bounded number of times: a process forking while the
// tree is walked leaves a child that the next walk finds.
func killBelow(pid int) {
	for range 64 {
		d := descendants(pid)[1:]
		if len(d) == 0 {
			return
		}
		for _, p := range d {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		// SIGKILL is delivered asynchronously: the killed ones' children
		// are reparented to the stage only once they are gone.
		time.Sleep(time.Millisecond)
	}
}

// Exceeded implements hooks.Tree: an OOM kill or a refused fork in the
// run's cgroup, or a full /tmp or run dir.
func (s *Spawner) Exceeded() (string, string) {
	s.mu.Lock()
	hit, why := s.hit, s.hitWhy
	s.mu.Unlock()
	if hit != "" {
		return hit, why
	}
	if s.group != nil {
		switch s.group.Hit() {
		case cgroup.LimitMemory:
			return hooks.LimitMemory, "memory limit " + hooks.FormatSize(s.res.Memory) + " reached"
		case cgroup.LimitPids:
			return hooks.LimitPids, "pids limit " + strconv.FormatInt(s.res.Pids, 10) + " reached"
		}
	}
	s.mu.Lock()
	tmp, run := tmpfsFull(s.tmpFD), tmpfsFull(s.runFD)
	s.mu.Unlock()
	switch {
	case tmp:
		return hooks.LimitTmp, "tmp limit " + hooks.FormatSize(s.res.Tmp) + " reached (/tmp is full)"
	case run:
		return hooks.LimitRunDir, "run_dir limit " + hooks.FormatSize(s.res.RunDir) + " reached (" + RunTarget + " is full)"
	}
	return "", ""
}

// Close implements hooks.Tree: the run's cgroup goes, with whatever is
// left in it.
func (s *Spawner) Close() error {
	s.mu.Lock()
	if s.done != nil {
		close(s.done)
		s.done = nil
	}
	for _, f := range []*os.File{s.tmpFD, s.runFD} {
		if f != nil {
			f.Close()
		}
	}
	s.tmpFD, s.runFD = nil, nil
	s.closed = true
	s.mu.Unlock()
	s.unblockHook()
	if s.group == nil {
		return nil
	}
	return s.group.Delete() // idempotent; s.group stays for late readers
}

// HoldsAll implements hooks.Holder: with a cgroup, every process of the
// run is born in it and cannot leave it, and Close (Group.Delete) returns
// only once it is empty, bubblewrap's pid-namespace init included (the
// outer bwrap exits as soon as it has the hook's status, before that
// init is reaped).
func (s *Spawner) HoldsAll() bool { return s.group != nil }

// procs lists the run's processes: its cgroup's, else the descendants of
// the bwrap process.
func (s *Spawner) procs() []int {
	if s.group != nil {
		return s.group.Procs()
	}
	s.mu.Lock()
	pid := s.pid
	s.mu.Unlock()
	if pid == 0 {
		return nil
	}
	return descendants(pid)
}

// jailRoot is /proc/PID/root of a process inside the jail's mount
// namespace (bwrap's first child), "" while there is none.
func (s *Spawner) jailRoot() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inner == 0 && s.pid != 0 {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", s.pid, s.pid))
		if f := strings.Fields(string(b)); len(f) > 0 {
			s.inner, _ = strconv.Atoi(f[0])
		}
	}
	if s.inner == 0 {
		return ""
	}
	return fmt.Sprintf("/proc/%d/root", s.inner)
}

// tmpfsFull: f (a pinned tmpfs) has no block left.
func tmpfsFull(f *os.File) bool {
	if f == nil {
		return false
	}
	var st unix.Statfs_t
	if unix.Fstatfs(int(f.Fd()), &st) != nil {
		return false
	}
	return st.Blocks > 0 && st.Bavail == 0
}

// isBwrap: pid runs the admitted bubblewrap binary (same file: the bind
// mount inside the jail is the same inode).
func (s *Spawner) isBwrap(pid int) bool {
	if s.j.Bwrap == nil {
		return false // the landlock backend
	}
	var st syscall.Stat_t
	if syscall.Stat(fmt.Sprintf("/proc/%d/exe", pid), &st) != nil {
		return false
	}
	return st.Dev == s.j.bwrapID.dev && st.Ino == s.j.bwrapID.ino
}

type fileID struct{ dev, ino uint64 }

func idOf(path string) fileID {
	var st syscall.Stat_t
	if syscall.Stat(path, &st) != nil {
		return fileID{}
	}
	return fileID{dev: st.Dev, ino: st.Ino}
}

// descendants lists pid's live descendants, pid first.
func descendants(pid int) []int {
	parent := map[int][]int{}
	names, _ := os.ReadDir("/proc")
	for _, n := range names {
		p, err := strconv.Atoi(n.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + n.Name() + "/stat")
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 || f[0] == "Z" {
			continue
		}
		pp, _ := strconv.Atoi(f[1])
		parent[pp] = append(parent[pp], p)
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, parent[out[i]]...)
	}
	return out
}

var (
	_ hooks.Tree     = (*Spawner)(nil)
	_ hooks.Releaser = (*Spawner)(nil)
)

// spawnerState is the Spawner's run state (see tree.go); it lives in
// Spawner.
type spawnerState struct {
	res   hooks.Resources
	group *cgroup.Group
	mu    sync.Mutex
	pid   int // bwrap (through prlimit)
	inner int // bwrap's first child, in the jail's mount namespace
	// tmpFD and runFD hold the jail's /tmp and run dir (see pinTmpfs).
	tmpFD, runFD *os.File
	// unblock is the write end of bwrap's --block-fd, closed once the
	// tmpfs are pinned (or never will be).
	unblock *os.File
	done    chan struct{} // closed by Close: pinTmpfs and watch stop
	closed  bool          // Close has run: nothing more is pinned
	// Without a cgroup (watched): the run's rlimits, and the limit
	// warden's watch killed the run for, with its text.
	watched     bool
	rl          Rlimits
	hit, hitWhy string
}
