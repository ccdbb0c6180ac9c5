package jail

import (
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"
)

// TestOwnChildrenWithoutChildrenLists: on a kernel without
// /proc/PID/task/TID/children (CONFIG_PROC_CHILDREN off, which this one
// has on, so a reader that fails stands for it), the landlock reaper
// still finds what is below it, from /proc's stat files: the child and
// the grandchild, so killChildren does not wait on them forever. The
// kernel's own lists, read beside it, find the child.
func TestOwnChildrenWithoutChildrenLists(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "sleep 60 & wait")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, pid := range descendants(cmd.Process.Pid) {
			if p, err := os.FindProcess(pid); err == nil {
				p.Kill()
			}
		}
		cmd.Wait()
	})
	var grandchild int
	for deadline := time.Now().Add(10 * time.Second); grandchild == 0; {
		if d := descendants(cmd.Process.Pid); len(d) > 1 {
			grandchild = d[1]
		} else if time.Now().After(deadline) {
			t.Fatal("the shell did not start its sleep")
		} else {
			time.Sleep(5 * time.Millisecond)
		}
	}
	noLists := func(string) ([]byte, error) { return nil, os.ErrNotExist }
	got := ownChildrenFrom(noLists)
	if !slices.Contains(got, cmd.Process.Pid) || !slices.Contains(got, grandchild) {
		t.Errorf("without children lists: %v, want the child %d and the grandchild %d", got, cmd.Process.Pid, grandchild)
	}
	if lists := ownChildrenFrom(os.ReadFile); !slices.Contains(lists, cmd.Process.Pid) {
		t.Errorf("from the kernel's lists: %v, want the child %d", lists, cmd.Process.Pid)
	}
}
