package engine

import (
	"warden/engine/hooks"
	"warden/engine/jail"
	"warden/engine/jail/cgroup"
)

// Resource limits of jailed runs (module.yaml `limits`, under config.yaml's
// ceiling). Memory, pids and cpu are held by a cgroup per run; where the
// host has none to offer, runs go on with "limits off", which the start
// and end receipts of each such run say, as they say "jail OFF".

// limit sets the run's resource limits on its jail and records them in
// the start receipt's details.
func (r *activeRun) limit(js *jail.Spawner, details map[string]any) error {
	res := r.hook.Effective(r.e.ceiling())
	enf, err := js.Limit(r.rec.ID, res)
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
		r.limits = "off"
		lim["off"] = "memory, pids and cpu are not enforced: " + enf.Why
	}
	details["limits"] = lim
	return nil
}

// limitsNote is the receipts' summary note: only "limits off" is news.
func limitsNote(limits string) string {
	if limits == "off" {
		return ", limits OFF"
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

// LimitsOffError: no cgroup can hold runs' limits.
type LimitsOffError struct{ Detail string }

func (e *LimitsOffError) Error() string {
	return "resource limits off (memory, pids and cpu are not enforced): " + e.Detail
}

// Ceiling is the operator's ceiling of hooks' resource limits.
func (e *Engine) Ceiling() hooks.Resources { return e.ceiling() }
