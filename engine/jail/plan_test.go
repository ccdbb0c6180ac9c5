package jail

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// planInput is a plan input whose every required source exists.
func planInput(t *testing.T) PlanInput {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	run := t.TempDir()
	// The broker's socket (a plain file does for the plan).
	if err := os.WriteFile(filepath.Join(run, SocketName), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return PlanInput{ModuleDir: t.TempDir(), RunDir: run, Warden: exe}
}

func rowByTarget(rows []Row, target string) (Row, bool) {
	for _, r := range rows {
		if r.Target == target {
			return r, true
		}
	}
	return Row{}, false
}

func TestBuildPlanLayout(t *testing.T) {
	in := planInput(t)
	plan, err := BuildPlan(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []Row{
		{Source: "/usr", Target: "/usr", Mode: ModeRO, Absence: Required},
		{Source: in.ModuleDir, Target: ModuleTarget, Mode: ModeRO, Absence: Required},
		{Source: in.Warden, Target: WardenTarget, Mode: ModeRO, Absence: Required},
		{Source: "tmpfs", Target: RunTarget, Mode: ModeTmpfs, Absence: Required},
		{Source: filepath.Join(in.RunDir, SocketName), Target: SocketTarget, Mode: ModeRW, Absence: Required},
		{Source: "tmpfs", Target: "/tmp", Mode: ModeTmpfs, Absence: Required},
	} {
		got, ok := rowByTarget(plan.Rows, want.Target)
		if !ok {
			t.Errorf("no row for %s in %v", want.Target, plan.Targets())
			continue
		}
		if got.Source != want.Source || got.Mode != want.Mode || got.Absence != want.Absence || got.Reason == "" {
			t.Errorf("row %s = %+v, want %+v with a reason", want.Target, got, want)
		}
	}
	for _, r := range plan.Rows {
		// /etc is never bound whole, nor is anything of the host's that
		// the plan does not name: no home, no /var, no /root.
		if r.Target == "/etc" || r.Target == "/" || strings.HasPrefix(r.Target, "/var") || strings.HasPrefix(r.Target, "/root") || strings.HasPrefix(r.Target, "/home") {
			t.Errorf("the plan binds %s (%s)", r.Target, r.Reason)
		}
		if r.Source != "tmpfs" && r.Symlink == "" && r.Mode == ModeRW && r.Target != SocketTarget {
			t.Errorf("%s is bound read-write", r.Target)
		}
	}
	// Without network, no DNS.
	for _, p := range []string{"/etc/resolv.conf", "/etc/hosts"} {
		if _, ok := rowByTarget(append(plan.Rows, plan.Missing...), p); ok {
			t.Errorf("%s is in the plan of a hook without network", p)
		}
	}
	// Merged-/usr hosts: /bin is a symlink row, not a bind of the host's.
	if target, err := os.Readlink("/bin"); err == nil {
		if r, ok := rowByTarget(plan.Rows, "/bin"); !ok || r.Symlink != target {
			t.Errorf("/bin row %+v, want a symlink to %s", r, target)
		}
	}
}

func TestBuildPlanNetworkAddsDNS(t *testing.T) {
	in := planInput(t)
	in.Network = true
	plan, err := BuildPlan(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/etc/resolv.conf", "/etc/hosts"} {
		r, ok := rowByTarget(append(plan.Rows, plan.Missing...), p)
		if !ok || r.Mode != ModeRO || r.Absence != Conditional {
			t.Errorf("%s with network: row %+v (present %v), want read-only and conditional", p, r, ok)
		}
	}
}

// A required source that is missing fails the plan, naming each such path
// and its reason; the plan still says what it holds and lacks.
func TestBuildPlanMissingRequired(t *testing.T) {
	in := planInput(t)
	in.RunDir = filepath.Join(t.TempDir(), "runs", "gone")
	in.Warden = filepath.Join(t.TempDir(), "no-warden")
	plan, err := BuildPlan(in)
	var me *MissingError
	if !errors.As(err, &me) {
		t.Fatalf("BuildPlan = %v, want a *MissingError", err)
	}
	msg := err.Error()
	sock := filepath.Join(in.RunDir, SocketName)
	for _, want := range []string{sock + " (the broker socket)", in.Warden + " (the warden helper"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not contain %q", msg, want)
		}
	}
	if len(me.Rows) != 2 {
		t.Errorf("MissingError rows %+v, want the run dir and the warden binary", me.Rows)
	}
	if plan == nil {
		t.Fatal("no plan with the error")
	}
	for _, p := range []string{sock, in.Warden} {
		if slices.ContainsFunc(plan.Rows, func(r Row) bool { return r.Source == p }) {
			t.Errorf("missing %s is still among the rows to mount", p)
		}
		if !slices.ContainsFunc(plan.Missing, func(r Row) bool { return r.Source == p && r.Absence == Required }) {
			t.Errorf("missing %s is not listed as a missing required row", p)
		}
	}
}

// Declared-only, runtime and conditional rows whose sources are missing
// are dropped from the mounts and listed, without failing the plan.
func TestBuildPlanDropsAbsentOptionalRows(t *testing.T) {
	in := planInput(t)
	present := t.TempDir()
	gone := filepath.Join(t.TempDir(), "gone")
	in.Inputs = []PathInput{{Name: "src", Path: present}, {Name: "out", Path: gone, RW: true}}
	plan, err := BuildPlan(in)
	if err != nil {
		t.Fatalf("a missing declared path input failed the plan: %v", err)
	}
	if r, ok := rowByTarget(plan.Rows, present); !ok || r.Mode != ModeRO || r.Absence != DeclaredOnly || !strings.Contains(r.Reason, "src") {
		t.Errorf("present input row %+v (present %v)", r, ok)
	}
	if _, ok := rowByTarget(plan.Rows, gone); ok {
		t.Errorf("missing input %s is among the mounts", gone)
	}
	r, ok := rowByTarget(plan.Missing, gone)
	if !ok || r.Absence != DeclaredOnly || r.Mode != ModeRW || !strings.Contains(r.Reason, "out") {
		t.Errorf("missing input row %+v (listed %v), want declared-only, rw, naming input out", r, ok)
	}
	for _, m := range plan.Missing {
		if m.Absence == Required {
			t.Errorf("required row %+v is missing on a host that has it all", m)
		}
		if _, err := os.Lstat(m.Source); err == nil {
			t.Errorf("row %s is listed missing but exists", m.Source)
		}
	}
	// An rw input is bound read-write.
	rw := t.TempDir()
	in.Inputs = []PathInput{{Name: "out", Path: rw, RW: true}}
	if plan, err = BuildPlan(in); err != nil {
		t.Fatal(err)
	}
	if r, ok := rowByTarget(plan.Rows, rw); !ok || r.Mode != ModeRW {
		t.Errorf("path:rw input row %+v", r)
	}
}

// A preview (warden hook plan) lists the socket row before any run has
// made the socket; a real run's plan needs it.
func TestBuildPlanPreviewSocket(t *testing.T) {
	in := planInput(t)
	in.RunDir = t.TempDir() // no socket
	if _, err := BuildPlan(in); err == nil {
		t.Fatal("a run's plan without its broker socket was accepted")
	}
	in.Preview = true
	plan, err := BuildPlan(in)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := rowByTarget(plan.Rows, SocketTarget); !ok || r.Source != filepath.Join(in.RunDir, SocketName) {
		t.Errorf("preview socket row %+v", r)
	}
}
