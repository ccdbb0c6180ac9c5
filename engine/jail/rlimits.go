package jail

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wardenhq/warden/engine/hooks"
)

// Rlimits are a run's limits where no cgroup can hold them: per
// process, and so weaker (ten processes may each take Data). The
// run's watch (watch.go) holds the whole tree to memory and pids on top
// of them. Zero is "not set".
type Rlimits struct {
	Data  uint64 // RLIMIT_DATA, bytes: twice the memory limit (the watch holds the run to it; see rlimitsFor)
	CPU   uint64 // RLIMIT_CPU, seconds: the run's timeout (SIGXCPU, then SIGKILL a second later)
	Fsize uint64 // RLIMIT_FSIZE, bytes: the larger of tmp and run_dir (SIGXFSZ)
}

// rlimitsFor are the rlimits of r for a run of timeout.
func rlimitsFor(r hooks.Resources, timeout time.Duration) Rlimits {
	rl := Rlimits{Fsize: uint64(max(r.Tmp, r.RunDir, 0))}
	// Twice the memory limit: the watch kills a run that grows past
	// its limit and names it, which a refused allocation would not (the
	// hook would fail with its own ENOMEM); the rlimit is the bound on
	// one process the watch could see too late, a single allocation of
	// that size.
	if r.Memory > 0 {
		rl.Data = 2 * uint64(r.Memory)
	}
	if timeout > 0 {
		rl.CPU = uint64((timeout + time.Second - 1) / time.Second)
	}
	return rl
}

// String is the stage's form: "DATA:CPU:FSIZE".
func (r Rlimits) String() string {
	return fmt.Sprintf("%d:%d:%d", r.Data, r.CPU, r.Fsize)
}

func parseRlimits(s string) (Rlimits, error) {
	f := strings.Split(s, ":")
	if len(f) != 3 {
		return Rlimits{}, fmt.Errorf("rlimits %q: want DATA:CPU:FSIZE", s)
	}
	var v [3]uint64
	for i, x := range f {
		n, err := strconv.ParseUint(x, 10, 64)
		if err != nil {
			return Rlimits{}, fmt.Errorf("rlimits %q: %w", s, err)
		}
		v[i] = n
	}
	return Rlimits{Data: v[0], CPU: v[1], Fsize: v[2]}, nil
}

// prlimitArgs are util-linux prlimit's options for r.
func (r Rlimits) prlimitArgs() []string {
	var out []string
	if r.Data > 0 {
		out = append(out, fmt.Sprintf("--data=%d:%d", r.Data, r.Data))
	}
	if r.CPU > 0 {
		out = append(out, fmt.Sprintf("--cpu=%d:%d", r.CPU, r.CPU+1))
	}
	if r.Fsize > 0 {
		out = append(out, fmt.Sprintf("--fsize=%d:%d", r.Fsize, r.Fsize))
	}
	return out
}

// apply sets r on this process, lowering only: a limit already below
// is kept (an unprivileged process cannot raise its hard limit).
func (r Rlimits) apply() error {
	for _, l := range []struct {
		res        int
		name       string
		soft, hard uint64
	}{
		{unix.RLIMIT_DATA, "RLIMIT_DATA", r.Data, r.Data},
		{unix.RLIMIT_CPU, "RLIMIT_CPU", r.CPU, r.CPU + 1},
		{unix.RLIMIT_FSIZE, "RLIMIT_FSIZE", r.Fsize, r.Fsize},
	} {
		if l.soft == 0 {
			continue
		}
		var cur unix.Rlimit
		if err := unix.Getrlimit(l.res, &cur); err != nil {
			return fmt.Errorf("getrlimit %s: %w", l.name, err)
		}
		want := unix.Rlimit{Cur: min(l.soft, cur.Max), Max: min(l.hard, cur.Max)}
		if err := unix.Setrlimit(l.res, &want); err != nil {
			return fmt.Errorf("%s %d: %w", l.name, l.soft, err)
		}
	}
	return nil
}
