package jail

import (
	"fmt"
	"os"
	"path/filepath"
)

// landlockBackend jails a run with no namespace at all: the stage (a
// re-exec of this binary, landlock_stage.go) restricts itself with the
// plan's Landlock rules and the seccomp filter, then execs the hook. The
// hook runs at host paths, as warden's own uid.
type landlockBackend struct {
	j   *Jail
	abi int
}

func (b *landlockBackend) Name() string { return BackendLandlock }

func (b *landlockBackend) UID() int { return b.j.UID }

// Prepare gives the run dir what a mount would give a bwrap hook: a bin/
// with `warden` (the helper, at its host path) and a private tmp/.
func (b *landlockBackend) Prepare(runDir string, helper Helper) error {
	if err := LinkWarden(runDir, helper.Path); err != nil {
		return err
	}
	return os.Mkdir(filepath.Join(runDir, "tmp"), 0o700)
}

func (b *landlockBackend) Spec(in SpecInput) (*RunSpec, error) {
	tmp := filepath.Join(in.RunDir, "tmp")
	spec := &RunSpec{
		Argv:      append([]string{filepath.Join(in.ModuleDir, in.Run[0])}, in.Run[1:]...),
		Dir:       in.ModuleDir,
		DialerFd:  FdDialer,
		PathFirst: filepath.Join(in.RunDir, "bin"),
		Env:       map[string]string{"HOME": tmp, "TMPDIR": tmp, "TAR_OPTIONS": landlockTarOptions},
		Details:   map[string]any{},
		// No pid namespace: a stage that outlived its engine is found
		// again only by its stamp.
		StampStage: true,
	}
	commandSpec(spec, in)
	plan, err := BuildPlan(specPlanInput(in))
	spec.Plan = plan
	if plan != nil && len(plan.Missing) > 0 {
		spec.Details["absent"] = plan.Missing
	}
	if err != nil {
		return spec, err
	}
	if c := in.Command; c != nil {
		for _, b := range c.Binds {
			if b.Asked && within(realPath(b.Path), realPath(c.Workspace)) {
				return spec, &RefusedError{Reason: fmt.Sprintf("%s (%s) is inside the workspace %s, which is read-write: Landlock grants a whole tree and cannot hold a path read-only beneath it (bwrap mounts it read-only over the workspace). Run under bwrap, or name a path outside the workspace", b.Path, b.Reason, c.Workspace)}
			}
		}
	}
	lp, err := LandlockFor(plan, LandlockInput{ABI: b.abi, RunDir: in.RunDir, TmpDir: tmp, Network: in.Network, Egress: in.Egress, UID: b.j.UID, RootWhy: b.j.RootWhy, Keeps: b.j.Keeps, Hidden: in.Hidden})
	if err != nil {
		return spec, err
	}
	// A root warden's hook runs as DefaultUID: its dirs are handed to it.
	if err := b.j.HandOver(append([]string{in.RunDir, filepath.Join(in.RunDir, "bin"), tmp}, commandHome(in)...)...); err != nil {
		return spec, err
	}
	spec.Details["landlock"] = map[string]any{"uid": b.j.UID, "abi": lp.ABI, "scoped": lp.Scoped, "denyTCP": lp.DenyTCP, "notHidden": lp.NotHidden}
	// No socket(AF_UNIX) under landlock (connect by path would reach the
	// host's sockets): the hook dials its broker through this fd.
	if in.Dialer == nil {
		return spec, fmt.Errorf("jail: the landlock backend needs the broker's dialer")
	}
	dialer, err := in.Dialer()
	if err != nil {
		return spec, err
	}
	spec.Spawner = b.j.LandlockSpawner(plan, lp, dialer)
	return spec, nil
}

// ExplainExit has nothing to add: the stage says why it failed in the
// run's stream, in its own words.
func (b *landlockBackend) ExplainExit(ExitOutput) string { return "" }

// LinkWarden puts a `warden` link to exe in the run dir's bin/, which a
// hook with no mount namespace gets first on its PATH: shell hooks reach
// the engine's own helper whatever the binary is called (a test binary,
// a renamed build), never some other warden found on PATH.
func LinkWarden(runDir, exe string) error {
	bin := filepath.Join(runDir, "bin")
	if err := os.Mkdir(bin, 0o700); err != nil {
		return err
	}
	return os.Symlink(exe, filepath.Join(bin, "warden"))
}
