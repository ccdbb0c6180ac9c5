package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeKilledMidRunLeavesNothing: kill -9 of `warden serve` while a
// hook runs that has left a setsid daemon behind (a grandchild in a
// session of its own, out of the hook's process group). Under bwrap the
// pid namespace dies with its init; under landlock the stage gets its
// parent-death signal and kills its whole tree; with the jail off the
// daemon lives on, the contrast that shows the attempt works. The next
// engine to open the data dir closes the run as failed.
func TestServeKilledMidRunLeavesNothing(t *testing.T) {
	base := privateDir(t, "warden-death-")
	bin := filepath.Join(base, "bin", "warden")
	buildWarden(t, bin)
	for _, mode := range []string{"bwrap", "landlock", "off"} {
		t.Run(mode, func(t *testing.T) {
			marker := fmt.Sprintf("1000.%09d", time.Now().UnixNano()%1e9)
			mods := filepath.Join(base, mode)
			mod := bashModule(t, mods, "daemon", "d", "( setsid sleep "+marker+" </dev/null >/dev/null 2>&1 & )\necho left-a-daemon\nsleep 600\n")
			t.Cleanup(func() {
				for _, p := range procsWith(marker) {
					pid, _, _ := strings.Cut(p, ":")
					exec.Command("kill", "-9", pid).Run()
				}
			})
			data := filepath.Join(base, mode+"-data")
			if out, err := exec.Command(bin, "--data-dir", data, "module", "add", mod).CombinedOutput(); err != nil {
				t.Fatalf("module add: %v: %s", err, out)
			}
			var out lockedBuffer
			srv := exec.Command(bin, "--data-dir", data, "serve", "--run", "daemon/d", "--jail="+mode)
			srv.Stdout, srv.Stderr = &out, &out
			if err := srv.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
			waitUntil(t, "the daemon", 20*time.Second, func() bool { return len(procsWith(marker)) > 0 }, out.String)

			srv.Process.Signal(syscall.SIGKILL)
			srv.Wait()
			gone := func() bool { return len(procsWith(marker)) == 0 }
			if mode == "off" {
				time.Sleep(time.Second)
				if gone() {
					t.Fatalf("jail off: the daemon died with the engine, so the test shows nothing")
				}
				t.Logf("jail off: the daemon outlived its engine: %v", procsWith(marker))
			} else {
				waitUntil(t, "the daemon's end", 10*time.Second, gone, func() string { return fmt.Sprint(procsWith(marker)) })
				t.Logf("jail %s: the daemon died with its engine", mode)
			}

			// The next engine closes the run.
			b, err := exec.Command(bin, "--data-dir", data, "hook", "runs", "--json").Output()
			if err != nil {
				t.Fatalf("hook runs: %v", err)
			}
			var runs []struct{ Status, Error string }
			if err := json.Unmarshal(b, &runs); err != nil || len(runs) != 1 || runs[0].Status != "failed" || !strings.Contains(runs[0].Error, "stopped while the run was in progress") {
				t.Errorf("runs after the engine's death: %s (%v)", b, err)
			}
		})
	}
}
