// Package cgroup holds one jailed run's processes in a control group of
// their own: memory, pids and cpu limits the kernel enforces, the record
// of which limit was hit, and a kill of the whole tree however it forked.
// It works on cgroup v1 (one hierarchy per controller) and on cgroup v2 (a
// delegated subtree), through github.com/containerd/cgroups/v3.
//
// Invariants: a run's processes are born in its group (never moved in
// after they could fork); no signal is ever sent to this process, even
// while one of its threads passes through a group; a group is removed only
// when nothing is left in it.
package cgroup

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Limits a group enforces. Zero fields are not limited.
type Limits struct {
	Memory int64   // bytes
	Pids   int64   // processes and threads
	CPU    float64 // CPUs' worth of time per period
}

// Limit names, as Hit reports them.
const (
	LimitMemory = "memory"
	LimitPids   = "pids"
)

// Group is one run's control group.
type Group struct {
	name string
	lim  Limits
	impl impl

	mu      sync.Mutex
	deleted bool
}

// impl is what differs between cgroup v1 and v2.
type impl interface {
	// start starts cmd so that its process is born in the group.
	start(cmd *exec.Cmd) error
	// procs lists the group's processes (thread group ids).
	procs() ([]int, error)
	// counter reads how often a limit was hit ("memory": OOM kills,
	// "pids": forks refused).
	counter(limit string) uint64
	// kill sends SIGKILL to every process of the group at once.
	kill() error
	// remove removes the group, which must be empty.
	remove() error
	// member says whether a /proc/PID/cgroup text places the process in
	// the group.
	member(cgroupFile string) bool
}

// New creates the group for run name (a path element) under this
// process's own group, with lim set, on whichever cgroup version Probe
// finds usable.
func New(name string, lim Limits) (*Group, error) {
	if name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
		return nil, fmt.Errorf("cgroup: bad group name %q", name)
	}
	sup := Probe()
	g := &Group{name: name, lim: lim}
	var err error
	switch sup.Version {
	case 1:
		g.impl, err = newV1(name, lim)
	case 2:
		g.impl, err = newV2Opts(sup.v2Mount, sup.v2Parent, name, lim, true, sup.v2Ancestor)
	default:
		return nil, fmt.Errorf("cgroup: resource limits cannot be enforced on this host: %s", sup.Detail)
	}
	if err != nil {
		return nil, fmt.Errorf("cgroup: creating the run's group %s: %w", name, err)
	}
	return g, nil
}

// Limits returns what the group enforces.
func (g *Group) Limits() Limits { return g.lim }

// Start starts cmd with its process born inside the group, so that
// nothing it forks can ever be outside it. cmd must not have been started.
func (g *Group) Start(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	return g.impl.start(cmd)
}

// Procs lists the processes in the group, never this one.
func (g *Group) Procs() []int {
	ps, _ := g.impl.procs()
	self := os.Getpid()
	out := ps[:0]
	for _, p := range ps {
		if p != self && p > 0 {
			out = append(out, p)
		}
	}
	return out
}

// Hit names the first limit the group's processes ran into ("memory" for
// an OOM kill, "pids" for a refused fork), or "".
func (g *Group) Hit() string {
	if g.lim.Memory > 0 && g.impl.counter(LimitMemory) > 0 {
		return LimitMemory
	}
	if g.lim.Pids > 0 && g.impl.counter(LimitPids) > 0 {
		return LimitPids
	}
	return ""
}

// Kill sends SIGKILL to every process in the group.
func (g *Group) Kill() error { return g.impl.kill() }

// deleteCap bounds how long Delete waits for killed processes to be gone
// (SIGKILL delivery, and the exit of a process in uninterruptible sleep).
const deleteCap = 5 * time.Second

// Delete kills what is left in the group, waits for it to be gone and
// removes the group. If something outlives deleteCap, the group is left in
// place (still limiting it) and the error says so.
func (g *Group) Delete() error {
	g.mu.Lock()
	if g.deleted {
		g.mu.Unlock()
		return nil
	}
	g.deleted = true
	g.mu.Unlock()

	deadline := time.Now().Add(deleteCap)
	pause := 250 * time.Microsecond
	for {
		ps := g.Procs()
		if len(ps) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup: %d process(es) of run %s still alive %s after SIGKILL (pids %v); the group stays, with its limits", len(ps), g.name, deleteCap, ps)
		}
		_ = g.impl.kill()
		// A killed process (bubblewrap's pid-namespace init, tearing its
		// namespace down after the hook's exit) is usually gone within a
		// millisecond: look again soon, then less often.
		time.Sleep(pause)
		pause = min(2*pause, 5*time.Millisecond)
	}
	// The kernel can report the group busy for a moment after its last
	// process is gone.
	var err error
	for removeBy := time.Now().Add(deleteCap); ; time.Sleep(10 * time.Millisecond) {
		if err = g.impl.remove(); err == nil {
			return nil
		}
		if time.Now().After(removeBy) {
			break
		}
	}
	return fmt.Errorf("cgroup: removing the group of run %s: %w", g.name, err)
}

// signalMembers sends sig to each of pids that is, when signalled, still
// a member of the group (member says, from /proc/PID/cgroup) and that skip
// does not exclude; never to this process. A pid read from the group may
// be reused by an unrelated process by the time it is signalled: the
// signal goes through a pidfd opened first, checked for membership after,
// so it reaches the process that was checked or none. ESRCH is fine.
func signalMembers(pids []int, sig syscall.Signal, member func(cgroupFile string) bool, skip func(pid int) bool) error {
	self := os.Getpid()
	var errs []error
	for _, p := range pids {
		if p == self || p <= 0 || (skip != nil && skip(p)) {
			continue
		}
		fd, err := unix.PidfdOpen(p, 0)
		if err != nil {
			continue // gone
		}
		b, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/cgroup")
		if err == nil && member(string(b)) {
			if err := unix.PidfdSendSignal(fd, sig, nil, 0); err != nil && err != unix.ESRCH {
				errs = append(errs, fmt.Errorf("pid %d: %w", p, err))
			}
		}
		unix.Close(fd)
	}
	return errors.Join(errs...)
}

// Signal sends sig to every process of the group that skip does not
// exclude (never this one).
func (g *Group) Signal(sig syscall.Signal, skip func(pid int) bool) error {
	return signalMembers(g.Procs(), sig, g.impl.member, skip)
}

// readPids reads a cgroup.procs (or tasks) file.
func readPids(file string) ([]int, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out, nil
}

// readKey reads "key N" from a flat keyed file (memory.events,
// pids.events, memory.oom_control); 0 when absent.
func readKey(file, key string) uint64 {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if ok && k == key {
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// writeFile writes a control file (no create, no truncate semantics).
func writeFile(dir, file, value string) error {
	return os.WriteFile(filepath.Join(dir, file), []byte(value), 0)
}
