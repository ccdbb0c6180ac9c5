package jail

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"warden/engine/hooks"
	"warden/engine/jail/cgroup"
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
}

// Limit sets the resource limits of the run (named run, a path element)
// and makes its cgroup, when the host has one to offer. The tmpfs sizes
// hold in any case. Call it before Command.
func (s *Spawner) Limit(run string, r hooks.Resources) (Enforcement, error) {
	s.res = r
	sup := cgroup.Probe()
	if sup.Version == 0 {
		return Enforcement{Why: sup.Detail}, nil
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
		s.mu.Lock()
		s.pid = cmd.Process.Pid
		s.mu.Unlock()
	}
	return err
}

// Terminate implements hooks.Tree. SIGTERM goes to every process of the
// run except bubblewrap's own (the outer monitor, the pid namespace's
// init and, as root, the inner monitor): those stay up while the hook
// stops, and follow it out when it exits. Sent to bwrap, SIGTERM would end
// the pid namespace and with it the hook, at once.
func (s *Spawner) Terminate() {
	for _, p := range s.procs() {
		if !s.isBwrap(p) {
			_ = syscall.Kill(p, syscall.SIGTERM)
		}
	}
}

// Kill implements hooks.Tree.
func (s *Spawner) Kill() {
	if s.group != nil {
		_ = s.group.Kill()
		return
	}
	for _, p := range s.procs() {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
}

// Exceeded implements hooks.Tree: an OOM kill or a refused fork in the
// run's cgroup, or a full /tmp or run dir.
func (s *Spawner) Exceeded() (string, string) {
	if s.group != nil {
		switch s.group.Hit() {
		case cgroup.LimitMemory:
			return hooks.LimitMemory, "memory limit " + hooks.FormatSize(s.res.Memory) + " reached"
		case cgroup.LimitPids:
			return hooks.LimitPids, "pids limit " + strconv.FormatInt(s.res.Pids, 10) + " reached"
		}
	}
	if root := s.jailRoot(); root != "" {
		if tmpfsFull(root + "/tmp") {
			return hooks.LimitTmp, "tmp limit " + hooks.FormatSize(s.res.Tmp) + " reached (/tmp is full)"
		}
		if tmpfsFull(root + RunTarget) {
			return hooks.LimitRunDir, "run_dir limit " + hooks.FormatSize(s.res.RunDir) + " reached (" + RunTarget + " is full)"
		}
	}
	return "", ""
}

// Close implements hooks.Tree: the run's cgroup goes, with whatever is
// left in it.
func (s *Spawner) Close() error {
	if s.group == nil {
		return nil
	}
	err := s.group.Delete()
	s.group = nil
	return err
}

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

// tmpfsFull: path is a tmpfs with no block left.
func tmpfsFull(path string) bool {
	var st unix.Statfs_t
	if unix.Statfs(path, &st) != nil || st.Type != unix.TMPFS_MAGIC {
		return false
	}
	return st.Blocks > 0 && st.Bavail == 0
}

// isBwrap: pid runs the admitted bubblewrap binary (same file: the bind
// mount inside the jail is the same inode).
func (s *Spawner) isBwrap(pid int) bool {
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

var _ hooks.Tree = (*Spawner)(nil)

// spawnerState is the Spawner's run state (see tree.go); it lives in
// Spawner.
type spawnerState struct {
	res   hooks.Resources
	group *cgroup.Group
	mu    sync.Mutex
	pid   int // bwrap (through prlimit)
	inner int // bwrap's first child, in the jail's mount namespace
}
