package jail

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestChooseBackend: the backend picked from what the host offers, with
// the probe's result injected. auto falls back to landlock only where
// bwrap cannot run; bwrap never falls back and says why and what to do.
func TestChooseBackend(t *testing.T) {
	refused := BwrapState{Userns: &UsernsRefused{Cause: "user.max_user_namespaces", Problem: "user.max_user_namespaces is 0", Fix: "sysctl -w user.max_user_namespaces=15000"}}
	absent := BwrapState{Admission: &AdmissionError{Path: "/usr/bin/bwrap", Absent: true, Problem: "not found", Fix: "apt-get install bubblewrap"}}
	for _, c := range []struct {
		mode string
		bw   BwrapState
		abi  int
		want string
		errs []string
	}{
		{"auto", BwrapState{}, 7, BackendBwrap, nil},
		{"", BwrapState{}, 0, BackendBwrap, nil},
		{"auto", refused, 7, BackendLandlock, nil},
		{"auto", absent, 4, BackendLandlock, nil},
		{"auto", refused, 0, "", []string{"no jail backend", "max_user_namespaces", "no Landlock"}},
		{"auto", refused, 2, "", []string{"ABI 2", "truncate"}},
		{"bwrap", BwrapState{}, 7, BackendBwrap, nil},
		{"bwrap", refused, 7, "", []string{"refused rather than run in a weaker jail", "sysctl -w user.max_user_namespaces=15000", "jail: auto", "--jail=landlock"}},
		{"bwrap", absent, 7, "", []string{"apt-get install bubblewrap"}},
		{"landlock", BwrapState{}, 7, BackendLandlock, nil},
		{"landlock", BwrapState{}, 1, "", []string{"landlock was asked for", "ABI 1"}},
		{"nsjail", BwrapState{}, 7, "", []string{"unknown jail mode"}},
	} {
		got, err := Choose(c.mode, c.bw, c.abi)
		if got != c.want {
			t.Errorf("Choose(%q, %+v, %d) = %q, %v; want %q", c.mode, c.bw, c.abi, got, err, c.want)
		}
		if (err != nil) != (c.errs != nil) {
			t.Errorf("Choose(%q, abi %d): err %v", c.mode, c.abi, err)
			continue
		}
		for _, w := range c.errs {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Choose(%q, abi %d): %q does not say %q", c.mode, c.abi, err, w)
			}
		}
	}
}

func landlockInput(t *testing.T) (PlanInput, LandlockInput) {
	t.Helper()
	base := t.TempDir()
	mod, data, home := filepath.Join(base, "mod"), filepath.Join(base, "data"), filepath.Join(base, "home")
	run := filepath.Join(data, "runs", "r1")
	for _, d := range []string{mod, filepath.Join(run, "tmp"), home} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return PlanInput{ModuleDir: mod, RunDir: run, Warden: "/proc/self/exe", Preview: true},
		LandlockInput{ABI: 7, RunDir: run, TmpDir: filepath.Join(run, "tmp"), Hidden: []string{data, home}}
}

// TestLandlockForClasses: each class of the plan becomes the rule the
// contract says, and the printer's rows say what each became.
func TestLandlockForClasses(t *testing.T) {
	pin, in := landlockInput(t)
	plan, err := BuildPlan(pin)
	if err != nil {
		t.Fatal(err)
	}
	lp, err := LandlockFor(plan, in)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"/usr": "ro+exec", pin.ModuleDir: "ro+exec", in.RunDir: "rw", in.TmpDir: "rw", "/proc": "ro", "/dev/null": "dev"}
	got := map[string]string{}
	for _, r := range lp.Rules {
		got[r.Path] = r.Access
		if within(r.Path, filepath.Dir(in.RunDir)) && r.Path != in.RunDir && r.Path != in.TmpDir {
			t.Errorf("a rule reaches another run's dir: %+v", r)
		}
	}
	for p, a := range want {
		if got[p] != a {
			t.Errorf("rule for %s: %q, want %q (rules %v)", p, got[p], a, got)
		}
	}
	if !lp.DenyTCP || !lp.Scoped {
		t.Errorf("ABI 7, network false: DenyTCP %v Scoped %v, want both", lp.DenyTCP, lp.Scoped)
	}
	rows := map[string]string{}
	for _, r := range lp.Rows {
		rows[r.Target] = r.Became
	}
	if !strings.Contains(rows["/proc"], "HOST") || !strings.Contains(rows[RunTarget], in.RunDir) || !strings.Contains(rows["network"], "seccomp denies inet") {
		t.Errorf("rows do not say what each class became: %v", rows)
	}
	// ABI 5: no scoping, said so, not silently (an ordinary user's: as
	// root it is refused, TestLandlockForRefuses).
	in.ABI, in.UID = 5, 1000
	lp, err = LandlockFor(plan, in)
	if err != nil || lp.Scoped || !strings.Contains(strings.Join(lp.NotHidden, ";"), "signals") {
		t.Errorf("ABI 5: %v %+v", err, lp)
	}
}

// TestLandlockForRefuses: what Landlock cannot express is refused with
// the reason, never widened.
func TestLandlockForRefuses(t *testing.T) {
	pin, in := landlockInput(t)
	base := filepath.Dir(pin.ModuleDir)
	for _, c := range []struct {
		name   string
		inputs []PathInput
		edit   func(*LandlockInput)
		want   []string
	}{
		{"destination list", nil, func(in *LandlockInput) { in.Egress = true }, []string{"destination list", "Landlock filters TCP ports, not addresses"}},
		{"input holding the data dir", []PathInput{{Name: "src", Path: base}}, nil, []string{base, "holds", "cannot hide a path beneath it"}},
		{"input holding home", []PathInput{{Name: "src", Path: filepath.Join(base, "home")}}, nil, []string{"home", "must not reach"}},
		{"rw input holding the module", []PathInput{{Name: "out", Path: pin.ModuleDir, RW: true}}, nil, []string{"writable and holds the module dir"}},
		{"old ABI", nil, func(in *LandlockInput) { in.ABI = 2 }, []string{"ABI 2", "truncate"}},
		{"root below ABI 6", nil, func(in *LandlockInput) { in.ABI, in.UID = 5, 0 }, []string{"as root", "ABI 5", "signal every root process"}},
	} {
		p, l := pin, in
		p.Inputs = c.inputs
		if c.edit != nil {
			c.edit(&l)
		}
		plan, err := BuildPlan(p)
		if err != nil {
			t.Fatal(err)
		}
		_, err = LandlockFor(plan, l)
		var re *RefusedError
		if !errors.As(err, &re) {
			t.Errorf("%s: err %v, want a refusal", c.name, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", c.name, err, w)
			}
		}
	}
}

// TestMayFallBack: auto leaves only a bwrap that is not installed at the
// default path; one that is there and refused, or a configured path that
// is wrong, stops the run instead of a quiet downgrade.
func TestMayFallBack(t *testing.T) {
	absent := &AdmissionError{Path: DefaultBwrap, Absent: true, Problem: "not found"}
	writable := &AdmissionError{Path: DefaultBwrap, Problem: "group- or world-writable"}
	for _, c := range []struct {
		err        error
		configured string
		want       bool
	}{
		{nil, "", true},
		{absent, "", true},
		{absent, DefaultBwrap, true},
		{fmt.Errorf("%w\n(or run the hook unjailed)", absent), "", true},
		{absent, "/opt/bwrap", false},
		{writable, "", false},
		{errors.New("something else"), "", false},
	} {
		if got := MayFallBack(c.err, c.configured); got != c.want {
			t.Errorf("MayFallBack(%v, %q) = %v, want %v", c.err, c.configured, got, c.want)
		}
	}
}
