package cgroup

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/containerd/cgroups/v3/cgroup1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// v1 controllers a run's group is made in. memory and pids are required;
// cpu enforces the cpu limit; freezer makes the kill atomic.
var v1Controllers = []cgroup1.Name{cgroup1.Memory, cgroup1.Pids, cgroup1.Cpu, cgroup1.Freezer}

// cfsPeriod is the cpu controller's accounting period (the kernel's
// default, 100ms); the quota is the limit's share of it.
const cfsPeriod = 100000

// cpuShares is the scheduling weight of runs' groups, and of the warden
// group above them (v1 cpu.shares; a task's is 1024). A cgroup competes
// for CPU as one task: on a busy host, a run's bwrap, its init and its
// hook would together get one task's share, and a jailed no-op run took
// 2.4x as long as the same run outside a group (BenchmarkLimitsCost).
// The cpu limit is a ceiling (the CFS quota), not a lower priority: with
// the weight of 8 tasks, the run's processes get under contention what
// they would get outside, and never more than their quota.
const cpuShares = 8192

var (
	homeOnce sync.Once
	home     map[cgroup1.Name]string // this process's group in each hierarchy
	homeErr  error
)

// v1Home reads, once and before any thread of this process is moved to a
// run's group, where this process is in each hierarchy. Later reads of
// /proc/self/cgroup could see the main thread passing through a run's
// group (see start).
func v1Home() (map[cgroup1.Name]string, error) {
	homeOnce.Do(func() {
		p := cgroup1.NestedPath("")
		home = map[cgroup1.Name]string{}
		for _, n := range v1Controllers {
			if dir, err := p(n); err == nil {
				home[n] = dir
			} else if n == cgroup1.Memory || n == cgroup1.Pids {
				homeErr = fmt.Errorf("no %s group for this process: %w", n, err)
			}
		}
	})
	return home, homeErr
}

type v1Group struct {
	cg    cgroup1.Cgroup
	path  cgroup1.Path
	dirs  map[cgroup1.Name]string // absolute dirs of the run's group
	homes map[cgroup1.Name]string // absolute dirs of this process's group
}

// v1Hierarchy is the library's hierarchy, cut down to v1Controllers.
func v1Hierarchy() ([]cgroup1.Subsystem, error) {
	all, err := cgroup1.Default()
	if err != nil {
		return nil, err
	}
	var out []cgroup1.Subsystem
	for _, s := range all {
		for _, n := range v1Controllers {
			if s.Name() == n {
				out = append(out, s)
			}
		}
	}
	return out, nil
}

func newV1(name string, lim Limits) (*v1Group, error) {
	homes, err := v1Home()
	if err != nil {
		return nil, err
	}
	path := func(n cgroup1.Name) (string, error) {
		h, ok := homes[n]
		if !ok {
			return "", cgroup1.ErrControllerNotActive
		}
		return filepath.Join(h, "warden", name), nil
	}
	res := &specs.LinuxResources{}
	if lim.Memory > 0 {
		m := lim.Memory
		res.Memory = &specs.LinuxMemory{Limit: &m}
	}
	if lim.Pids > 0 {
		res.Pids = &specs.LinuxPids{Limit: &lim.Pids}
	}
	if lim.CPU > 0 {
		quota := int64(lim.CPU * cfsPeriod)
		period := uint64(cfsPeriod)
		shares := uint64(cpuShares)
		res.CPU = &specs.LinuxCPU{Quota: &quota, Period: &period, Shares: &shares}
	}
	cg, err := cgroup1.New(path, res, cgroup1.WithHierarchy(v1Hierarchy), cgroup1.InitOpts(func(c *cgroup1.InitConfig) error {
		// cpu and freezer may be missing; memory and pids may not.
		c.InitCheck = func(s cgroup1.Subsystem, _ cgroup1.Path, err error) error {
			if s.Name() == cgroup1.Memory || s.Name() == cgroup1.Pids {
				return err
			}
			return cgroup1.ErrIgnoreSubsystem
		}
		return nil
	}))
	if err != nil {
		return nil, err
	}
	g := &v1Group{cg: cg, path: path, dirs: map[cgroup1.Name]string{}, homes: map[cgroup1.Name]string{}}
	for _, s := range cg.Subsystems() {
		p, ok := s.(interface{ Path(string) string })
		if !ok {
			continue
		}
		rel, _ := path(s.Name())
		g.dirs[s.Name()] = p.Path(rel)
		g.homes[s.Name()] = p.Path(homes[s.Name()])
	}
	if dir := g.dirs[cgroup1.Cpu]; dir != "" && lim.CPU > 0 {
		// The warden group holds every run: it weighs as much as one.
		_ = writeFile(filepath.Dir(dir), "cpu.shares", strconv.Itoa(cpuShares))
	}
	if g.dirs[cgroup1.Memory] == "" || g.dirs[cgroup1.Pids] == "" {
		cg.Delete()
		return nil, errors.New("the memory or pids hierarchy is missing")
	}
	// Without swap accounting a group could page out past its limit;
	// with it, memory+swap gets the same limit.
	if lim.Memory > 0 {
		if _, err := os.Stat(filepath.Join(g.dirs[cgroup1.Memory], "memory.memsw.limit_in_bytes")); err == nil {
			if err := writeFile(g.dirs[cgroup1.Memory], "memory.memsw.limit_in_bytes", strconv.FormatInt(lim.Memory, 10)); err != nil {
				cg.Delete()
				return nil, fmt.Errorf("memory+swap limit: %w", err)
			}
		}
	}
	return g, nil
}

// start forks cmd from a thread that is, for that moment, in the run's
// group: the child is born there (cgroup v1 places threads one by one, and
// a child inherits its forking thread's groups), and so is everything it
// forks. There is no window in which the hook could fork outside.
//
// The thread goes home right after. If it cannot (it never should), it
// stays locked and parked until the group is deleted: its exit would fire
// the child's parent-death signal, and its wandering would leave warden's
// own work counted in the run's group.
func (g *v1Group) start(cmd *exec.Cmd, over <-chan struct{}) error {
	type result struct{ err error }
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		tid := strconv.Itoa(unix.Gettid())
		var moved []cgroup1.Name
		var err error
		for n, dir := range g.dirs {
			if err = writeFile(dir, "tasks", tid); err != nil {
				err = fmt.Errorf("joining the run's %s group: %w", n, err)
				break
			}
			moved = append(moved, n)
		}
		if err == nil {
			err = cmd.Start()
		}
		var backErr error
		for _, n := range moved {
			if e := writeFile(g.homes[n], "tasks", tid); e != nil {
				backErr = e
			}
		}
		if backErr == nil {
			runtime.UnlockOSThread()
			done <- result{err}
			return
		}
		if err == nil {
			// Started, but warden's thread is stuck in the group: keep it
			// until the run is over, and say so.
			done <- result{nil}
			<-over
			return // the locked thread exits with this goroutine
		}
		done <- result{err}
		<-over
	}()
	r := <-done
	return r.err
}

func (g *v1Group) procs() ([]int, error) {
	// The pids hierarchy holds every process of the run (its group is
	// always there); cgroup.procs lists thread group ids.
	return readPids(filepath.Join(g.dirs[cgroup1.Pids], "cgroup.procs"))
}

func (g *v1Group) counter(limit string) uint64 {
	switch limit {
	case LimitMemory:
		return readKey(filepath.Join(g.dirs[cgroup1.Memory], "memory.oom_control"), "oom_kill")
	case LimitPids:
		return readKey(filepath.Join(g.dirs[cgroup1.Pids], "pids.events"), "max")
	}
	return 0
}

// kill freezes the group (when the freezer is there), so nothing in it
// can fork while it is signalled, sends SIGKILL to each process and thaws
// it (a frozen process dies only once thawed).
func (g *v1Group) kill() error {
	frozen := false
	if _, ok := g.dirs[cgroup1.Freezer]; ok {
		frozen = g.freeze() == nil
	}
	ps, err := g.procs()
	if err == nil {
		err = signalAll(ps, unix.SIGKILL)
	}
	if frozen {
		if terr := g.cg.Thaw(); terr != nil && err == nil {
			err = terr
		}
	}
	return err
}

// freeze freezes the group, bounded: a process in uninterruptible sleep
// can keep it FREEZING; then the kill goes on unfrozen.
func (g *v1Group) freeze() error {
	dir := g.dirs[cgroup1.Freezer]
	if err := writeFile(dir, "freezer.state", "FROZEN"); err != nil {
		return err
	}
	for i := 0; i < 50; i++ {
		b, err := os.ReadFile(filepath.Join(dir, "freezer.state"))
		if err != nil {
			return err
		}
		if string(b) == "FROZEN\n" {
			return nil
		}
		time.Sleep(time.Millisecond)
	}
	return errors.New("the freezer did not settle")
}

func (g *v1Group) remove() error {
	err := g.cg.Delete()
	if errors.Is(err, cgroup1.ErrCgroupDeleted) {
		return nil
	}
	return err
}
