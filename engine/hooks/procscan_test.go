package hooks

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	for _, c := range []struct {
		in    string
		state byte
		pgrp  int
		ok    bool
	}{
		{"4242 (sh) S 1 4242 4242 0 -1 4194560", 'S', 4242, true},
		{"7 (a) b (c) ) Z 0 0 0", 'Z', 0, true}, // comm with spaces and parentheses
		{"7 (x) R 12", 0, 0, false},             // cut short
		{"7 (x) R -1 5 ", 0, 0, false},
		{"no parenthesis", 0, 0, false},
	} {
		state, pgrp, ok := parseStat([]byte(c.in))
		if ok != c.ok || (ok && (state != c.state || pgrp != c.pgrp)) {
			t.Errorf("parseStat(%q) = %c %d %v, want %c %d %v", c.in, state, pgrp, ok, c.state, c.pgrp, c.ok)
		}
	}
}

// groupHasLive finds a live process of a group among every process on the
// host, and stops finding it once it is dead.
func TestGroupHasLive(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	if !groupHasLive(pgid) {
		t.Fatalf("group %d has a live sleep, but groupHasLive says not", pgid)
	}
	if groupHasLive(1 << 30) {
		t.Errorf("a group nobody is in has a live process")
	}
	syscall.Kill(-pgid, syscall.SIGKILL)
	deadline := time.Now().Add(5 * time.Second)
	for groupHasLive(pgid) { // a zombie until reaped: that counts as gone
		if time.Now().After(deadline) {
			t.Fatal("the killed sleep still counts as live")
		}
		time.Sleep(time.Millisecond)
	}
	cmd.Wait()
}
