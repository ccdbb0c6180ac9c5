package cgroup

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSystemdScope asks the running systemd (the user's, or PID 1 for
// root) for a delegated scope and checks that this process landed in it
// with the controllers a run needs, and that the scope is ours to manage.
// It needs a real systemd; scripts/uml-systemd boots one with
// WARDEN_TEST_SYSTEMD=1, which turns every skip below into a failure.
func TestSystemdScope(t *testing.T) {
	required := os.Getenv("WARDEN_TEST_SYSTEMD") == "1"
	skip := func(why string) {
		t.Helper()
		if required {
			t.Fatalf("WARDEN_TEST_SYSTEMD=1 but %s", why)
		}
		t.Skip(why)
	}
	mount := sdTestV2Mount()
	if mount == "" {
		skip("no cgroup2 mount in /proc/self/mountinfo: not a cgroup v2 host")
	}
	if _, err := sdOwnCgroup(); err != nil {
		skip(err.Error())
	}
	if os.Geteuid() == 0 {
		if !sdIsSocket("/run/dbus/system_bus_socket") && !sdIsSocket("/run/systemd/private") {
			skip("root, and no system bus or /run/systemd/private: systemd is not PID 1 here")
		}
	} else {
		found := false
		for _, a := range sdUserBusAddresses(os.Geteuid()) {
			if p, ok := strings.CutPrefix(a.address, "unix:path="); ok && sdIsSocket(p) {
				found = true
			}
		}
		if !found {
			skip("no systemd user bus (DBUS_SESSION_BUS_ADDRESS, $XDG_RUNTIME_DIR/bus, /run/user/UID/bus)")
		}
	}

	before, _ := sdOwnCgroup()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got, err := systemdScope(ctx)
	if err != nil {
		t.Fatalf("systemdScope: %v", err)
	}
	t.Logf("moved from %s to %s", before, got)
	want := "warden-" + strconv.Itoa(os.Getpid()) + ".scope"
	if filepath.Base(got) != want {
		t.Fatalf("scope = %s, want a path ending in %s", got, want)
	}
	if now, _ := sdOwnCgroup(); now != got {
		t.Fatalf("/proc/self/cgroup says %s, systemdScope said %s", now, got)
	}
	// Every thread moved with the process (cgroup.procs, not cgroup.threads).
	tasks, _ := filepath.Glob("/proc/self/task/*/cgroup")
	t.Logf("%d threads, each in the scope", len(tasks))
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread ended
		}
		if p, _ := sdV2Line(string(b)); p != got {
			t.Errorf("thread %s is in %s, not %s", f, p, got)
		}
	}

	dir := filepath.Join(mount, got)
	ctrl, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cgroup.controllers: %s", strings.TrimSpace(string(ctrl)))
	have := strings.Fields(string(ctrl))
	for _, c := range []string{"memory", "pids"} {
		if !contains(have, c) {
			t.Errorf("the scope's cgroup.controllers %q lacks %s", have, c)
		}
	}
	for _, f := range []string{"cgroup.procs", "cgroup.subtree_control"} {
		if err := unix.Access(filepath.Join(dir, f), unix.W_OK); err != nil {
			t.Errorf("%s is not writable by uid %d: %v", filepath.Join(dir, f), os.Geteuid(), err)
		}
	}
	if t.Failed() {
		return
	}

	// Prove the delegation by using it as the probe will: this process
	// moves into a leaf of its own, then the scope enables the run's
	// controllers for its children (no process may sit in a group whose
	// subtree_control is set).
	leaf := filepath.Join(dir, "engine")
	if err := os.Mkdir(leaf, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
		t.Fatalf("moving into %s: %v", leaf, err)
	}
	// A second call, from the leaf below the scope, asks nothing and
	// names the scope again (not "unit already exists").
	if again, err := systemdScope(ctx); err != nil || again != got {
		t.Fatalf("second call from %s/engine: %q, %v; want %q", got, again, err, got)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+memory +pids"), 0); err != nil {
		t.Fatalf("enabling memory and pids below the scope: %v", err)
	}
	sub, _ := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	t.Logf("cgroup.subtree_control: %s", strings.TrimSpace(string(sub)))
	run := filepath.Join(dir, "run-1")
	if err := os.Mkdir(run, 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(run)
	if err := os.WriteFile(filepath.Join(run, "pids.max"), []byte("64"), 0); err != nil {
		t.Errorf("setting pids.max in a run's group: %v", err)
	}
	if err := os.WriteFile(filepath.Join(run, "memory.max"), []byte("67108864"), 0); err != nil {
		t.Errorf("setting memory.max in a run's group: %v", err)
	}
}

func TestSdWithin(t *testing.T) {
	for _, c := range []struct {
		p, want string
		ok      bool
	}{
		{"/user.slice/u/app.slice/warden-7.scope", "/user.slice/u/app.slice/warden-7.scope", true},
		{"/user.slice/u/app.slice/warden-7.scope/engine", "/user.slice/u/app.slice/warden-7.scope", true},
		{"/user.slice/u/app.slice/warden-77.scope", "", false},
		{"/user.slice/user-1000.slice/session-3.scope", "", false},
	} {
		got, ok := sdWithin(c.p, "warden-7.scope")
		if got != c.want || ok != c.ok {
			t.Errorf("sdWithin(%q) = %q, %v; want %q, %v", c.p, got, ok, c.want, c.ok)
		}
	}
}

func TestSdV2Line(t *testing.T) {
	got, err := sdV2Line("12:pids:/x\n0::/user.slice/user-1000.slice/session-3.scope\n")
	if err != nil || got != "/user.slice/user-1000.slice/session-3.scope" {
		t.Fatalf("got %q, %v", got, err)
	}
	if _, err := sdV2Line("4:memory:/\n"); err == nil || !strings.Contains(err.Error(), "not a cgroup v2 host") {
		t.Fatalf("v1 only: err = %v", err)
	}
}

func TestSdUserBusAddresses(t *testing.T) {
	rd := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", rd)
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/bus")
	got := sdUserBusAddresses(4242)
	if len(got) == 0 || got[0].address != "unix:path=/nonexistent/bus" || !got[0].hello {
		t.Fatalf("the session bus address comes first: %+v", got)
	}
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "")
	got = sdUserBusAddresses(4242)
	if len(got) != 1 || got[0].address != "unix:path=/run/user/4242/bus" {
		t.Fatalf("nothing there: name where we looked, got %+v", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _, err := sdConnect(ctx, 4242)
	if err == nil || !strings.Contains(err.Error(), "no systemd user session") ||
		!strings.Contains(err.Error(), "loginctl enable-linger") {
		t.Fatalf("err = %v", err)
	}
	t.Log(err)
}

func sdTestV2Mount() string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		for i, fl := range fields {
			if fl == "-" && i+1 < len(fields) && fields[i+1] == "cgroup2" {
				return fields[4]
			}
		}
	}
	return ""
}
