package cgroup

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/containerd/cgroups/v3/cgroup1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// v1 controllers a run's group is made in. memory and pids are required;
// cpu enforces the cpu limit. (No freezer: the kill repeats until the group
// is empty, and the pids limit bounds what a fork race can add.)
var v1Controllers = []cgroup1.Name{cgroup1.Memory, cgroup1.Pids, cgroup1.Cpu}

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
// group (see launch).
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
	suffix string // "/warden/NAME": the end of the group's path in each hierarchy
	cg     cgroup1.Cgroup
	path   cgroup1.Path
	dirs   map[cgroup1.Name]string // absolute dirs of the run's group
	homes  map[cgroup1.Name]string // absolute dirs of this process's group

	// The launcher (see launch): start sends it the command; release
	// (once) lets it go home unused; home is closed once it is home.
	reqs    chan launchReq
	release sync.Once
	home    chan struct{}
	joined  chan struct{} // closed once the launcher has joined (joinErr set)
	joinErr error
}

type launchReq struct {
	cmd  *exec.Cmd
	done chan error
}

var (
	hierMu sync.Mutex
	hier   []cgroup1.Subsystem // v1Hierarchy's, once read
)

// v1Hierarchy is the library's hierarchy, cut down to v1Controllers. It
// is read once (the library parses /proc/self/mountinfo for it, a
// quarter of a millisecond that each run paid twice): where the
// hierarchies are mounted does not change under a running engine, as
// Probe, also read once, assumes too.
func v1Hierarchy() ([]cgroup1.Subsystem, error) {
	hierMu.Lock()
	defer hierMu.Unlock()
	if hier != nil {
		return hier, nil
	}
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
	hier = out
	return out, nil
}

func newV1(name string, lim Limits) (*v1Group, error) {
	// A spare that cannot be taken (its launcher failed, or the rename
	// did) is removed; a fresh group serves instead.
	g, _ := takeSpare(name)
	if g == nil {
		var err error
		if g, err = makeV1(name); err != nil {
			return nil, err
		}
	}
	go refillSpare()
	if err := g.setLimits(lim); err != nil {
		g.remove()
		return nil, err
	}
	return g, nil
}

// A spare group: made, with its launcher joined, ahead of the next run,
// which takes it (renamed to the run's name, its limits set) instead of
// waiting for its launcher's join (an RCU grace period, see launch). At
// most one; a run that finds none makes its own. A spare left behind by
// a process that has exited is removed by the next (cleanSpares).
var (
	spareMu      sync.Mutex
	spare        *v1Group
	spareFilling bool
	spareSeq     int
	cleanOnce    sync.Once
)

const sparePrefix = "spare-"

func takeSpare(name string) (*v1Group, error) {
	spareMu.Lock()
	g := spare
	spare = nil
	spareMu.Unlock()
	if g == nil {
		return nil, nil
	}
	// Renamed only once its launcher is in: a rename under a joining
	// launcher would pull the paths from under it.
	if <-g.joined; g.joinErr != nil {
		g.remove()
		return nil, nil
	}
	if err := g.rename(name); err != nil {
		g.remove()
		return nil, err
	}
	return g, nil
}

func refillSpare() {
	cleanOnce.Do(cleanSpares)
	spareMu.Lock()
	if spare != nil || spareFilling {
		spareMu.Unlock()
		return
	}
	spareFilling = true
	spareSeq++
	name := fmt.Sprintf("%s%d-%d", sparePrefix, os.Getpid(), spareSeq)
	spareMu.Unlock()
	g, err := makeV1(name)
	spareMu.Lock()
	spareFilling = false
	if err == nil {
		spare = g
	}
	spareMu.Unlock()
}

// cleanSpares removes the spares of processes that are gone (their
// launcher thread ended with them, so the groups are empty). A live
// process's spare is left alone, even before its launcher is in.
func cleanSpares() {
	homes, err := v1Home()
	if err != nil {
		return
	}
	subs, err := v1Hierarchy()
	if err != nil {
		return
	}
	for _, sub := range subs {
		p, ok := sub.(interface{ Path(string) string })
		h, ok2 := homes[sub.Name()]
		if !ok || !ok2 {
			continue
		}
		dirs, _ := filepath.Glob(filepath.Join(p.Path(filepath.Join(h, "warden")), sparePrefix+"*"))
		for _, d := range dirs {
			pid, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(d), sparePrefix), "-")
			if _, err := os.Stat("/proc/" + pid); err == nil {
				continue // a live process's (maybe not joined yet)
			}
			os.Remove(d) // fails, harmlessly, if anything is in it
		}
	}
}

// makeV1 makes the group NAME with no limits and starts its launcher.
func makeV1(name string) (*v1Group, error) {
	homes, err := v1Home()
	if err != nil {
		return nil, err
	}
	g := &v1Group{homes: map[cgroup1.Name]string{}}
	path := g.pathFor(homes, name)
	cg, err := cgroup1.New(path, &specs.LinuxResources{}, v1Opts()...)
	if err != nil {
		return nil, err
	}
	if err := g.bind(cg, homes, name); err != nil {
		cg.Delete()
		return nil, err
	}
	g.reqs, g.home, g.joined = make(chan launchReq), make(chan struct{}), make(chan struct{})
	go g.launch()
	return g, nil
}

func (g *v1Group) pathFor(homes map[cgroup1.Name]string, name string) cgroup1.Path {
	return func(n cgroup1.Name) (string, error) {
		h, ok := homes[n]
		if !ok {
			return "", cgroup1.ErrControllerNotActive
		}
		return filepath.Join(h, "warden", name), nil
	}
}

func v1Opts() []cgroup1.InitOpts {
	return []cgroup1.InitOpts{cgroup1.WithHierarchy(v1Hierarchy), cgroup1.InitOpts(func(c *cgroup1.InitConfig) error {
		// cpu may be missing; memory and pids may not.
		c.InitCheck = func(s cgroup1.Subsystem, _ cgroup1.Path, err error) error {
			if s.Name() == cgroup1.Memory || s.Name() == cgroup1.Pids {
				return err
			}
			return cgroup1.ErrIgnoreSubsystem
		}
		return nil
	})}
}

// bind points g at the library's group cg, named name.
func (g *v1Group) bind(cg cgroup1.Cgroup, homes map[cgroup1.Name]string, name string) error {
	path := g.pathFor(homes, name)
	g.cg, g.path, g.suffix = cg, path, "/warden/"+name
	g.dirs = map[cgroup1.Name]string{}
	for _, s := range cg.Subsystems() {
		p, ok := s.(interface{ Path(string) string })
		if !ok {
			continue
		}
		rel, _ := path(s.Name())
		g.dirs[s.Name()] = p.Path(rel)
		g.homes[s.Name()] = p.Path(homes[s.Name()])
	}
	if g.dirs[cgroup1.Memory] == "" || g.dirs[cgroup1.Pids] == "" {
		return errors.New("the memory or pids hierarchy is missing")
	}
	return nil
}

// rename gives a spare the run's name, in every hierarchy (the launcher
// thread in it stays: a group keeps its members when renamed).
func (g *v1Group) rename(name string) error {
	homes, err := v1Home()
	if err != nil {
		return err
	}
	for n, dir := range g.dirs {
		if err := os.Rename(dir, filepath.Join(filepath.Dir(dir), name)); err != nil {
			return fmt.Errorf("renaming the %s group: %w", n, err)
		}
	}
	cg, err := cgroup1.Load(g.pathFor(homes, name), v1Opts()...)
	if err != nil {
		return err
	}
	return g.bind(cg, homes, name)
}

// setLimits writes lim to the group.
func (g *v1Group) setLimits(lim Limits) error {
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
	if err := g.cg.Update(res); err != nil {
		return err
	}
	if dir := g.dirs[cgroup1.Cpu]; dir != "" && lim.CPU > 0 {
		// The warden group holds every run: it weighs as much as one.
		_ = writeFile(filepath.Dir(dir), "cpu.shares", strconv.Itoa(cpuShares))
	}
	// Without swap accounting a group could page out past its limit;
	// with it, memory+swap gets the same limit.
	if lim.Memory > 0 {
		if _, err := os.Stat(filepath.Join(g.dirs[cgroup1.Memory], "memory.memsw.limit_in_bytes")); err == nil {
			if err := writeFile(g.dirs[cgroup1.Memory], "memory.memsw.limit_in_bytes", strconv.FormatInt(lim.Memory, 10)); err != nil {
				return fmt.Errorf("memory+swap limit: %w", err)
			}
		}
	}
	return nil
}

// launch is the run's launcher: a goroutine locked to a thread that joins
// the run's group as soon as the group exists, and forks the run's command
// from there when start asks: the child is born in the group (cgroup v1
// places threads one by one, and a child inherits its forking thread's
// groups), and so is everything it forks. There is no window in which the
// hook could fork outside.
//
// Each move of a thread between v1 groups waits for an RCU grace period
// (a millisecond or more on a busy host): the join happens while the
// engine still records the run's start, and the way home after the fork
// while the hook runs, so neither delays the run.
//
// The thread then lives on as any other: it must never end, for a child's
// parent-death signal fires when the thread that forked it ends (and Go
// ends a thread only when a goroutine locked to it returns). If it cannot
// go home (it never should), it stays locked and parked for good, and the
// run's group stays (Delete says so).
//
// It is never the main thread: that one's groups are what the process's
// own /proc/PID/cgroup shows, and a spare's launcher waits in its group
// for as long as no run comes. Found on the main thread, it holds it until
// a second goroutine has locked a thread of its own (which then cannot be
// the main one), and hands over.
func (g *v1Group) launch() {
	runtime.LockOSThread()
	if unix.Gettid() == os.Getpid() {
		locked := make(chan struct{})
		go func() {
			runtime.LockOSThread()
			close(locked)
			g.launchLocked()
		}()
		<-locked
		runtime.UnlockOSThread()
		return
	}
	g.launchLocked()
}

// launchLocked is launch on its own locked thread, not the main one.
func (g *v1Group) launchLocked() {
	// Its own copies: a spare's maps are rebound when it is renamed.
	dirs, homes := maps.Clone(g.dirs), maps.Clone(g.homes)
	tid := strconv.Itoa(unix.Gettid())
	var joined []cgroup1.Name
	var err error
	for n, dir := range dirs {
		if err = writeFile(dir, "tasks", tid); err != nil {
			err = fmt.Errorf("joining the run's %s group: %w", n, err)
			break
		}
		joined = append(joined, n)
	}
	g.joinErr = err
	close(g.joined)
	if req, ok := <-g.reqs; ok {
		if err == nil {
			err = req.cmd.Start()
		}
		req.done <- err
	}
	var backErr error
	for _, n := range joined {
		for try := 0; try < 3; try++ {
			if backErr = writeFile(homes[n], "tasks", tid); backErr == nil {
				break
			}
		}
		if backErr != nil {
			select {} // parked for good: see above
		}
	}
	close(g.home)
	runtime.UnlockOSThread()
}

// start hands cmd to the launcher. Called at most once.
func (g *v1Group) start(cmd *exec.Cmd) error {
	done := make(chan error, 1)
	g.reqs <- launchReq{cmd: cmd, done: done}
	return <-done
}

// member: the process's pids line names the run's group.
func (g *v1Group) member(cgroupFile string) bool {
	for _, line := range strings.Split(cgroupFile, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && contains(strings.Split(parts[1], ","), "pids") {
			return strings.HasSuffix(parts[2], g.suffix)
		}
	}
	return false
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

// kill sends SIGKILL to each process of the group (Delete repeats it
// until the group is empty).
func (g *v1Group) kill() error {
	ps, err := g.procs()
	if err != nil {
		return err
	}
	return signalMembers(ps, unix.SIGKILL, g.member, nil)
}

// tasksGoneCap bounds the wait for the group's last threads (warden's
// launcher thread, going home) to be gone before the group is removed.
const tasksGoneCap = 2 * time.Second

func (g *v1Group) remove() error {
	// The launcher leaves (unused, if start never came).
	g.release.Do(func() { close(g.reqs) })
	select {
	case <-g.home:
	case <-time.After(tasksGoneCap):
		return errors.New("warden's launcher thread did not leave the group")
	}
	// The kernel refuses (EBUSY) to remove a group that still has a
	// task, so a removed group was empty. The library's removal walks
	// each group's files and backs off 10ms and more when refused: this
	// is an rmdir per hierarchy, tried again soon, then less often, while
	// the last threads (warden's launcher, going home) leave.
	deadline := time.Now().Add(tasksGoneCap)
	pause := 250 * time.Microsecond
	for {
		var busy error
		for n, dir := range g.dirs {
			if err := unix.Rmdir(dir); err != nil && err != unix.ENOENT {
				if err != unix.EBUSY {
					return fmt.Errorf("removing the %s group: %w", n, err)
				}
				busy = fmt.Errorf("removing the %s group: %w", n, err)
			}
		}
		if busy == nil || time.Now().After(deadline) {
			return busy
		}
		time.Sleep(pause)
		pause = min(2*pause, 10*time.Millisecond)
	}
}
