package jail

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// helperTree is a private dir with a warden binary in bin/ (the file's
// contents do not matter to admission).
func helperTree(t *testing.T) (warden string) {
	t.Helper()
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "bin")
	os.Mkdir(bin, 0o755)
	warden = filepath.Join(bin, "warden")
	if err := os.WriteFile(warden, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return warden
}

func TestFindHelperBesideWarden(t *testing.T) {
	warden := helperTree(t)
	if h := FindHelper(warden); h.Small || h.Path != warden || !strings.Contains(h.Why, "no warden-hook beside it") {
		t.Fatalf("without warden-hook: %+v, want the full binary", h)
	}
	small := filepath.Join(filepath.Dir(warden), "warden-hook")
	os.WriteFile(small, []byte("#!/bin/sh\n"), 0o755)
	h := FindHelper(warden)
	if !h.Small || h.Path != small {
		t.Fatalf("with warden-hook beside warden: %+v", h)
	}
	if !strings.Contains(h.Reason(), "warden-hook") {
		t.Errorf("reason %q", h.Reason())
	}
}

func TestFindHelperLibexecFallback(t *testing.T) {
	warden := helperTree(t)
	libexec := filepath.Join(filepath.Dir(filepath.Dir(warden)), "libexec", "warden")
	os.MkdirAll(libexec, 0o755)
	small := filepath.Join(libexec, "warden-hook")
	os.WriteFile(small, []byte("#!/bin/sh\n"), 0o755)
	if h := FindHelper(warden); !h.Small || h.Path != small {
		t.Fatalf("libexec: %+v", h)
	}
	// A libexec dir others may write is no place for it.
	os.Chmod(libexec, 0o777)
	if h := FindHelper(warden); h.Small || !strings.Contains(h.Why, "group- or world-writable") {
		t.Fatalf("writable libexec: %+v, want refused", h)
	}
}

func TestFindHelperRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		make       func(path string)
	}{
		{"group-writable", "group- or world-writable", func(p string) { os.WriteFile(p, []byte("x"), 0o775); os.Chmod(p, 0o775) }},
		{"not executable", "not executable", func(p string) { os.WriteFile(p, []byte("x"), 0o644) }},
		{"symlink", "is a symlink", func(p string) { os.Symlink("/bin/true", p) }},
		{"directory", "not a regular file", func(p string) { os.Mkdir(p, 0o755) }},
		{"someone else's", "owned by uid 4242", func(p string) {
			os.WriteFile(p, []byte("x"), 0o755)
			if os.Chown(p, 4242, 4242) != nil {
				t.Skip("chown needs root")
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			warden := helperTree(t)
			tc.make(filepath.Join(filepath.Dir(warden), "warden-hook"))
			h := FindHelper(warden)
			if h.Small || h.Path != warden || !h.Refused || !strings.Contains(h.Why, "refused: ") || !strings.Contains(h.Why, tc.want) {
				t.Fatalf("%+v, want the full binary and %q", h, tc.want)
			}
			if !strings.Contains(h.Reason(), "the full warden binary") {
				t.Errorf("reason %q", h.Reason())
			}
		})
	}
}
