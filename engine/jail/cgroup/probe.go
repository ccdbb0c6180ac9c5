package cgroup

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	cgroups "github.com/containerd/cgroups/v3"
	"golang.org/x/sys/unix"
)

// Support is what this host offers for run limits.
type Support struct {
	// Version is the cgroup version runs' groups are made on: 1 or 2,
	// or 0 when memory and pids limits cannot be enforced at all.
	Version int
	// CPU: the cpu controller is there too (a run's cpu limit is
	// enforced). Memory and pids are always there when Version is set.
	CPU bool
	// Detail says where the groups go, or why there are none, with what
	// to do about it.
	Detail string
	// Missing lists, when Version is 0 or CPU is false, each limit that
	// cannot be enforced, with why ("cpu: no cpu controller ...").
	Missing []string

	// Route says which group runs' groups go under (RouteOwn,
	// RouteAncestor; "" when Version is 0).
	Route string

	v2Mount, v2Parent string
	v2Ancestor        bool // v2Parent is above this process's group
}

// Routes to a group for runs' groups.
const (
	// RouteV1: cgroup v1 hierarchies, this process's own groups.
	RouteV1 = "cgroup v1"
	// RouteOwn: this process's own cgroup v2 group, delegated to it.
	RouteOwn = "own delegated group"
	// RouteAncestor: a delegated ancestor of this process's group.
	RouteAncestor = "delegated ancestor group"
	// RouteSystemd: a transient scope with Delegate=yes that systemd
	// made for this process over D-Bus, used as RouteOwn.
	RouteSystemd = "systemd scope"
)

// askScope asks systemd for a delegated scope holding this process
// (systemdScope); a variable so that tests of the probe can stand in
// for a systemd they do not have.
var askScope = func() (string, error) { return systemdScope(context.Background()) }

var (
	probeOnce sync.Once
	probed    Support
)

// Probe finds, once per process, the cgroup version runs can use. It
// changes nothing, but for one case: on cgroup v2 with no delegated group
// of its own or above it, it asks systemd for a scope with Delegate=yes,
// and this process moves into it (as `systemd-run --scope` would start
// it). Moving this process to a leaf of its delegated group happens at
// the first New.
func Probe() Support {
	probeOnce.Do(func() { probed = probe() })
	return probed
}

func probe() Support {
	switch cgroups.Mode() {
	case cgroups.Unified:
		return probeV2("/sys/fs/cgroup")
	case cgroups.Legacy, cgroups.Hybrid:
		return probeV1()
	}
	return Support{Detail: "no cgroup file system is mounted at /sys/fs/cgroup", Missing: []string{
		"memory: no cgroup file system", "pids: no cgroup file system", "cpu: no cgroup file system"},
	}
}

// probeV1 checks that this process's own group in the memory and pids
// hierarchies (and cpu) can have children.
func probeV1() Support {
	own, err := ownV1Paths()
	if err != nil {
		return v1Unusable("cannot read /proc/self/cgroup: " + err.Error())
	}
	s := Support{Version: 1, Route: RouteV1}
	var where []string
	for _, c := range []string{"memory", "pids", "cpu"} {
		dir, ok := own[c]
		problem := ""
		switch {
		case !ok:
			problem = "no " + c + " hierarchy is mounted (cgroup v1)"
		case unix.Access(dir, unix.W_OK) != nil:
			problem = fmt.Sprintf("%s is not writable by uid %d (run warden as root, or give it a delegated cgroup)", dir, os.Geteuid())
		}
		if problem != "" {
			s.Missing = append(s.Missing, c+": "+problem)
			if c != "cpu" {
				s.Version = 0
			}
			continue
		}
		if c == "cpu" {
			s.CPU = true
		}
		where = append(where, dir)
	}
	if s.Version == 0 {
		s.Route = ""
		s.Detail = "cgroup v1: " + strings.Join(s.Missing, "; ")
		return s
	}
	s.Detail = "cgroup v1: runs' groups under " + strings.Join(where, ", ")
	return s
}

func v1Unusable(why string) Support {
	return Support{Detail: "cgroup v1: " + why, Missing: []string{"memory: " + why, "pids: " + why, "cpu: " + why}}
}

// ownV1Paths maps each v1 controller to this process's group directory.
func ownV1Paths() (map[string]string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	mounts := v1Mounts()
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || parts[1] == "" {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if m, ok := mounts[c]; ok {
				out[c] = filepath.Join(m.dir, relTo(m.root, parts[2]))
			}
		}
	}
	return out, nil
}

type v1Mount struct{ dir, root string }

// v1Mounts maps each v1 controller to its mount point (and the mount's
// root within the hierarchy, not "/" inside a cgroup namespace).
func v1Mounts() map[string]v1Mount {
	out := map[string]v1Mount{}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(qf) < 3 || qf[0] != "cgroup" {
			continue
		}
		for _, opt := range strings.Split(qf[2], ",") {
			switch opt {
			case "memory", "pids", "cpu", "freezer", "cpuacct":
				out[opt] = v1Mount{dir: unescapeMount(pf[4]), root: unescapeMount(pf[3])}
			}
		}
	}
	return out
}

func relTo(root, p string) string {
	if r, err := filepath.Rel(root, p); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return p
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v byte
			ok := true
			for _, c := range []byte(s[i+1 : i+4]) {
				if c < '0' || c > '7' {
					ok = false
					break
				}
				v = v*8 + c - '0'
			}
			if ok {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// probeV2 finds the cgroup v2 group runs' groups go under: the nearest of
// this process's own group and (not as root) its ancestors that is
// delegated to this uid: writable, with the memory and pids controllers
// available to it. In its own group, New then moves this process to a
// leaf and enables the controllers, as a delegated subtree is meant to be
// used (systemd's Delegate=yes); in an ancestor (a shell's group below a
// delegated one), runs' groups go beside this process's group, which
// stays as it is. Root never climbs to an ancestor: every group is
// writable by root, and climbing out of the unit systemd put it in would
// hide it from systemd. Last, where neither serves, systemd is asked for
// a delegated scope (scopeV2): the user's for an ordinary user; PID 1 for
// root, unless root runs in a service unit (which wants Delegate=yes, not
// a scope that takes warden out of it).
func probeV2(mount string) Support {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return v2Unusable("cannot read /proc/self/cgroup: " + err.Error())
	}
	own := ""
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			own = p
		}
	}
	if own == "" {
		return v2Unusable("this process is in no cgroup v2 group")
	}
	uid := os.Geteuid()
	s := probeV2Group(mount, own, uid)
	// An ordinary user's own group that holds other processes (the shell
	// warden was started from) is taken only when no ancestor serves:
	// taking it moves them all to warden's leaf.
	// Doctor names the route taken and why each before it was not.
	ownWhy := func() string { return JoinReasons(s.Missing) }
	if uid != 0 && s.Version != 0 && own != "/" && !alone(mount, own) {
		if a, _ := ancestorV2(mount, own, uid); a.Version != 0 {
			a.Detail += fmt.Sprintf(" (warden's own group %s is not used itself: it holds other processes, such as the shell warden was started from, which taking it would move)", filepath.Join(mount, own))
			return a
		}
		return s
	}
	var notAncestor string
	if s.Version == 0 && uid != 0 {
		a, why := ancestorV2(mount, own, uid)
		if a.Version != 0 {
			a.Detail += " (warden's own group cannot serve: " + ownWhy() + ")"
			return a
		}
		notAncestor = why
		if why == "" {
			notAncestor = "no ancestor of " + filepath.Join(mount, own) + " is delegated to uid " + fmt.Sprint(uid)
		}
		if why != "" {
			s.Missing = append(s.Missing, why)
		}
	}
	if s.Version == 0 && uid == 0 && inService(own) {
		// Root in a service unit without Delegate=yes: a scope of its
		// own would take warden out of its unit, hidden from it (its
		// stop, its restart). The unit is the thing to fix.
		s.Missing = append(s.Missing, "systemd: not asked for a scope: warden runs in the unit "+serviceOf(own)+"; give that unit Delegate=yes (examples/systemd/warden.service)")
		s.Detail = "cgroup v2: " + strings.Join(s.Missing, "; ")
		return s
	}
	if s.Version == 0 {
		sc, why := scopeV2(mount, uid)
		if sc.Version != 0 {
			sc.Detail += " (warden's own group cannot serve: " + ownWhy()
			if notAncestor != "" {
				sc.Detail += "; nor can an ancestor: " + notAncestor
			}
			sc.Detail += ")"
			return sc
		}
		s.Missing = append(s.Missing, why)
		s.Detail = "cgroup v2: " + strings.Join(s.Missing, "; ")
	}
	return s
}

// scopeV2 is the third route: a scope systemd delegates to this process
// (the user's systemd for an ordinary user, PID 1 for root), probed as
// this process's own group. why says why there is none.
func scopeV2(mount string, uid int) (s Support, why string) {
	scope, err := askScope()
	if err != nil {
		return Support{}, "systemd: " + strings.TrimPrefix(err.Error(), "cgroup: ")
	}
	s = probeV2Group(mount, scope, uid)
	if s.Version == 0 {
		return Support{}, fmt.Sprintf("systemd: its scope %s cannot serve: %s", scope, strings.Join(s.Missing, "; "))
	}
	who := "the user's systemd"
	if uid == 0 {
		who = "the system's systemd"
	}
	s.Route = RouteSystemd
	s.Detail = fmt.Sprintf("cgroup v2: runs' groups under %s, a scope %s delegated to warden (Delegate=yes, asked over D-Bus: warden moves to a leaf of it)", filepath.Join(mount, scope), who)
	return s, ""
}

// ancestorV2 finds the nearest ancestor of group own that is delegated
// to uid, climbing while the groups are writable by it. why says why a
// delegated one found cannot serve.
func ancestorV2(mount, own string, uid int) (s Support, why string) {
	for up := filepath.Dir(own); up != own && up != "/"; own, up = up, filepath.Dir(up) {
		if unix.Access(filepath.Join(mount, up), unix.W_OK) != nil {
			break // not delegated to us: nor is anything above it
		}
		if a := probeV2Group(mount, up, uid); a.Version != 0 {
			if why := internalProcs(mount, up); why != "" {
				return Support{}, why
			}
			a.v2Ancestor = true
			a.Route = RouteAncestor
			a.Detail = fmt.Sprintf("cgroup v2: runs' groups under %s, delegated to uid %d, beside warden's own group", filepath.Join(mount, up), uid)
			return a, ""
		}
	}
	return Support{}, ""
}

// alone: the group's only process is this one.
func alone(mount, group string) bool {
	procs, err := readPids(filepath.Join(mount, group, "cgroup.procs"))
	if err != nil {
		return false
	}
	for _, p := range procs {
		if p != os.Getpid() {
			return false
		}
	}
	return true
}

// probeV2Group checks one group: memory and pids (and cpu) available in
// its cgroup.controllers, and its control files writable.
func probeV2Group(mount, group string, uid int) Support {
	dir := filepath.Join(mount, group)
	s := Support{Version: 2, v2Mount: mount, v2Parent: group, Route: RouteOwn}
	ctl, _ := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	have := strings.Fields(string(ctl))
	for _, c := range []string{"memory", "pids", "cpu"} {
		if !contains(have, c) {
			s.Missing = append(s.Missing, fmt.Sprintf("%s: the %s controller is not delegated to %s (run warden under systemd with Delegate=yes, or as root in the root group)", c, c, dir))
			if c != "cpu" {
				s.Version = 0
			}
		} else if c == "cpu" {
			s.CPU = true
		}
	}
	if s.Version != 0 {
		for _, f := range []string{"", "cgroup.subtree_control", "cgroup.procs"} {
			if unix.Access(filepath.Join(dir, f), unix.W_OK) != nil {
				why := fmt.Sprintf("%s is not writable by uid %d (give warden a delegated cgroup: systemd Delegate=yes)", filepath.Join(dir, f), uid)
				return Support{Detail: "cgroup v2: " + why, Missing: []string{"memory: " + why, "pids: " + why, "cpu: " + why}}
			}
		}
	}
	if s.Version == 0 {
		s.Route = ""
		s.Detail = "cgroup v2: " + strings.Join(s.Missing, "; ")
		return s
	}
	s.Detail = "cgroup v2: runs' groups under " + dir + " (warden's own group, delegated: warden moves to a leaf of it)"
	if group == "/" {
		s.Detail = "cgroup v2: runs' groups under " + dir + " (the root group)"
	}
	return s
}

// internalProcs says why an ancestor that holds processes of its own
// cannot give controllers to runs' groups (cgroup v2 lets a group with
// processes enable none for its children), or "" when it can.
func internalProcs(mount, group string) string {
	dir := filepath.Join(mount, group)
	ctl, _ := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	if len(without([]string{"memory", "pids"}, strings.Fields(string(ctl)))) == 0 {
		return ""
	}
	if procs, _ := readPids(filepath.Join(dir, "cgroup.procs")); len(procs) > 0 {
		return fmt.Sprintf("memory: %s is delegated but holds processes of its own (%d), so it cannot give controllers to runs' groups: move them to a child group", dir, len(procs))
	}
	return ""
}

func v2Unusable(why string) Support {
	return Support{Detail: "cgroup v2: " + why, Missing: []string{"memory: " + why, "pids: " + why, "cpu: " + why}}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// JoinReasons joins the probe's "controller: why" lines, naming one
// reason once for every controller it holds for ("memory, pids, cpu:
// ..." rather than the same sentence three times).
func JoinReasons(missing []string) string {
	var order []string
	who := map[string][]string{}
	for _, m := range missing {
		c, why, ok := strings.Cut(m, ": ")
		if !ok || strings.Contains(c, " ") {
			c, why = "", m
		}
		if _, seen := who[why]; !seen {
			order = append(order, why)
		}
		if c != "" {
			who[why] = append(who[why], c)
		} else if who[why] == nil {
			who[why] = []string{}
		}
	}
	out := make([]string, 0, len(order))
	for _, why := range order {
		if cs := who[why]; len(cs) > 0 {
			why = strings.Join(cs, ", ") + ": " + why
		}
		out = append(out, why)
	}
	return strings.Join(out, "; ")
}

// inService: cgroup path p is a systemd service unit's group, or below
// one.
func inService(p string) bool { return serviceOf(p) != "" }

// serviceOf is the innermost *.service element of p, or "".
func serviceOf(p string) string {
	parts := strings.Split(p, "/")
	for i := len(parts) - 1; i >= 0; i-- {
		if strings.HasSuffix(parts[i], ".service") {
			return parts[i]
		}
	}
	return ""
}
