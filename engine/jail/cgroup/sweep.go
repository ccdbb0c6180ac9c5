package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Sweep removes what a run named name left of its group when its engine
// died before removing it (kill -9, SIGKILL at a host's shutdown): in
// every hierarchy, whatever is still in the group is killed, then the
// group goes. It returns the directories it removed; a group that is not
// there is not an error. Only this process's own home (v1) or the
// delegated group runs go under (v2) is searched: the dead engine used
// the same, when it was the same user in the same unit.
func Sweep(name string) ([]string, error) {
	if name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." || strings.HasPrefix(name, sparePrefix) {
		return nil, fmt.Errorf("cgroup: bad group name %q", name)
	}
	var dirs []string
	switch sup := Probe(); sup.Version {
	case 1:
		homes, err := v1Home()
		if err != nil {
			return nil, err
		}
		subs, err := v1Hierarchy()
		if err != nil {
			return nil, err
		}
		for _, sub := range subs {
			p, ok := sub.(interface{ Path(string) string })
			h, ok2 := homes[sub.Name()]
			if ok && ok2 {
				dirs = append(dirs, p.Path(filepath.Join(h, "warden", name)))
			}
		}
	case 2:
		dirs = []string{filepath.Join(sup.v2Mount, sup.v2Parent, name)}
	}
	var removed []string
	var errs []error
	for _, d := range dirs {
		if _, err := os.Stat(d); err != nil {
			continue
		}
		if err := sweepDir(d); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, d)
	}
	return removed, errors.Join(errs...)
}

// sweepDir empties group dir (cgroup.kill where there is one, SIGKILL to
// each member otherwise, until none is left) and removes it.
func sweepDir(dir string) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		ps, err := readPids(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			return fmt.Errorf("cgroup: %s: %w", dir, err)
		}
		if len(ps) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup: %s still holds %d processes after SIGKILL", dir, len(ps))
		}
		if writeFile(dir, "cgroup.kill", "1") != nil {
			for _, p := range ps {
				if p != os.Getpid() {
					syscall.Kill(p, syscall.SIGKILL)
				}
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("cgroup: removing %s: %w", dir, err)
	}
	return nil
}
