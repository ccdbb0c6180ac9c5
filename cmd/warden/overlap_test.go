package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Two `hook run`s with no serve: A holds the data dir, B attaches to A's
// engine. When A's own run ends first, A keeps serving until B's run has
// ended too, saying so, instead of closing its engine and cancelling B's
// run (before: B printed "the engine stopped on purpose" and exited 1).
func TestOverlappingHookRunsDoNotCancelEachOther(t *testing.T) {
	c, base, bin := gateModule(t)
	started := func(name string) func() bool {
		return func() bool { _, err := os.Stat(filepath.Join(base, name+".started")); return err == nil }
	}
	let := func(name string) { os.WriteFile(filepath.Join(base, name+".go"), nil, 0o600) }

	var aOut, aErr, bOut, bErr lockedBuffer
	a := exec.Command(bin, "--data-dir", c.dir, "hook", "run", "gate", "first", "--jail=off")
	a.Stdout, a.Stderr = &aOut, &aErr
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	defer a.Process.Kill()
	more := func() string {
		return "A stdout:\n" + aOut.String() + "A stderr:\n" + aErr.String() + "B stdout:\n" + bOut.String() + "B stderr:\n" + bErr.String()
	}
	waitUntil(t, "A's hook", 20*time.Second, started("first"), more)
	b := exec.Command(bin, "--data-dir", c.dir, "hook", "run", "gate", "second", "--jail=off")
	b.Stdout, b.Stderr = &bOut, &bErr
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	defer b.Process.Kill()
	waitUntil(t, "B's hook", 20*time.Second, started("second"), more)

	let("first") // A's run ends; B's goes on
	waitUntil(t, "A waiting for B's run", 20*time.Second, func() bool { return strings.Contains(aErr.String(), "waiting for 1 run(s)") }, more)
	let("second")
	if err := b.Wait(); err != nil {
		t.Fatalf("B: %v\n%s", err, more())
	}
	if err := a.Wait(); err != nil {
		var ee *exec.ExitError
		errors.As(err, &ee)
		t.Fatalf("A: %v\n%s", err, more())
	}
	if !strings.Contains(bErr.String()+bOut.String(), "succeeded") || !strings.Contains(bErr.String()+bOut.String(), "second done") {
		t.Errorf("B did not see its run succeed:\n%s", more())
	}
	runs := c.ok("receipts", "list", "--kind", "hook.end")
	if strings.Count(runs.stdout, "succeeded") != 2 {
		t.Errorf("hook.end receipts:\n%s", runs.stdout)
	}
}

// gateModule: a CLI on a fresh data dir with module gate, whose hooks
// first and second each wait for a file (base/NAME.go) after saying they
// started (base/NAME.started).
func gateModule(t *testing.T) (c *cli, base, bin string) {
	t.Helper()
	c = newCLI(t)
	base = privateDir(t, "warden-overlap-")
	bin = wardenLink(t, base)
	dir := filepath.Join(base, "modules", "gate")

	os.MkdirAll(dir, 0o755)
	hook := func(name string) string {
		return fmt.Sprintf("#!/bin/sh\ntouch %s/%s.started\nwhile [ ! -e %s/%s.go ]; do sleep 0.05; done\necho \"%s done\"\n", base, name, base, name, name)
	}
	for _, h := range []string{"first", "second"} {
		if err := os.WriteFile(filepath.Join(dir, h+".sh"), []byte(hook(h)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	yaml := "id: gate\nversion: 1.0.0\ndescription: waits for a file\nhooks:\n  first:\n    run: [./first.sh]\n    timeout: 2m\n    idle_timeout: 2m\n  second:\n    run: [./second.sh]\n    timeout: 2m\n    idle_timeout: 2m\n"
	os.WriteFile(filepath.Join(dir, "module.yaml"), []byte(yaml), 0o644)
	c.ok("module", "add", dir)
	return c, base, bin
}

// A holder asked to stop (SIGTERM: `timeout`, systemctl, a supervisor)
// stops at once, attached runs or not: the wait for them is for a verb
// that ended on its own, never for a signal. B's run is cancelled, and B
// prints it as stored.
func TestHolderStopsOnSIGTERMWithAttachedRuns(t *testing.T) {
	c, base, bin := gateModule(t)
	started := func(name string) func() bool {
		return func() bool { _, err := os.Stat(filepath.Join(base, name+".started")); return err == nil }
	}
	var aOut, aErr, bOut, bErr lockedBuffer
	a := exec.Command(bin, "--data-dir", c.dir, "hook", "run", "gate", "first", "--jail=off")
	a.Stdout, a.Stderr = &aOut, &aErr
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	defer a.Process.Kill()
	more := func() string {
		return "A stderr:\n" + aErr.String() + "B stderr:\n" + bErr.String()
	}
	waitUntil(t, "A's hook", 20*time.Second, started("first"), more)
	b := exec.Command(bin, "--data-dir", c.dir, "hook", "run", "gate", "second", "--jail=off")
	b.Stdout, b.Stderr = &bOut, &bErr
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	defer b.Process.Kill()
	waitUntil(t, "B's hook", 20*time.Second, started("second"), more)

	a.Process.Signal(syscall.SIGTERM)
	exited := make(chan error, 1)
	go func() { exited <- a.Wait() }()
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		t.Fatalf("A is still up 15 s after SIGTERM:\n%s", more())
	}
	b.Wait()
	if strings.Contains(aErr.String(), "waiting for") {
		t.Errorf("A waited for B's run after a SIGTERM:\n%s", more())
	}
	if !strings.Contains(bErr.String(), " cancelled in ") {
		t.Errorf("B does not print its run as stored (cancelled):\n%s", more())
	}
}
