package main

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/wardenhq/warden/storage"
)

// TestHookLogsFollowQuietRun: `hook logs RUN --follow` on a run that has
// said its lines and now waits (on an operator, a sleep) shows those
// lines at once. They sat in a buffer until the run's next line.
func TestHookLogsFollowQuietRun(t *testing.T) {
	env := newMCPEnv(t)
	run := exec.Command(env.bin, "--data-dir", env.c.dir, "hook", "run", "slow", "wait")
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { run.Process.Kill(); run.Wait() }()
	var id string
	waitUntil(t, "the slow run to say it started", 20*time.Second, func() bool {
		var runs []storage.RunRecord
		env.c.json(0, &runs, "hook", "runs")
		for _, r := range runs {
			if r.Module == "slow" && r.Status == storage.RunRunning {
				id = r.ID
				lines, _ := exec.Command(env.bin, "--data-dir", env.c.dir, "hook", "logs", id).Output()
				return strings.Contains(string(lines), "started")
			}
		}
		return false
	}, func() string { return "" })
	follow := exec.Command(env.bin, "--data-dir", env.c.dir, "hook", "logs", id, "--follow")
	out := &lockedBuffer{}
	follow.Stdout, follow.Stderr = out, out
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { follow.Process.Kill(); follow.Wait() }()
	waitUntil(t, "--follow to show the quiet run's line", 15*time.Second,
		func() bool { return strings.Contains(out.String(), "started") },
		func() string { return "--follow printed: " + out.String() })
}
