package jail

import (
	"os"
	"path"
)

// bwrapBackend jails a run in bubblewrap's namespaces: its own mount
// tree (the plan's rows at their jail paths), pid, ipc, uts and network
// namespaces, and the seccomp filter. The hook sees /module, /tmp and
// /run/warden, never a host path.
type bwrapBackend struct{ j *Jail }

func (b *bwrapBackend) Name() string { return BackendBwrap }

// UID: as root, the jail's processes are DefaultUID's on the host too
// (setpriv); else they are warden's uid, whatever the user namespace
// maps it to.
func (b *bwrapBackend) UID() int {
	if os.Geteuid() == 0 {
		return b.j.UID
	}
	return os.Geteuid()
}

// Prepare has nothing to lay out: the jail binds the helper at
// WardenTarget and gives the hook its own /tmp.
func (b *bwrapBackend) Prepare(runDir string, helper Helper) error { return nil }

func (b *bwrapBackend) Spec(in SpecInput) (*RunSpec, error) {
	spec := &RunSpec{
		Argv:      append([]string{path.Join(ModuleTarget, in.Run[0])}, in.Run[1:]...), // the module's hook
		Dir:       ModuleTarget,
		Socket:    SocketTarget,
		PathFirst: BinDir,
		// The operator's HOME does not exist in the jail; /tmp is the
		// hook's own (the synthesized passwd agrees).
		Env:     map[string]string{"HOME": "/tmp"},
		Details: map[string]any{},
	}
	commandSpec(spec, in)
	plan, err := BuildPlan(specPlanInput(in))
	spec.Plan = plan
	if plan != nil && len(plan.Missing) > 0 {
		spec.Details["absent"] = plan.Missing
	}
	spec.Spawner = b.j.Spawner(plan, in.Network)
	if err != nil {
		return spec, err
	}
	return spec, b.j.HandOver(append([]string{in.RunDir, in.Socket}, commandHome(in)...)...)
}

// ExplainExit explains a run that failed because bwrap could not create
// the jail's user namespace: its one line of output is bwrap saying so
// (it dies before the hook starts). The explanation names the cause and
// the fix (UsernsFailure), where bwrap's raw "setting up uid map:
// Permission denied" says neither.
func (b *bwrapBackend) ExplainExit(out ExitOutput) string {
	if out.Code == 0 || out.Lines != 1 || out.FirstStderr == "" {
		return ""
	}
	return UsernsFailure(out.FirstStderr, "/", b.j.Bwrap.Path)
}
