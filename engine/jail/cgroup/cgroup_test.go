package cgroup

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as the process put in a group: "cg-helper
// NAME" runs a scenario instead of the tests.
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "cg-helper" {
		os.Exit(helper(os.Args[2]))
	}
	os.Exit(m.Run())
}

func helper(name string) int {
	switch name {
	case "alloc": // touch 1 GiB, 16 MiB at a time
		var keep [][]byte
		for i := 0; i < 64; i++ {
			b := make([]byte, 16<<20)
			for j := 0; j < len(b); j += 4096 {
				b[j] = 1
			}
			keep = append(keep, b)
		}
		fmt.Println("allocated", len(keep))
		return 0
	case "fork": // 200 children that sleep; say how many forks failed
		failed := 0
		for i := 0; i < 200; i++ {
			c := exec.Command("/bin/sleep", "30")
			if err := c.Start(); err != nil {
				failed++
			}
		}
		fmt.Println("failed", failed)
		time.Sleep(30 * time.Second)
		return 0
	case "sleep":
		time.Sleep(30 * time.Second)
		return 0
	}
	return 2
}

// needV1 fails under CI, and skips elsewhere, when this host cannot make
// v1 groups (the tests run as root on a v1 or hybrid host).
func needCgroups(t *testing.T) Support {
	t.Helper()
	s := Probe()
	if s.Version == 0 {
		if os.Getenv("CI") == "true" {
			t.Fatalf("run limits cannot be enforced on this host: %s", s.Detail)
		}
		t.Skipf("run limits cannot be enforced on this host: %s", s.Detail)
	}
	return s
}

func helperCmd(name string) *exec.Cmd {
	c := exec.Command(os.Args[0], "cg-helper", name)
	c.Env = []string{"PATH=/usr/bin:/bin"}
	return c
}

func uniq(t *testing.T) string {
	return fmt.Sprintf("test-%d-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "-"))
}

// A process allocating past the memory limit is OOM-killed, and Hit says
// memory; the group is gone after Delete.
func TestMemoryLimit(t *testing.T) {
	needCgroups(t)
	g, err := New(uniq(t), Limits{Memory: 64 << 20, Pids: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Delete()
	c := helperCmd("alloc")
	out := &strings.Builder{}
	c.Stdout = out
	if err := g.Start(c); err != nil {
		t.Fatal(err)
	}
	err = c.Wait()
	ws, _ := c.ProcessState.Sys().(syscall.WaitStatus)
	if err == nil || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("allocating 1 GiB under a 64 MiB limit: %v (output %q)", err, out.String())
	}
	if hit := g.Hit(); hit != LimitMemory {
		t.Errorf("Hit = %q, want memory", hit)
	}
	if err := g.Delete(); err != nil {
		t.Fatal(err)
	}
}

// Forks past the pids limit fail in the child, Hit says pids, and Delete
// kills every process of the tree (they were born in the group) and
// removes the group.
func TestPidsLimitAndDelete(t *testing.T) {
	needCgroups(t)
	g, err := New(uniq(t), Limits{Memory: 256 << 20, Pids: 40})
	if err != nil {
		t.Fatal(err)
	}
	c := helperCmd("fork")
	out, _ := c.StdoutPipe()
	if err := g.Start(c); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, _ := out.Read(buf)
	if !strings.HasPrefix(string(buf[:n]), "failed ") || strings.HasPrefix(string(buf[:n]), "failed 0") {
		t.Errorf("helper said %q; want some forks refused", buf[:n])
	}
	if hit := g.Hit(); hit != LimitPids {
		t.Errorf("Hit = %q, want pids", hit)
	}
	procs := g.Procs()
	if len(procs) < 30 {
		t.Errorf("group holds %d processes, want the helper and its children", len(procs))
	}
	for _, p := range procs {
		if p == os.Getpid() {
			t.Fatal("the group lists this very process")
		}
	}
	if err := g.Delete(); err != nil {
		t.Fatal(err)
	}
	c.Wait()
	for _, p := range procs {
		if alive(p) {
			t.Errorf("pid %d outlived Delete", p)
		}
	}
	var dirs []string
	switch impl := g.impl.(type) {
	case *v1Group:
		for _, d := range impl.dirs {
			dirs = append(dirs, d)
		}
	case *v2Group:
		dirs = []string{impl.dir}
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("group dir %s still there: %v", d, err)
		}
	}
}

// Starting from a thread that passes through the group leaves every
// thread of this process where it was.
func TestStartLeavesUsHome(t *testing.T) {
	s := needCgroups(t)
	if s.Version != 1 {
		t.Skip("thread placement is v1's")
	}
	before, _ := os.ReadFile("/proc/self/cgroup")
	for i := 0; i < 20; i++ {
		g, err := New(uniq(t)+strconv.Itoa(i), Limits{Pids: 32})
		if err != nil {
			t.Fatal(err)
		}
		c := helperCmd("sleep")
		if err := g.Start(c); err != nil {
			t.Fatal(err)
		}
		if err := g.Delete(); err != nil {
			t.Fatal(err)
		}
		c.Wait()
	}
	// Every thread of this process is home.
	home, _ := v1Home()
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, tk := range tasks {
		b, _ := os.ReadFile(filepath.Join("/proc/self/task", tk.Name(), "cgroup"))
		if strings.Contains(string(b), "/warden/") && !strings.Contains(string(b), "/warden/"+sparePrefix) {
			t.Errorf("thread %s is still in a run's group:\n%s", tk.Name(), b)
		}
	}
	after, _ := os.ReadFile("/proc/self/cgroup")
	if string(before) != string(after) {
		t.Errorf("this process moved:\n%s\nthen\n%s (home %v)", before, after, home)
	}
}

// The v2 code path, on this host's v2 hierarchy: on a hybrid host it has
// no controllers, so no limits can be set there, but a group can be made,
// a process born in it (CLONE_INTO_CGROUP), listed, killed with
// cgroup.kill and the group removed.
func TestV2PathWithoutControllers(t *testing.T) {
	mount := "/sys/fs/cgroup/unified"
	var st syscall.Statfs_t
	if err := syscall.Statfs(mount, &st); err != nil || st.Type != 0x63677270 {
		mount = "/sys/fs/cgroup"
		if err := syscall.Statfs(mount, &st); err != nil || st.Type != 0x63677270 {
			t.Skip("no cgroup v2 hierarchy mounted")
		}
	}
	if syscall.Access(mount, 2) != nil {
		t.Skip(mount + " is not writable")
	}
	g, err := newV2Opts(mount, "/", uniq(t), Limits{}, false, false)
	if err != nil {
		t.Fatal(err)
	}
	grp := &Group{name: "v2", impl: g}
	c := helperCmd("fork")
	if err := grp.Start(c); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(grp.Procs()) < 100 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	procs := grp.Procs()
	if len(procs) < 100 {
		t.Fatalf("v2 group holds %d processes, want the helper and its 200 children", len(procs))
	}
	if err := grp.Delete(); err != nil {
		t.Fatal(err)
	}
	c.Wait()
	for _, p := range procs {
		if alive(p) {
			t.Errorf("pid %d outlived Delete", p)
		}
	}
	if _, err := os.Stat(g.dir); !os.IsNotExist(err) {
		t.Errorf("v2 group dir still there: %v", err)
	}
}

// alive: the pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && len(s) > i+2 && s[i+2] != 'Z' && s[i+2] != 'X'
}

func TestProbeSaysWhere(t *testing.T) {
	s := needCgroups(t)
	if !strings.HasPrefix(s.Detail, fmt.Sprintf("cgroup v%d: runs' groups under /", s.Version)) {
		t.Errorf("Detail = %q", s.Detail)
	}
}

func TestNewRefusesBadNames(t *testing.T) {
	for _, n := range []string{"", ".", "..", "a/b", "a\x00"} {
		if _, err := New(n, Limits{}); err == nil {
			t.Errorf("New(%q) accepted", n)
		}
	}
}

// With nothing delegated, the probe's third route is a scope from
// systemd: taken when its group serves, and when it cannot be had, the
// reason is in what doctor prints. (The real D-Bus exchange is
// TestSystemdScope, in the guest scripts/uml-systemd boots.)
func TestProbeAsksSystemdWhenNothingIsDelegated(t *testing.T) {
	mount := t.TempDir() // this process's own group is not in it
	scope := func(name, controllers string) string {
		dir := filepath.Join(mount, "user.slice", name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for f, body := range map[string]string{"cgroup.controllers": controllers, "cgroup.subtree_control": "", "cgroup.procs": ""} {
			if err := os.WriteFile(filepath.Join(dir, f), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return "/user.slice/" + name
	}
	served := scope("warden-1.scope", "cpu memory pids")
	bare := scope("warden-2.scope", "cpu")
	saved := askScope
	t.Cleanup(func() { askScope = saved })

	for _, tc := range []struct {
		name   string
		ask    func() (string, error)
		route  string
		detail string
	}{
		{"a scope that serves", func() (string, error) { return served, nil }, RouteSystemd, "runs' groups under " + filepath.Join(mount, served) + ", a scope the "},
		{"no systemd", func() (string, error) {
			return "", errors.New("cgroup: no systemd user session (unix:path=/run/user/1000/bus: no such file)")
		}, "", "systemd: no systemd user session"},
		{"a scope without memory", func() (string, error) { return bare, nil }, "", "systemd: its scope " + bare + " cannot serve: memory: the memory controller is not delegated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			asked := 0
			askScope = func() (string, error) { asked++; return tc.ask() }
			s := probeV2(mount)
			if asked != 1 {
				t.Errorf("systemd asked %d times, want once", asked)
			}
			if s.Route != tc.route || !strings.Contains(s.Detail, tc.detail) {
				t.Errorf("route %q, detail %q; want route %q, detail containing %q", s.Route, s.Detail, tc.route, tc.detail)
			}
			if tc.route == "" && (s.Version != 0 || !strings.Contains(strings.Join(s.Missing, "; "), tc.detail)) {
				t.Errorf("version %d, missing %q: want no limits, and the reason %q", s.Version, s.Missing, tc.detail)
			}
			if tc.route != "" && !strings.Contains(s.Detail, "(warden's own group cannot serve: memory: the memory controller is not delegated to ") {
				t.Errorf("detail %q does not say why warden's own group could not serve", s.Detail)
			}
			if tc.route != "" && (s.Version != 2 || !s.CPU || s.v2Parent != served || s.v2Ancestor) {
				t.Errorf("version %d, cpu %v, parent %q, ancestor %v: want v2 in %s, used as warden's own group", s.Version, s.CPU, s.v2Parent, s.v2Ancestor, served)
			}
		})
	}
}
