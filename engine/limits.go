package engine

import (
	"fmt"
	"os"

	"github.com/wardenhq/warden/engine/hooks"
	"github.com/wardenhq/warden/engine/jail"
	"github.com/wardenhq/warden/engine/jail/cgroup"
)

// Resource limits of jailed runs (module.yaml `limits`, under config.yaml's
// ceiling). Memory, pids and cpu are held by a cgroup per run; where the
// host has none to offer, runs go on with "limits off", which the start
// and end receipts of each such run say, as they say "jail OFF".

// limit sets the run's resource limits on its jail and records them in
// the start receipt's details.
func (r *activeRun) limit(js *jail.Spawner, details map[string]any) error {
	if r.e.noLimits {
		return nil
	}
	res := r.hook.Effective(r.e.ceiling())
	enf, err := js.Limit(r.rec.ID, res, r.hook.Timeout)
	if err != nil {
		return err
	}
	lim := map[string]any{"memory": res.Format("memory"), "pids": res.Pids, "cpu": res.CPU,
		"tmp": res.Format("tmp"), "run_dir": res.Format("run_dir"), "nproc": jail.HookNproc()}
	if enf.Cgroup {
		r.limits = "on"
		if !enf.CPU {
			lim["cpu"] = "off: no cpu controller"
		}
	} else {
		r.limits = "rlimit"
		lim["rlimit"] = fmt.Sprintf("no cgroup (%s): each process has RLIMIT_DATA %s, RLIMIT_CPU %ds, RLIMIT_FSIZE %s, and warden watches the run's memory and pids together every %s; weaker than a cgroup: the cpu share is not held",
			enf.Why, hooks.FormatSize(int64(enf.Rlimits.Data)), enf.Rlimits.CPU, hooks.FormatSize(int64(enf.Rlimits.Fsize)), jail.WatchPeriod)
	}
	details["limits"] = lim
	return nil
}

// limitsNote is the receipts' summary note: only limits weaker than a
// cgroup are news ("limits OFF" is a test's engine, with none at all).
func limitsNote(limits string) string {
	switch limits {
	case "off":
		return ", limits OFF"
	case "rlimit":
		return ", limits: rlimit"
	}
	return ""
}

// LimitsReady says why jailed runs' memory, pids and cpu limits cannot be
// enforced on this host (nil when they can): the console's header shows
// "limits off" then.
func (e *Engine) LimitsReady() error {
	if sup := cgroup.Probe(); sup.Version == 0 {
		return &LimitsOffError{Detail: sup.Detail}
	}
	return nil
}

// LimitsOffError: no cgroup can hold runs' limits; they get rlimits
// and warden's watch instead (`limits: rlimit`).
type LimitsOffError struct{ Detail string }

func (e *LimitsOffError) Error() string {
	return "resource limits held by rlimits only (per process, and memory and pids by warden's watch: weaker than a cgroup; no cpu share): " + e.Detail
}

// doctorLimits says which of jailed runs' resource limits this host
// enforces, and which it cannot, with why and what to do. No cgroup is a
// warning: runs still go, under rlimits, and their receipts say
// "limits: rlimit". picked is
// the backend `jail: auto` picks here: under landlock /tmp and the run
// dir are not sized.
func doctorLimits(ceiling hooks.Resources, picked string, add func(Check)) {
	sup := cgroup.Probe()
	def := hooks.DefaultResources.Min(ceiling)
	switch {
	case sup.Version == 0:
		add(Check{Name: "resource limits", Status: "problem", Warning: true,
			Detail: "no cgroup can hold jailed runs' limits, so they are held weaker (\"limits: rlimit\" in their receipts): each process gets RLIMIT_DATA from the memory limit, RLIMIT_CPU from the timeout and RLIMIT_FSIZE from tmp and run_dir, and warden watches each run's memory and pids together; the cpu share is not held: " + cgroup.JoinReasons(sup.Missing),
			Fix:    "run warden under systemd (examples/systemd/: Delegate=yes, docs/systemd.md), or from a login session whose user systemd can give it a scope, or as root on a host with the memory and pids cgroup controllers"})
	case !sup.CPU:
		add(Check{Name: "resource limits", Status: "ok", Detail: fmt.Sprintf("%s; memory and pids enforced (defaults: %s; ceiling: %s)", sup.Detail, def, ceiling)})
		add(Check{Name: "cpu limit", Status: "problem", Warning: true, Detail: "the cpu limit of jailed runs cannot be enforced: " + cgroup.JoinReasons(sup.Missing),
			Fix: "mount the cpu controller (cgroup v1) or delegate it (cgroup v2)"})
	default:
		add(Check{Name: "resource limits", Status: "ok", Detail: fmt.Sprintf("%s; memory, pids and cpu enforced (defaults: %s; ceiling: %s)", sup.Detail, def, ceiling)})
	}
	if picked == jail.BackendLandlock {
		add(Check{Name: "jail tmpfs", Status: "problem", Warning: true, Detail: fmt.Sprintf("jail: auto picks landlock here, which has no mount namespace: a run's tmp and run dir are directories on the data dir's disk, and the tmp and run_dir limits (defaults %s, %s) are not held", def.Format("tmp"), def.Format("run_dir")),
			Fix: "where bwrap can make its namespaces (see user namespaces), runs get sized tmpfs"})
	} else {
		add(Check{Name: "jail tmpfs", Status: "ok", Detail: fmt.Sprintf("/tmp and %s of each jailed run are sized tmpfs (defaults tmp %s, run_dir %s)", jail.RunTarget, def.Format("tmp"), def.Format("run_dir"))})
	}
	if fi, err := os.Lstat(jail.DefaultPrlimit); os.Geteuid() == 0 || (err == nil && fi.Mode().IsRegular()) {
		how := "inherited from warden, which as root is exempt from it"
		if os.Geteuid() != 0 {
			how = "set through " + jail.DefaultPrlimit
		}
		add(Check{Name: "hook processes", Status: "ok", Detail: fmt.Sprintf("RLIMIT_NPROC %d for hooks' uid, from %s (the least of warden's cap %d, pid_max/4 and the hard limit warden started with: lowered, never raised), %s (a second line of defence behind each run's pids limit)",
			jail.HookNproc(), jail.HookNprocSource(), jail.NprocCap, how)})
	} else {
		add(Check{Name: "hook processes", Status: "problem", Warning: true, Detail: jail.DefaultPrlimit + " is missing: hooks' RLIMIT_NPROC is not lowered (each run's pids limit still holds where cgroups do)", Fix: "apt-get install util-linux"})
	}
}
