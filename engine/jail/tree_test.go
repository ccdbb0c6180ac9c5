package jail

import (
	"bytes"
	"testing"
	"time"

	"github.com/wardenhq/warden/engine/hooks"
)

// A hook that fills /tmp and exits at once is seen to have filled it
// however late warden looks: bwrap holds the hook (--block-fd) until the
// jail's tmpfs are pinned. pinDelay stands in for a loaded host, or a
// slow kernel, where without the hold the hook could finish before warden
// had looked (an ordinary user's single bwrap starts the hook within
// milliseconds, and the run would end "exit code 1" instead of "tmp limit
// 8MiB reached").
func TestFastHookFillingTmpIsSeen(t *testing.T) {
	seccompBwrap(t)
	j, err := New(DefaultBwrap)
	if err != nil {
		t.Fatal(err)
	}
	saved := pinDelay
	pinDelay = 300 * time.Millisecond
	t.Cleanup(func() { pinDelay = saved })

	for _, tc := range []struct {
		name, fill, limit string
	}{
		{"tmp", "/tmp/fill", hooks.LimitTmp},
		{"run_dir", RunTarget + "/fill", hooks.LimitRunDir},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, _ := spawnerPlan(t, false)
			s := j.Spawner(plan, false)
			s.res = hooks.Resources{Tmp: 1 << 20, RunDir: 1 << 20}
			sp := testSpawn()
			sp.Argv = []string{"/bin/sh", "-c", "head -c 4000000 /dev/zero >" + tc.fill + "; exit 0"}
			cmd, err := s.Command(sp)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			start := time.Now()
			if err := s.Start(cmd); err != nil {
				t.Fatal(err)
			}
			s.Release()
			if err := cmd.Wait(); err != nil {
				t.Fatalf("jailed hook: %v\n%s", err, out.String())
			}
			took := time.Since(start)
			limit, text := s.Exceeded()
			s.Close()
			if limit != tc.limit {
				t.Errorf("after the hook filled %s and exited (in %s): Exceeded() = %q %q, want %q\n%s", tc.fill, took, limit, text, tc.limit, out.String())
			}
		})
	}
}

// Started without Start (no pinner), bwrap is let go by Release: a
// command built by Command never waits on its --block-fd for nothing.
func TestCommandWithoutStartIsNotHeld(t *testing.T) {
	seccompBwrap(t)
	j, err := New(DefaultBwrap)
	if err != nil {
		t.Fatal(err)
	}
	plan, _ := spawnerPlan(t, false)
	s := j.Spawner(plan, false)
	s.res = hooks.Resources{Tmp: 1 << 20, RunDir: 1 << 20}
	sp := testSpawn()
	sp.Argv = []string{"/bin/true"}
	cmd, err := s.Command(sp)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.Release()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("bwrap still waits on its --block-fd 20 s after Release")
	}
}
