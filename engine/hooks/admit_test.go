package hooks

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// safeBase makes a fresh directory whose ancestors are all root- or
// user-owned and not group/world-writable (t.TempDir is under /tmp, which
// is world-writable, so it cannot be used for a module that should pass).
func admitSafeBase(t *testing.T) string {
	t.Helper()
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Skip("no user cache dir:", err)
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		t.Skip("cannot create user cache dir:", err)
	}
	if real, err := filepath.EvalSymlinks(cache); err == nil {
		cache = real
	}
	base, err := os.MkdirTemp(cache, "warden-test-")
	if err != nil {
		t.Skip("cannot create test dir:", err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := AdmitModulePath(base); err != nil {
		t.Skipf("the user cache dir is not itself admissible here, cannot test: %v", err)
	}
	return base
}

func admitMkdir(t *testing.T, path string, mode os.FileMode) string {
	t.Helper()
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // not subject to umask
		t.Fatal(err)
	}
	return path
}

func TestAdmitModulePathOK(t *testing.T) {
	base := admitSafeBase(t)
	mod := admitMkdir(t, filepath.Join(base, "hello"), 0o755)
	if err := AdmitModulePath(mod); err != nil {
		t.Fatal(err)
	}
	ro := admitMkdir(t, filepath.Join(base, "ro"), 0o500)
	if err := AdmitModulePath(ro); err != nil {
		t.Fatal(err)
	}
	if err := AdmitModulePath("/"); err != nil {
		t.Errorf("/: %v", err)
	}
}

func TestAdmitModulePathRefusals(t *testing.T) {
	base := admitSafeBase(t)
	mod := admitMkdir(t, filepath.Join(base, "mod"), 0o755)
	link := filepath.Join(base, "link")
	if err := os.Symlink(mod, link); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	ww := admitMkdir(t, filepath.Join(base, "ww"), 0o777)
	wwMod := admitMkdir(t, filepath.Join(ww, "mod"), 0o755)
	sticky := admitMkdir(t, filepath.Join(base, "sticky"), 0o777|os.ModeSticky)
	stickyMod := admitMkdir(t, filepath.Join(sticky, "mod"), 0o755)
	gw := admitMkdir(t, filepath.Join(base, "gw"), 0o775)
	gwAnc := admitMkdir(t, filepath.Join(base, "gwanc"), 0o770)
	gwAncMod := admitMkdir(t, filepath.Join(gwAnc, "mod"), 0o755)

	tests := []struct {
		name     string
		path     string
		ancestor string
		problem  string
		fix      string
	}{
		{"relative", "mod", "", "is relative", "pass the absolute path"},
		{"relative dot", "./" + filepath.Base(mod), "", "is relative", "absolute path"},
		{"empty", "", "", "empty", "absolute path"},
		{"trailing slash", mod + "/", "", "not canonical", "pass " + mod},
		{"dot component", base + "/./mod", "", "not canonical", "pass " + mod},
		{"dotdot component", base + "/ww/../mod", "", "not canonical", "pass " + mod},
		{"symlink", link, "", "is a symlink", "pass the real path " + mod},
		{"symlink ancestor", link + "/sub", link, "is a symlink", "real path"},
		{"file", file, "", "is not a directory", "module folder"},
		{"under a file", file + "/sub", file, "is not a directory", "correct the path"},
		{"missing", base + "/nope", "", "does not exist", "create"},
		{"world-writable ancestor", wwMod, ww, "world-writable (mode 0777)", "chmod go-w " + ww},
		{"world-writable itself", ww, "", "world-writable", "chmod go-w " + ww},
		{"sticky world-writable ancestor", stickyMod, sticky, "world-writable (mode 1777, sticky bit or not", "copy the module to a private directory"},
		{"group-writable itself", gw, "", "is group-writable (mode 0775)", "chmod go-w " + gw},
		{"group-writable ancestor", gwAncMod, gwAnc, "group-writable", "chmod go-w " + gwAnc},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := AdmitModulePath(tc.path)
			var ae *AdmissionError
			if !errors.As(err, &ae) {
				t.Fatalf("err = %v, want *AdmissionError", err)
			}
			if ae.Path != tc.path || ae.Ancestor != tc.ancestor {
				t.Errorf("Path=%q Ancestor=%q, want %q %q (%v)", ae.Path, ae.Ancestor, tc.path, tc.ancestor, err)
			}
			if !strings.Contains(ae.Problem, tc.problem) || !strings.Contains(ae.Fix, tc.fix) {
				t.Errorf("err = %v\nwant problem ~ %q, fix ~ %q", err, tc.problem, tc.fix)
			}
			msg := err.Error()
			if !strings.Contains(msg, ae.Problem) || !strings.Contains(msg, ae.Fix) || !strings.Contains(msg, "(check: ") {
				t.Errorf("message %q lacks problem, check or fix", msg)
			}
			if tc.ancestor != "" && tc.ancestor != tc.path && !strings.Contains(msg, "ancestor "+tc.ancestor+" ") {
				t.Errorf("message %q does not name the ancestor", msg)
			}
		})
	}
}

func TestAdmitModulePathUnderTmp(t *testing.T) {
	fi, err := os.Stat(os.TempDir())
	if err != nil || fi.Mode().Perm()&0o002 == 0 {
		t.Skip("temp dir is not world-writable here")
	}
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	err = AdmitModulePath(dir)
	var ae *AdmissionError
	// /tmp is shared: the fix moves the module, it never loosens /tmp.
	if !errors.As(err, &ae) || ae.Ancestor == "" || !strings.Contains(ae.Problem, "world-writable") ||
		strings.Contains(ae.Fix, "chmod") || !strings.Contains(ae.Fix, "private directory") {
		t.Fatalf("err = %v, want a world-writable ancestor refusal that says to move the module", err)
	}
}

func TestAdmitModulePathOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown")
	}
	base := admitSafeBase(t)
	other := admitMkdir(t, filepath.Join(base, "other"), 0o755)
	if err := os.Chown(other, 12345, 12345); err != nil {
		t.Skip("chown:", err)
	}
	err := AdmitModulePath(other)
	var ae *AdmissionError
	if !errors.As(err, &ae) || ae.Ancestor != "" || !strings.Contains(ae.Problem, "owned by uid 12345") ||
		!strings.Contains(ae.Problem, "(check: owner)") || !strings.Contains(ae.Fix, "copy the module") || strings.Contains(ae.Fix, "chown") {
		t.Errorf("dir owner: err = %v", err)
	}

	anc := admitMkdir(t, filepath.Join(base, "anc"), 0o755)
	mod := admitMkdir(t, filepath.Join(anc, "mod"), 0o755)
	if err := os.Chown(anc, 12345, 12345); err != nil {
		t.Fatal(err)
	}
	err = AdmitModulePath(mod)
	if !errors.As(err, &ae) || ae.Ancestor != anc || !strings.Contains(ae.Problem, "owned by uid 12345") {
		t.Errorf("ancestor owner: err = %v", err)
	}
	if !strings.Contains(err.Error(), "ancestor "+anc+" is owned by uid 12345") {
		t.Errorf("message %q", err)
	}
}

func TestAdmissionErrorFormat(t *testing.T) {
	e := &AdmissionError{Path: "/srv/m", Ancestor: "/srv", Problem: "is world-writable", Fix: "chmod go-w /srv"}
	want := `module path "/srv/m" refused: ancestor /srv is world-writable; fix: chmod go-w /srv`
	if e.Error() != want {
		t.Errorf("got  %s\nwant %s", e.Error(), want)
	}
	e = &AdmissionError{Path: "m", Problem: "is relative", Fix: "pass /x/m"}
	if got := e.Error(); got != `module path "m" refused: is relative; fix: pass /x/m` {
		t.Errorf("got %s", got)
	}
}
