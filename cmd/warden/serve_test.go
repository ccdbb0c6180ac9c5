package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/storage"
)

// procsWith lists the live processes whose command line contains marker.
func procsWith(marker string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, d := range ents {
		if d.Name()[0] < '0' || d.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil || !bytes.Contains(b, []byte(marker)) {
			continue
		}
		if st, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat")); err == nil {
			if i := bytes.LastIndexByte(st, ')'); i > 0 && len(st) > i+2 && st[i+2] == 'Z' {
				continue // a zombie is not running; its parent reaps it
			}
		}
		out = append(out, d.Name()+": "+strings.ReplaceAll(string(b), "\x00", " "))
	}
	return out
}

// lockedBuffer collects a child's output while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func waitUntil(t testing.TB, what string, timeout time.Duration, ok func() bool, more func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within %s\n%s", what, timeout, more())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestServeSIGTERMCancelsRunningHook: `warden serve` with a hook running
// (a shell that waits on a child sleep) exits 0 on SIGTERM within a few
// seconds; the run's hook.end receipt says it was cancelled because the
// engine is shutting down; no process of the hook survives; nothing is
// left in runs/, no socket anywhere in the data dir, no pid file.
func TestServeSIGTERMCancelsRunningHook(t *testing.T) {
	base := privateDir(t, "warden-serve-")
	bin := filepath.Join(base, "bin", "warden")
	data := filepath.Join(base, "data")
	buildWarden(t, bin)
	mod, marker := sleeperModule(t, base)
	if out, err := exec.Command(bin, "--data-dir", data, "module", "add", mod).CombinedOutput(); err != nil {
		t.Fatalf("module add: %v: %s", err, out)
	}

	var stdout, stderr lockedBuffer
	cmd := exec.Command(bin, "--data-dir", data, "serve", "--run", "sleeper/nap", "--jail=off")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	output := func() string { return "stdout:\n" + stdout.String() + "stderr:\n" + stderr.String() }

	want := fmt.Sprintf("serving data dir %s (pid %d) on %s\n", data, cmd.Process.Pid, filepath.Join(data, "control.sock"))
	waitUntil(t, "serving", 20*time.Second, func() bool { return strings.Contains(stdout.String(), want) }, output)
	waitUntil(t, "the run", 20*time.Second, func() bool { return strings.Contains(stderr.String(), "run ") }, output)
	waitUntil(t, "the hook's sleep", 20*time.Second, func() bool { return len(procsWith(marker)) > 0 }, output)
	if pid := storagePID(t, data); pid != cmd.Process.Pid {
		t.Errorf("warden.pid says %d, serve is %d", pid, cmd.Process.Pid)
	}
	// Other commands attach to serve while it holds the data dir.
	out, err := exec.Command(bin, "--data-dir", data, "hook", "runs").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "sleeper/nap") || !strings.Contains(string(out), "running") {
		t.Fatalf("hook runs beside serve: %v: %s", err, out)
	}
	out, err = exec.Command(bin, "--data-dir", data, "doctor").CombinedOutput()
	if err != nil || !strings.Contains(string(out), fmt.Sprintf("held and served by warden pid %d", cmd.Process.Pid)) {
		t.Fatalf("doctor beside serve: %v: %s", err, out)
	}
	sockets := findSockets(t, data)
	if len(sockets) == 0 {
		t.Fatalf("no broker socket under %s while the hook runs", data)
	}

	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("serve exited %v\n%s", err, output())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("serve still running 15s after SIGTERM\n%s", output())
	}
	t.Logf("serve stopped %s after SIGTERM", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(stderr.String(), "received terminated: shutting down") {
		t.Errorf("stderr:\n%s", stderr.String())
	}
	// It said which run it was cancelling, and whose, before it went.
	if !regexp.MustCompile(`cancelling run \S+ of sleeper/nap, started by local:`).MatchString(stderr.String()) {
		t.Errorf("serve did not name the run its stop cancels:\n%s", stderr.String())
	}

	if left := procsWith(marker); len(left) > 0 {
		t.Errorf("hook processes survived serve: %v", left)
	}
	if left := procsWith(mod); len(left) > 0 {
		t.Errorf("hook processes survived serve: %v", left)
	}
	if s := findSockets(t, data); len(s) > 0 {
		t.Errorf("sockets left behind: %v", s)
	}
	if ents, err := os.ReadDir(filepath.Join(data, "runs")); err == nil && len(ents) > 0 {
		t.Errorf("runs/ not empty: %v", ents)
	}
	if _, err := os.Stat(filepath.Join(data, "warden.pid")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("pid file left behind: %v", err)
	}

	e, err := engine.Open(engine.Options{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ends, err := e.Receipts(engine.ReceiptFilter{Kind: "hook.end"})
	if err != nil {
		t.Fatal(err)
	}
	if len(ends) != 1 || ends[0].Subject != "sleeper/nap" || !strings.Contains(ends[0].Summary, "cancelled") ||
		!strings.Contains(string(ends[0].Details), "the engine is shutting down") {
		t.Fatalf("hook.end receipts %+v", ends)
	}
	runs, err := e.Runs(0)
	if err != nil || len(runs) != 1 || runs[0].Status != "cancelled" || runs[0].Error != "the engine is shutting down" {
		t.Fatalf("runs %+v %v", runs, err)
	}
}

// sleeperModule writes module sleeper under base: its hook nap says
// "napping", then waits on a sleep whose argument is marker, so a survivor
// is found by its command line whatever its pid (and killed when the test
// ends).
func sleeperModule(t *testing.T, base string) (dir, marker string) {
	t.Helper()
	marker = fmt.Sprintf("3600.%09d", time.Now().UnixNano()%1e9)
	dir = filepath.Join(base, "modules", "sleeper")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\necho \"napping in $$\"\nsleep " + marker + " &\necho \"child $!\"\nwait\n"
	yaml := "id: sleeper\nversion: 1.0.0\ndescription: sleeps until cancelled\nhooks:\n  nap:\n    run: [./nap.sh]\n    timeout: 10m\n    idle_timeout: 10m\n"
	if err := os.WriteFile(filepath.Join(dir, "nap.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "module.yaml"), []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, p := range procsWith(marker) {
			pid, _, _ := strings.Cut(p, ":")
			exec.Command("kill", "-9", pid).Run()
		}
	})
	return dir, marker
}

func storagePID(t *testing.T, data string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(data, "warden.pid"))
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	fmt.Sscan(string(b), &pid)
	return pid
}

func findSockets(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type()&fs.ModeSocket != 0 {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// TestServeUsage: flags that do not go together, and a bad --run, are
// usage errors (exit 2).
func TestServeUsage(t *testing.T) {
	c := newCLI(t)
	if r := c.run("serve", "--run", "nohook"); r.code != 2 || !strings.Contains(r.stderr, "want MODULE/HOOK") {
		t.Errorf("--run nohook: %s", r)
	}
	if r := c.run("serve", "--operators", "/nonexistent"); r.code != 2 || !strings.Contains(r.stderr, "--operators needs --ssh") {
		t.Errorf("--operators alone: %s", r)
	}
	if r := c.run("serve", "--input", "target=x"); r.code != 2 || !strings.Contains(r.stderr, "--input needs --run") {
		t.Errorf("--input alone: %s", r)
	}
	if r := c.run("serve", "--run", "hello/greet", "--input", "target"); r.code != 2 || !strings.Contains(r.stderr, "want NAME=VALUE") {
		t.Errorf("--input without =: %s", r)
	}
	if r := c.run("serve", "--run", "hello/greet", "--input", "a=1", "--input", "a=2"); r.code != 2 || !strings.Contains(r.stderr, "given twice") {
		t.Errorf("--input twice: %s", r)
	}
}

// TestServeRunInputs: serve's --run takes the hook's inputs (--input
// NAME=VALUE, as hook run does): hello/greet, which needs target, runs
// with it. Without the input the hook cannot start, and serve fails
// (exit 1, saying why) before it says "serving", leaving the data dir free.
func TestServeRunInputs(t *testing.T) {
	base := privateDir(t, "warden-serve-run-")
	bin := filepath.Join(base, "bin", "warden")
	data := filepath.Join(base, "data")
	buildWarden(t, bin)
	if out, err := exec.Command(bin, "--data-dir", data, "module", "add", example(t, "hello")).CombinedOutput(); err != nil {
		t.Fatalf("module add: %v: %s", err, out)
	}

	// Without target: an error, and no "serving".
	var stdout, stderr lockedBuffer
	cmd := exec.Command(bin, "--data-dir", data, "serve", "--run", "hello/greet", "--jail=off")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	output := func() string { return "stdout:\n" + stdout.String() + "stderr:\n" + stderr.String() }
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Errorf("serve --run without the input: %v, want exit 1\n%s", err, output())
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("serve --run without the input still running after 20s\n%s", output())
	}
	if strings.Contains(stdout.String(), "serving") || !strings.Contains(stderr.String(), "warden: --run hello/greet: ") ||
		!strings.Contains(stderr.String(), "target") {
		t.Errorf("serve --run without the input:\n%s", output())
	}
	for _, name := range []string{"warden.pid", "control.sock"} {
		if _, err := os.Stat(filepath.Join(data, name)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s left behind: %v", name, err)
		}
	}

	// With it: the run has the input and greets it.
	stdout, stderr = lockedBuffer{}, lockedBuffer{}
	cmd = exec.Command(bin, "--data-dir", data, "serve", "--run", "hello/greet", "--input", "target=serve", "--jail=off")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited = make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	// stdout and stderr reach their buffers through two pipes, in no set
	// order: wait for both lines, though serve writes the run's first.
	started := regexp.MustCompile(`run (\S+) of hello/greet started \(jail OFF\)`)
	waitUntil(t, "serving", 20*time.Second, func() bool {
		return strings.Contains(stdout.String(), "serving data dir") && started.MatchString(stderr.String())
	}, output)
	m := started.FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("no run started:\n%s", output())
	}
	id := m[1]
	// Attached to serve, the CLI sees the run end (no operator is
	// attached, so its confirm is answered no at once).
	var runs []engine.RunRecord
	waitUntil(t, "the run to end", 30*time.Second, func() bool {
		out, err := exec.Command(bin, "--data-dir", data, "hook", "runs", "--json").Output()
		runs = nil
		return err == nil && json.Unmarshal(out, &runs) == nil && len(runs) == 1 && runs[0].Status != "running"
	}, func() string { return fmt.Sprintf("runs %+v\n%s", runs, output()) })
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("serve exited %v after SIGTERM\n%s", err, output())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("serve still running 15s after SIGTERM\n%s", output())
	}

	e, err := engine.Open(engine.Options{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	rs, err := e.Runs(0)
	if err != nil || len(rs) != 1 || rs[0].ID != id || string(rs[0].Inputs) != `{"target":"serve"}` {
		t.Fatalf("runs %+v %v, want run %s with target serve", rs, err, id)
	}
	lines, err := e.StreamLines(id, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var text []string
	for _, l := range lines {
		text = append(text, l.Text)
	}
	if !strings.Contains(strings.Join(text, "\n"), "about to greet serve") {
		t.Errorf("the run's stream does not greet serve:\n%s", strings.Join(text, "\n"))
	}
}

// TestServeSIGTERMGivesJailedHookItsGrace: a jailed hook that traps
// SIGTERM, takes a second and then writes a file, gets to write it when
// `warden serve` is stopped with SIGTERM (the engine's shutdown cancels
// the run with the hook's grace, not by ending the jail around it).
func TestServeSIGTERMGivesJailedHookItsGrace(t *testing.T) {
	needBwrap(t)
	base := privateDir(t, "warden-serve-grace-")
	bin := filepath.Join(base, "bin", "warden")
	data := filepath.Join(base, "data")
	buildWarden(t, bin)
	mod := filepath.Join(base, "modules", "graceful")
	// Outside the home: no path input may reach into it.
	out, err := os.MkdirTemp("/var/tmp", "warden-serve-grace-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(out) })
	os.MkdirAll(mod, 0o755)
	os.Chmod(out, 0o777) // the jailed hook's uid writes there
	script := "#!/bin/bash\ntrap 'sleep 1; echo graced > \"$1/graced\"; exit 0' TERM\necho ready\nwhile :; do sleep 0.1; done\n"
	yaml := "id: graceful\nversion: 1.0.0\nhooks:\n  wait:\n    run: [./wait.sh, \"" + out + "\"]\n    inputs: {out: path:rw}\n    idle_timeout: 10m\n"
	os.WriteFile(filepath.Join(mod, "wait.sh"), []byte(script), 0o755)
	os.WriteFile(filepath.Join(mod, "module.yaml"), []byte(yaml), 0o644)
	if o, err := exec.Command(bin, "--data-dir", data, "module", "add", mod).CombinedOutput(); err != nil {
		t.Fatalf("module add: %v: %s", err, o)
	}
	var stdout, stderr lockedBuffer
	cmd := exec.Command(bin, "--data-dir", data, "serve", "--run", "graceful/wait", "--input", "out="+out)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	output := func() string { return "stdout:\n" + stdout.String() + "stderr:\n" + stderr.String() }
	waitUntil(t, "the run", 20*time.Second, func() bool { return strings.Contains(stderr.String(), "run ") }, output)
	logs := func() string {
		var runs []storage.RunRecord
		o, _ := exec.Command(bin, "--data-dir", data, "hook", "runs", "--json").Output()
		if json.Unmarshal(o, &runs) != nil || len(runs) == 0 {
			return string(o)
		}
		o, _ = exec.Command(bin, "--data-dir", data, "hook", "logs", runs[0].ID).CombinedOutput()
		return string(o)
	}
	waitUntil(t, "the hook's ready", 20*time.Second, func() bool { return strings.Contains(logs(), "ready") }, func() string { return output() + logs() })
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("serve exited %v\n%s", err, output())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("serve still running 15s after SIGTERM\n%s", output())
	}
	if b, err := os.ReadFile(filepath.Join(out, "graced")); err != nil || string(b) != "graced\n" {
		t.Errorf("the jailed hook did not get its grace on serve's SIGTERM: %v %q\n%s", err, b, output())
	}
}
