package jail

import (
	"maps"
	"os"
	"slices"
	"strings"
)

// Backend names, as config.yaml's `jail:`, --jail and every receipt
// spell them (docs/jail.md).
const (
	// BackendBwrap: bubblewrap's namespaces, mounts and seccomp
	// (bwrap_backend.go).
	BackendBwrap = "bwrap"
	// BackendLandlock: no namespace at all. A re-exec of this binary
	// restricts itself with a Landlock ruleset and the same seccomp
	// filter, then execs the hook. For hosts that refuse bwrap its user
	// namespace; weaker than bwrap, and said so wherever a run shows
	// (landlock_backend.go).
	BackendLandlock = "landlock"
	// BackendAuto is a mode, never a backend: bwrap where it can run,
	// else landlock (Chooser.Choose).
	BackendAuto = "auto"
)

// Backend is one way of jailing a hook run. The engine asks a Chooser for
// one, then calls Prepare before the run is recorded and Spec to lay the
// run out; it never asks which backend it holds. A new backend (a microVM,
// gVisor) is one file implementing Backend and one case in Chooser.Choose.
type Backend interface {
	// Name is the backend's name (BackendBwrap, BackendLandlock).
	Name() string
	// UID is the uid a run's process has on the host (a root warden's
	// run DefaultUID's, else warden's own).
	UID() int
	// Prepare lays out what the backend needs in the run's private dir
	// (made, empty, 0700) before anything of the run is recorded.
	Prepare(runDir string, helper Helper) error
	// Spec lays out one run: its plan, its spawner, and the process in
	// the backend's terms. The spec is never nil: its Details go into the
	// start receipt even when err says the run cannot be laid out here
	// (the run is then recorded, and fails saying why).
	Spec(in SpecInput) (*RunSpec, error)
	// ExplainExit is why a failed run failed, with the fix, when the
	// backend itself is the cause (bwrap refused a user namespace); ""
	// when the hook's own exit says it.
	ExplainExit(out ExitOutput) string
}

// SpecInput is what a backend lays a run out from.
type SpecInput struct {
	ModuleDir string
	// Run is the hook's argv; Run[0] is relative to ModuleDir (for a
	// Command, Run[0] is the program's name and Command.Exe its path).
	Run []string
	// Command, for a run of an operator's program (`warden run`): no
	// module; ModuleDir is "".
	Command *Command
	RunDir  string // the run's private dir on the host
	// Socket is the broker's socket in RunDir, at its host path.
	Socket  string
	Helper  Helper      // bound as `warden`
	Inputs  []PathInput // the hook's path inputs, checked (CheckInputs)
	Network bool        // the host's network is granted
	Egress  bool        // the hook's network is a destination list
	// Hidden are paths no rule may hold (the data dir, the operator's
	// home): a backend that cannot hide a path beneath a grant refuses.
	Hidden []string
	// Dialer makes the hook's end of the broker's dialer, for a backend
	// whose hook cannot be given the socket by path (broker.Dialer).
	Dialer func() (*os.File, error)
}

// RunSpec is one run laid out by a backend.
type RunSpec struct {
	Plan    *Plan
	Spawner *Spawner // nil when Spec failed before it could make one
	Argv    []string // the hook's argv, in the jail's terms
	Dir     string   // where it starts, in the jail's terms
	// Socket is WARDEN_SOCKET in the jail's terms; "" when the hook
	// reaches its broker only through the dialer at fd DialerFd.
	Socket   string
	DialerFd int
	// PathFirst is the dir put first on the hook's PATH: where `warden`
	// is found.
	PathFirst string
	// Env is set over the hook's built environment (HOME, TMPDIR, ...).
	Env map[string]string
	// Details are the backend's part of the start receipt.
	Details map[string]any
	// StampStage: the run's first process may outlive its engine (no
	// pid namespace holds it), so the engine stamps it (StageStamp) for
	// the next engine to end.
	StampStage bool
}

// ApplyEnv sets the spec's Env over env and returns it (SetEnv).
func (s *RunSpec) ApplyEnv(env []string) []string { return SetEnv(env, s.Env) }

// SetEnv sets vars over env (a variable already there is replaced in
// place, the others appended in name order) and returns it.
func SetEnv(env []string, vars map[string]string) []string {
	done := make(map[string]bool, len(vars))
	for i, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if v, ok := vars[k]; ok {
			env[i] = k + "=" + v
			done[k] = true
		}
	}
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		if !done[k] {
			env = append(env, k+"="+vars[k])
		}
	}
	return env
}

// commandSpec points spec at in's Command, if it has one: the program at
// its host path, started in the workspace, with the session's home.
func commandSpec(spec *RunSpec, in SpecInput) {
	if c := in.Command; c != nil {
		spec.Argv = append([]string{c.Exe}, in.Run[1:]...)
		spec.Dir = c.Workspace
		spec.Env["HOME"] = c.Home
	}
}

// commandHome is the home a command run's jail uid is handed (none for
// a hook).
func commandHome(in SpecInput) []string {
	if in.Command == nil {
		return nil
	}
	return []string{in.Command.Home}
}

// specPlanInput is the PlanInput of a run laid out from in.
func specPlanInput(in SpecInput) PlanInput {
	return PlanInput{ModuleDir: in.ModuleDir, RunDir: in.RunDir, Warden: in.Helper.Path, WardenReason: in.Helper.Reason(), Inputs: in.Inputs, Network: in.Network, Command: in.Command}
}

// ExitOutput is what ExplainExit knows of a failed run: its exit code,
// how many lines it wrote, and the first of them on stderr.
type ExitOutput struct {
	Code        int
	Lines       int
	FirstStderr string
}
