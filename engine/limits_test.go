package engine

// Resource limits of jailed runs, against hostile hooks (shell scripts in
// the real jail, on this host's real cgroups): each run ends failed naming
// the limit that stopped it, nothing of it is left, and the engine goes on.
// The same hook with the jail off gets past the point where the limit
// stopped it: the limits, not the hook, ended the jailed run.

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"warden/engine/hooks"
	"warden/engine/jail/cgroup"
	"warden/storage"
)

// needLimits: jail tests that need the run's cgroup. Fails in CI.
func needLimits(t *testing.T) {
	t.Helper()
	needJail(t)
	if s := cgroup.Probe(); s.Version == 0 {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI must run the limit tests, but this host cannot enforce limits: %s", s.Detail)
		}
		t.Skipf("this host cannot enforce run limits: %s", s.Detail)
	}
}

// shellModule writes a module whose hooks are shell scripts: hooks maps a
// hook name to its script and extra manifest lines.
func shellModule(t testing.TB, id string, hooks map[string][2]string) string {
	t.Helper()
	base, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(base, 0o700)
	dir, err := os.MkdirTemp(base, "warden-limits-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	var b strings.Builder
	fmt.Fprintf(&b, "id: %s\nversion: 1.0.0\nhooks:\n", id)
	for name, h := range hooks {
		if err := os.WriteFile(filepath.Join(dir, name+".sh"), []byte("#!/bin/bash\n"+h[0]), 0o755); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "  %s:\n    run: [./%s.sh]\n%s", name, name, h[1])
	}
	if err := os.WriteFile(filepath.Join(dir, "module.yaml"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// hostileRun runs hook jailed or not and returns the outcome, with the
// stream for failure messages.
func hostileRun(t *testing.T, e *Engine, mod, hook, jailMode string) (Outcome, string) {
	t.Helper()
	o, err := e.RunHook(testActor, RunRequest{Module: mod, Hook: hook, Jail: jailMode})
	if err != nil {
		t.Fatalf("%s (jail %s): %v", hook, jailMode, err)
	}
	return o, streamText(t, e, o.Run.ID)
}

// wantNothingLeft: no process marked with marker is alive, and the run's
// cgroup is gone from every hierarchy.
func wantNothingLeft(t *testing.T, run, marker string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for left := markedProcs(marker); len(left) > 0; left = markedProcs(marker) {
		if time.Now().After(deadline) {
			t.Errorf("processes of run %s survived it: %+v", run, left)
			killMarked(marker)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if dirs := runGroupDirs(run); len(dirs) > 0 {
		t.Errorf("the cgroup of run %s is still there: %v", run, dirs)
	}
}

// runGroupDirs finds directories named run under any cgroup hierarchy.
func runGroupDirs(run string) []string {
	var out []string
	for _, pat := range []string{"/sys/fs/cgroup/*/warden/" + run, "/sys/fs/cgroup/*/*/*/warden/" + run, "/sys/fs/cgroup/" + run, "/sys/fs/cgroup/*/" + run} {
		m, _ := filepath.Glob(pat)
		out = append(out, m...)
	}
	return out
}

// wantLimitEnd: the run failed, and its record, its hook.end receipt and
// its stream all name the limit.
func wantLimitEnd(t *testing.T, e *Engine, o Outcome, stream, limit, text string) {
	t.Helper()
	if o.Run.Status != storage.RunFailed || o.Run.Error != text {
		t.Errorf("run %s: %q, want failed: %q\nstream:\n%s", o.Run.Status, o.Run.Error, text, stream)
	}
	if !strings.Contains(stream, "warden: the run was stopped: "+text) {
		t.Errorf("the stream does not say why the run was stopped (%q):\n%s", text, stream)
	}
	var end map[string]any
	for _, r := range allReceipts(t, e) {
		if r.Kind == "hook.end" && strings.Contains(r.Summary, o.Run.ID) {
			end = map[string]any{}
			if err := json.Unmarshal(r.Details, &end); err != nil {
				t.Fatal(err)
			}
		}
	}
	if end["limit"] != limit || end["error"] != text || end["limits"] != "on" {
		t.Errorf("hook.end details %v, want limit %q, error %q, limits on", end, limit, text)
	}
}

func TestHostileHooksHitTheirLimits(t *testing.T) {
	needLimits(t)
	needRoot(t)
	marker := fmt.Sprintf("300.%09d", rand.IntN(1e9)) // sleep takes decimals
	t.Cleanup(func() { killMarked(marker); os.Remove("/tmp/fill-" + marker) })
	mod := shellModule(t, "hostile", map[string][2]string{
		// (a) 2,000 children: far past pids 256.
		"fork": {`for i in $(seq 2000); do sleep ` + marker + ` & done
echo "forked 2000"
`, "    timeout: 60s\n"},
		// (b) 2 GiB in one string: far past memory 512MiB.
		"alloc": {`perl -e '$x = "x" x (2 * 1024**3); print "allocated 2GiB\n"'
`, "    timeout: 60s\n"},
		// (c) /tmp and the run dir filled: 100MiB each, past tmp 64MiB
		// and run_dir 16MiB. (Unjailed, /tmp is the host's: the test
		// removes the file.)
		"filltmp": {`dd if=/dev/zero of=/tmp/fill-` + marker + ` bs=1M count=100 2>&1 | tail -1
`, "    timeout: 60s\n"},
		"fillrun": {`dd if=/dev/zero of=$(dirname "$WARDEN_SOCKET")/fill bs=1M count=100 2>&1 | tail -1
`, "    timeout: 60s\n"},
		"noop": {"echo ok\n", ""},
	})
	e := openTestEngine(t)
	if _, err := e.AddModule(testActor, mod); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		hook, limit, text, unjailed string
	}{
		{"fork", hooks.LimitPids, "pids limit 256 reached", "forked 2000"},
		{"alloc", hooks.LimitMemory, "memory limit 512MiB reached", "allocated 2GiB"},
		{"filltmp", hooks.LimitTmp, "tmp limit 64MiB reached (/tmp is full)", "104857600 bytes (105 MB, 100 MiB) copied"},
		{"fillrun", hooks.LimitRunDir, "run_dir limit 16MiB reached (/run/warden is full)", "104857600 bytes (105 MB, 100 MiB) copied"},
	} {
		t.Run(tc.hook, func(t *testing.T) {
			o, stream := hostileRun(t, e, "hostile", tc.hook, JailBwrap)
			t.Logf("jailed: %s %q in %s", o.Run.Status, o.Run.Error, o.Duration)
			wantLimitEnd(t, e, o, stream, tc.limit, tc.text)
			if strings.Contains(stream, tc.unjailed) {
				t.Errorf("jailed, the hook got as far as %q:\n%s", tc.unjailed, stream)
			}
			wantNothingLeft(t, o.Run.ID, marker)

			// The same hook unjailed gets past it: the limit stopped it.
			o, stream = hostileRun(t, e, "hostile", tc.hook, JailOff)
			t.Logf("unjailed: %s in %s", o.Run.Status, o.Duration)
			if !strings.Contains(stream, tc.unjailed) || o.Run.Status != storage.RunSucceeded {
				t.Errorf("unjailed, the hook did not get to %q (run %s: %s):\n%s", tc.unjailed, o.Run.Status, o.Run.Error, stream)
			}
			wantNothingLeft(t, o.Run.ID, marker)

			// The host, and the engine, go on.
			o, stream = hostileRun(t, e, "hostile", "noop", JailBwrap)
			if o.Run.Status != storage.RunSucceeded {
				t.Errorf("the engine after a hostile run: %s %s\n%s", o.Run.Status, o.Run.Error, stream)
			}
		})
	}
}

// A hook spinning on every CPU it can, deaf to SIGTERM, is held to its cpu
// limit while it runs (the cgroup throttles it), and killed after the
// grace that follows its timeout.
func TestSpinningHookIgnoringSIGTERM(t *testing.T) {
	needLimits(t)
	if !cgroup.Probe().CPU {
		t.Skip("no cpu controller: the cpu limit is not enforced here (doctor says so)")
	}
	mod := shellModule(t, "spinner", map[string][2]string{
		"spin": {`trap '' TERM
for i in 1 2 3; do (trap '' TERM; while :; do :; done) & done
echo spinning
while :; do :; done
`, "    timeout: 2s\n    kill_grace: 1s\n    limits: {cpu: 0.5}\n"},
	})
	e := openTestEngine(t)
	if _, err := e.AddModule(testActor, mod); err != nil {
		t.Fatal(err)
	}
	h, err := e.StartRun(testActor, RunRequest{Module: "spinner", Hook: "spin", Jail: JailBwrap})
	if err != nil {
		t.Fatal(err)
	}
	// While it spins, its group is throttled.
	stat := ""
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if dirs, _ := filepath.Glob("/sys/fs/cgroup/cpu/*warden/" + h.ID + "/cpu.stat"); len(dirs) > 0 {
			b, _ := os.ReadFile(dirs[0])
			stat = string(b)
		} else if dirs, _ := filepath.Glob("/sys/fs/cgroup/cpu/*/*/*/warden/" + h.ID + "/cpu.stat"); len(dirs) > 0 {
			b, _ := os.ReadFile(dirs[0])
			stat = string(b)
		}
		if strings.Contains(stat, "nr_throttled") && !strings.Contains(stat, "nr_throttled 0\n") {
			break
		}
	}
	if !strings.Contains(stat, "nr_throttled") || strings.Contains(stat, "nr_throttled 0\n") {
		t.Errorf("the spinning run was never throttled by its cpu limit: %q", stat)
	}
	o := h.Wait()
	if o.Run.Status != storage.RunFailed || o.Run.Error != "exceeded its overall timeout of 2s" {
		t.Errorf("spin: %s %q\n%s", o.Run.Status, o.Run.Error, streamText(t, e, o.Run.ID))
	}
	if o.Duration > 10*time.Second {
		t.Errorf("the SIGTERM-deaf hook outlived its timeout and grace by far: %s", o.Duration)
	}
	wantNothingLeft(t, o.Run.ID, "no-marker-for-spin")
}
