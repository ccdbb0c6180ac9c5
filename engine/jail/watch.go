package jail

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/wardenhq/warden/engine/hooks"
)

// Where no cgroup holds a run (an unprivileged container, a host with
// no delegation), the engine watches the run's tree itself: every
// WatchPeriod it counts the processes below the one it started and adds
// up their private resident memory, and past the run's pids or memory
// limit it kills the tree and names the limit, as a cgroup's events
// would. The stage (landlock) or the pid namespace (bwrap) keeps every
// process of the run below it, setsid daemons included, so the walk
// sees them all. It is weaker than a cgroup (a process forked or a page
// touched between two looks is seen late), which is why each process
// also has its rlimits (rlimits.go).

// WatchPeriod is how often the tree is looked at: a memory bomb grows
// by at most a few tens of MiB in that time.
const WatchPeriod = 20 * time.Millisecond

var pageSize = uint64(os.Getpagesize())

// watch looks at the tree below pid until done is closed, or until it
// kills the tree for a limit (recorded in s.hit). skipRoot: pid itself
// is warden's own (the landlock stage), not the hook's.
func (s *Spawner) watch(pid int, skipRoot bool, done <-chan struct{}) {
	t := time.NewTicker(WatchPeriod)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		procs := treeOf(pid)
		if skipRoot && len(procs) > 0 {
			procs = procs[1:]
		}
		limit, why := "", ""
		if p := s.res.Pids; p > 0 && int64(len(procs)) > p {
			limit, why = hooks.LimitPids, "pids limit "+strconv.FormatInt(p, 10)+" reached (counted by warden's watch: no cgroup here)"
		} else if m := s.res.Memory; m > 0 {
			if used := privateResident(procs); used > uint64(m) {
				limit, why = hooks.LimitMemory, "memory limit "+hooks.FormatSize(m)+" reached (the run's processes together, counted by warden's watch: no cgroup here)"
			}
		}
		if limit == "" {
			continue
		}
		s.mu.Lock()
		s.hit, s.hitWhy = limit, why
		s.mu.Unlock()
		killBelow(pid)
		if !skipRoot {
			_ = syscall.Kill(pid, syscall.SIGKILL) // bwrap: its pid namespace goes with it
		}
		return
	}
}

// treeOf lists pid and its live descendants, through the kernel's
// children lists (descendants' scan of all /proc where it has none).
func treeOf(pid int) []int {
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		p := strconv.Itoa(out[i])
		tasks, err := os.ReadDir("/proc/" + p + "/task")
		if err != nil {
			continue // gone meanwhile
		}
		for _, t := range tasks {
			b, err := os.ReadFile("/proc/" + p + "/task/" + t.Name() + "/children")
			if err != nil {
				if os.IsNotExist(err) && i == 0 {
					return descendants(pid) // CONFIG_PROC_CHILDREN off
				}
				continue
			}
			for _, f := range strings.Fields(string(b)) {
				if c, err := strconv.Atoi(f); err == nil {
					out = append(out, c)
				}
			}
		}
	}
	return out
}

// privateResident adds up the resident pages of procs that are not
// file-backed or shared (statm's resident minus shared): what a memory
// bomb grows, counted once per process.
func privateResident(procs []int) uint64 {
	var sum uint64
	for _, p := range procs {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/statm")
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) < 3 {
			continue
		}
		res, _ := strconv.ParseUint(f[1], 10, 64)
		shared, _ := strconv.ParseUint(f[2], 10, 64)
		if res > shared {
			sum += (res - shared) * pageSize
		}
	}
	return sum
}
