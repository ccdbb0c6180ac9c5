package jail

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// backendInput is one run's SpecInput over planInput's dirs, with a
// dialer that hands out a pipe end.
func backendInput(t *testing.T) SpecInput {
	t.Helper()
	p := planInput(t)
	os.Chmod(p.ModuleDir, 0o755)
	return SpecInput{ModuleDir: p.ModuleDir, Run: []string{"hook.sh", "--flag"}, RunDir: p.RunDir,
		Socket: filepath.Join(p.RunDir, SocketName), Helper: Helper{Path: p.Warden, Why: "the test binary"},
		Dialer: func() (*os.File, error) {
			r, w, err := os.Pipe()
			if err == nil {
				t.Cleanup(func() { r.Close() })
			}
			return w, err
		}}
}

// Each backend lays a run out in its own terms, and the engine gets it
// all from the spec: where the hook starts, how it reaches its broker,
// what its HOME is, what the run dir holds before the run.
func TestBackendsLayOutARun(t *testing.T) {
	for _, tc := range []struct {
		b          Backend
		argv0, dir func(SpecInput) string
		socket     string
		dialerFd   int
		home       func(SpecInput) string
		prepared   []string // what Prepare leaves in the run dir
		stamped    bool
	}{
		{b: &bwrapBackend{j: testJail()},
			argv0: func(SpecInput) string { return ModuleTarget + "/hook.sh" }, dir: func(SpecInput) string { return ModuleTarget },
			socket: SocketTarget, home: func(SpecInput) string { return "/tmp" }},
		{b: &landlockBackend{j: NewLandlock(), abi: 7},
			argv0: func(in SpecInput) string { return filepath.Join(in.ModuleDir, "hook.sh") }, dir: func(in SpecInput) string { return in.ModuleDir },
			dialerFd: FdDialer, home: func(in SpecInput) string { return filepath.Join(in.RunDir, "tmp") },
			prepared: []string{"bin", "tmp"}, stamped: true},
	} {
		t.Run(tc.b.Name(), func(t *testing.T) {
			in := backendInput(t)
			if err := tc.b.Prepare(in.RunDir, in.Helper); err != nil {
				t.Fatal(err)
			}
			var made []string
			ents, _ := os.ReadDir(in.RunDir)
			for _, e := range ents {
				if e.Name() != SocketName {
					made = append(made, e.Name())
				}
			}
			if !slices.Equal(made, tc.prepared) {
				t.Errorf("Prepare left %q in the run dir, want %q", made, tc.prepared)
			}
			if slices.Contains(made, "bin") {
				if got, _ := os.Readlink(filepath.Join(in.RunDir, "bin", "warden")); got != in.Helper.Path {
					t.Errorf("bin/warden -> %q, want the helper %q", got, in.Helper.Path)
				}
				if fi, _ := os.Stat(filepath.Join(in.RunDir, "tmp")); fi == nil || fi.Mode().Perm() != 0o700 {
					t.Errorf("the hook's tmp is not a private dir: %v", fi)
				}
			}
			spec, err := tc.b.Spec(in)
			if err != nil {
				t.Fatal(err)
			}
			defer spec.Spawner.Release()
			if want := []string{tc.argv0(in), "--flag"}; !slices.Equal(spec.Argv, want) || spec.Dir != tc.dir(in) {
				t.Errorf("argv %q in %s, want %q in %s", spec.Argv, spec.Dir, want, tc.dir(in))
			}
			if spec.Socket != tc.socket || spec.DialerFd != tc.dialerFd {
				t.Errorf("broker by socket %q / fd %d, want %q / %d", spec.Socket, spec.DialerFd, tc.socket, tc.dialerFd)
			}
			env := spec.ApplyEnv([]string{"HOME=/root", "LANG=C.UTF-8"})
			if !slices.Contains(env, "HOME="+tc.home(in)) || slices.Contains(env, "HOME=/root") || !slices.Contains(env, "LANG=C.UTF-8") {
				t.Errorf("env %q: want HOME=%s in place of the operator's, the rest kept", env, tc.home(in))
			}
			if spec.StampStage != tc.stamped {
				t.Errorf("StampStage %v, want %v", spec.StampStage, tc.stamped)
			}
			if _, ok := spec.Details["landlock"]; ok != (tc.b.Name() == BackendLandlock) {
				t.Errorf("start receipt details %v", spec.Details)
			}
		})
	}
}

// Landlock cannot hide a path beneath a grant: a run whose module dir
// holds a hidden path is refused, and the spec still carries what the
// start receipt records. bwrap hides it with a mount, and lays it out.
func TestBackendsAndHiddenPaths(t *testing.T) {
	for _, b := range []Backend{&bwrapBackend{j: testJail()}, &landlockBackend{j: NewLandlock(), abi: 7}} {
		in := backendInput(t)
		in.Hidden = []string{filepath.Join(in.ModuleDir, "secret")}
		spec, err := b.Spec(in)
		if spec == nil || spec.Details == nil {
			t.Fatalf("%s: Spec gave no spec (err %v)", b.Name(), err)
		}
		if spec.Spawner != nil {
			spec.Spawner.Release()
		}
		var re *RefusedError
		if refused := errors.As(err, &re); refused != (b.Name() == BackendLandlock) {
			t.Errorf("%s: err %v", b.Name(), err)
		}
	}
}

// bwrap's one line of a refused user namespace becomes why and the fix;
// a hook that failed on its own is left to say so itself.
func TestBwrapExplainsARefusedNamespace(t *testing.T) {
	b := &bwrapBackend{j: testJail()}
	line := "bwrap: setting up uid map: Permission denied"
	if got := b.ExplainExit(ExitOutput{Code: 1, Lines: 1, FirstStderr: line}); !strings.Contains(got, "user namespaces") && !strings.Contains(got, "AppArmor") {
		t.Errorf("explanation %q", got)
	}
	for _, out := range []ExitOutput{{Code: 1, Lines: 2, FirstStderr: line}, {Code: 0, Lines: 1, FirstStderr: line}, {Code: 1, Lines: 1, FirstStderr: "hook.sh: no such file"}} {
		if got := b.ExplainExit(out); got != "" {
			t.Errorf("%+v explained as %q", out, got)
		}
	}
	if got := (&landlockBackend{}).ExplainExit(ExitOutput{Code: 1, Lines: 1, FirstStderr: line}); got != "" {
		t.Errorf("landlock explained %q", got)
	}
}
