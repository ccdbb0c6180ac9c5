package engine

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/wardenhq/warden/engine/hooks"
	"github.com/wardenhq/warden/engine/jail"
)

// HookPlan is what `warden hook plan` shows: the jail a run of the hook
// would get on this host, and what is absent here.
type HookPlan struct {
	Module  string `json:"module"`
	Hook    string `json:"hook"`
	Network bool   `json:"network"`
	// NetworkMode is "none", "host" (network: true, granted) or "egress"
	// (a list: the empty namespace and the run's proxy); Destinations is
	// the hook's list and PolicyNetwork what its module's policy allows.
	NetworkMode   string     `json:"networkMode"`
	Destinations  []string   `json:"destinations,omitempty"`
	PolicyNetwork []string   `json:"policyNetwork,omitempty"`
	PolicyAll     bool       `json:"policyNetworkAll,omitempty"`
	Plan          *jail.Plan `json:"plan"`
	Problem       string     `json:"problem,omitempty"` // set when a run would fail before spawn
	// Limits are the run's resource limits (module.yaml under the
	// operator's ceiling); LimitsOff says why memory, pids and cpu would
	// not be enforced on this host.
	Limits    hooks.Resources `json:"limits"`
	LimitsOff string          `json:"limitsOff,omitempty"`
	// Jail is the backend a run would get (the engine's jail mode:
	// auto picks bwrap, else landlock), or why none can run.
	Jail        string `json:"jail"`
	JailProblem string `json:"jailProblem,omitempty"`
	// Landlock is what each row becomes under the landlock backend
	// (nil where it cannot run); LandlockRefused says why a run of
	// this hook under it would be refused.
	Landlock        *jail.LandlockPlan `json:"landlock,omitempty"`
	LandlockRefused string             `json:"landlockRefused,omitempty"`
}

// PlanHook lays out the jail plan of a hook without running it. Path
// inputs are planned when their values are given (k=v, as for a run).
// The run dir row stands for the runs dir: each run gets its own under it.
func (e *Engine) PlanHook(module, hook string, raw map[string]string) (*HookPlan, error) {
	mod, err := e.Module(module)
	if err != nil {
		return nil, err
	}
	if mod.Manifest == nil {
		return nil, fmt.Errorf("module %s cannot run: %s", module, mod.Problem)
	}
	h, ok := mod.Manifest.Hooks[hook]
	if !ok {
		return nil, fmt.Errorf("module %s has no hook %q (it has: %s)", module, hook, namesOrNone(slices.Sorted(maps.Keys(mod.Manifest.Hooks))))
	}
	inputs := map[string]any{}
	if len(raw) > 0 {
		if inputs, err = hooks.ParseInputs(h.Inputs, raw); err != nil {
			return nil, err
		}
		if err := e.checkPathInputs(module, h, inputs); err != nil {
			return nil, err
		}
	}
	runs := filepath.Join(e.DataDir(), "runs")
	if err := os.MkdirAll(runs, 0o700); err != nil {
		return nil, err
	}
	network := h.Network && e.networkGranted(module)
	helper := e.jailHelper()
	plan, err := jail.BuildPlan(jail.PlanInput{ModuleDir: mod.Manifest.Dir, RunDir: runs, Warden: helper.Path, WardenReason: helper.Reason(), Inputs: pathInputs(h, inputs), Network: network, Preview: true})
	hp := &HookPlan{Module: module, Hook: hook, Network: network, Plan: plan, NetworkMode: "none", Limits: h.Effective(e.ceiling())}
	if err := e.LimitsReady(); err != nil {
		hp.LimitsOff = err.Error()
	}
	switch {
	case network:
		hp.NetworkMode = "host"
	case h.Egress:
		hp.NetworkMode, hp.Destinations = "egress", h.Destinations
		if p, _, err := e.Policy("module:" + module); err == nil {
			hp.PolicyNetwork, hp.PolicyAll = p.NetworkAllow, p.Network
		}
	}
	var jerr error
	if hp.Jail, jerr = e.JailBackend(""); jerr != nil {
		hp.JailProblem = jerr.Error()
	}
	if abi := e.jails.LandlockABI(); jail.LandlockWhyNot(abi) == "" && plan != nil {
		run := filepath.Join(runs, "RUN")
		ll := jail.NewLandlock() // who the hook would run as
		lp, lerr := jail.LandlockFor(plan, jail.LandlockInput{ABI: abi, RunDir: run, TmpDir: filepath.Join(run, "tmp"), Network: network, Egress: h.Egress, UID: ll.UID, RootWhy: ll.RootWhy, Keeps: ll.Keeps, Hidden: hiddenFromHooks(e.DataDir())})
		if lerr != nil {
			hp.LandlockRefused = lerr.Error()
		}
		hp.Landlock = lp
	}
	var me *jail.MissingError
	if errors.As(err, &me) {
		hp.Problem = me.Error()
	} else if err != nil {
		return nil, err
	}
	return hp, nil
}
