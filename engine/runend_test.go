package engine

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
)

// A jailed run ends only once every process of it is gone, and its
// cgroup with them: a hook that leaves a child running in its jail and
// exits at once has nothing left on the host when its outcome is
// returned. No polling here: the wait is the engine's own, through the
// run's cgroup (limits on, where the host has one) or through the
// process-group scan (limits off).
func TestRunLeavesNothing(t *testing.T) {
	needJail(t)
	// Short names: the run's socket path must fit a sockaddr_un.
	for name, limits := range map[string]bool{"cg": true, "scan": false} {
		t.Run(name, func(t *testing.T) {
			marker := fmt.Sprintf("300.%09d", rand.IntN(1e9)) // sleep takes decimals
			e := setupScripts(t, Options{},
				map[string]string{"leave.sh": "#!/bin/sh\nsleep " + marker + " &\necho left a child behind\n"},
				map[string]string{"leave": "    run: [./leave.sh]\n"})
			t.Cleanup(func() { killMarked(marker) })
			if !limits {
				jl, err := e.jails.Bwrap()
				if err != nil {
					t.Fatal(err)
				}
				e.noLimits, jl.Prlimit = true, ""
			}
			for i := 0; i < 5; i++ {
				o, err := e.RunHook(testActor, RunRequest{Module: "testmod", Hook: "leave", Jail: JailBwrap})
				if err != nil {
					t.Fatal(err)
				}
				if !o.OK() {
					t.Fatalf("run %d: %s: %s\n%s", i, o.Run.Status, o.Run.Error, streamText(t, e, o.Run.ID))
				}
				if left := markedProcs(marker); len(left) > 0 {
					t.Fatalf("run %d: processes of the jailed run outlived its outcome: %+v", i, left)
				}
				if groups := runGroups(o.Run.ID); len(groups) > 0 {
					t.Fatalf("run %d: its cgroup outlived its outcome: %v", i, groups)
				}
			}
		})
	}
}

// runGroups lists the cgroup dirs named after run id, in any hierarchy
// (a run's group is <this process's group>/warden/<id>).
func runGroups(id string) []string {
	var out []string
	for _, pat := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/*", "/sys/fs/cgroup/*/*", "/sys/fs/cgroup/*/*/*", "/sys/fs/cgroup/*/*/*/*"} {
		m, _ := filepath.Glob(filepath.Join(pat, "warden", id))
		out = append(out, m...)
	}
	return out
}
