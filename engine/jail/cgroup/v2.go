package cgroup

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/containerd/cgroups/v3/cgroup2"
	"golang.org/x/sys/unix"
)

// engineLeaf is where this process moves within its own delegated group,
// so that the group may hand controllers to runs' groups beside it (a v2
// group with processes of its own cannot).
const engineLeaf = "warden-engine"

var (
	delegateMu   sync.Mutex
	delegatedFor = map[string]bool{}
)

type v2Group struct {
	m     *cgroup2.Manager
	dir   string
	group string // the group's path in the hierarchy ("/parent/NAME")
}

// member: the process's v2 line names the run's group.
func (g *v2Group) member(cgroupFile string) bool {
	for _, line := range strings.Split(cgroupFile, "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p == g.group || strings.HasPrefix(p, g.group+"/")
		}
	}
	return false
}

// newV2Opts makes the run's group parent/name under mount. Its process is
// placed with clone3's CLONE_INTO_CGROUP (see start). With delegate
// false, the parent's controllers are taken as they are (a test on a
// hierarchy that has none); ancestor: parent is above this process's own
// group, which stays where it is.
func newV2Opts(mount, parent, name string, lim Limits, delegate, ancestor bool) (*v2Group, error) {
	res := &cgroup2.Resources{}
	if lim.Memory > 0 {
		m := lim.Memory
		res.Memory = &cgroup2.Memory{Max: &m}
	}
	if lim.Pids > 0 {
		res.Pids = &cgroup2.Pids{Max: lim.Pids}
	}
	if lim.CPU > 0 {
		quota, period := int64(lim.CPU*cfsPeriod), uint64(cfsPeriod)
		// The weight of 8 tasks (v2's 100 is v1's 1024): see cpuShares.
		weight := uint64(cpuShares * 100 / 1024)
		res.CPU = &cgroup2.CPU{Max: cgroup2.NewCPUMax(&quota, &period), Weight: &weight}
	}
	if delegate {
		if err := delegateV2(mount, parent, res.EnabledControllers(), ancestor); err != nil {
			return nil, err
		}
	}
	group := filepath.Join(parent, name)
	m, err := cgroup2.NewManager(mount, group, res)
	if err != nil {
		return nil, err
	}
	g := &v2Group{m: m, dir: filepath.Join(mount, group), group: group}
	// No paging out past the limit (memory.swap.max is absent on a kernel
	// without swap accounting, which then has nothing to page to).
	if lim.Memory > 0 {
		if err := writeFile(g.dir, "memory.swap.max", "0"); err != nil && !errors.Is(err, os.ErrNotExist) {
			g.remove()
			return nil, fmt.Errorf("memory.swap.max: %w", err)
		}
	}
	return g, nil
}

// delegateV2 makes parent able to give controllers to children: if this
// process sits in parent itself (and parent is not the root), it moves to
// parent/warden-engine first, as systemd's Delegate=yes expects of a
// service. An ancestor (probeV2 checked it holds no process) only gets
// the controllers. Done once per parent.
func delegateV2(mount, parent string, controllers []string, ancestor bool) error {
	if len(controllers) == 0 {
		return nil
	}
	delegateMu.Lock()
	defer delegateMu.Unlock()
	if delegatedFor[parent] {
		return nil
	}
	dir := filepath.Join(mount, parent)
	ctl, _ := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	if missing := without(controllers, strings.Fields(string(ctl))); len(missing) > 0 {
		if procs, _ := readPids(filepath.Join(dir, "cgroup.procs")); len(procs) > 0 && parent != "/" && !ancestor {
			leaf := filepath.Join(dir, engineLeaf)
			if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
				return fmt.Errorf("making %s for warden itself: %w", leaf, err)
			}
			for _, p := range procs {
				// Every process of the parent group must leave it; they
				// are warden's (a delegated group is warden's alone).
				if err := writeFile(leaf, "cgroup.procs", fmt.Sprint(p)); err != nil && !errors.Is(err, unix.ESRCH) {
					return fmt.Errorf("moving pid %d to %s: %w", p, leaf, err)
				}
			}
		}
		plus := make([]string, len(missing))
		for i, c := range missing {
			plus[i] = "+" + c
		}
		if err := writeFile(dir, "cgroup.subtree_control", strings.Join(plus, " ")); err != nil {
			return fmt.Errorf("enabling %s for runs' groups in %s: %w", strings.Join(missing, ", "), dir, err)
		}
	}
	delegatedFor[parent] = true
	return nil
}

func without(want, have []string) []string {
	var out []string
	for _, w := range want {
		if !contains(have, w) {
			out = append(out, w)
		}
	}
	return out
}

// start asks clone3 to create the process directly in the group
// (CLONE_INTO_CGROUP, Linux 5.7): it is never anywhere else.
func (g *v2Group) start(cmd *exec.Cmd) error {
	fd, err := unix.Open(g.dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening the run's group: %w", err)
	}
	defer unix.Close(fd)
	cmd.SysProcAttr.UseCgroupFD = true
	cmd.SysProcAttr.CgroupFD = fd
	return cmd.Start()
}

func (g *v2Group) procs() ([]int, error) {
	ps, err := g.m.Procs(true)
	out := make([]int, len(ps))
	for i, p := range ps {
		out[i] = int(p)
	}
	return out, err
}

func (g *v2Group) counter(limit string) uint64 {
	switch limit {
	case LimitMemory:
		return readKey(filepath.Join(g.dir, "memory.events"), "oom_kill")
	case LimitPids:
		return readKey(filepath.Join(g.dir, "pids.events"), "max")
	}
	return 0
}

// kill writes cgroup.kill (Linux 5.14), which kills the whole group at
// once; before that, each process is signalled. (Not the library's Kill:
// its fallback waits for the processes, which would reap the caller's own
// child behind its back.)
func (g *v2Group) kill() error {
	if err := writeFile(g.dir, "cgroup.kill", "1"); err == nil {
		return nil
	}
	ps, err := g.procs()
	if err != nil {
		return err
	}
	return signalMembers(ps, unix.SIGKILL, g.member, nil)
}

func (g *v2Group) remove() error {
	err := g.m.Delete()
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}
