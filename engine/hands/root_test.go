package hands

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wardenhq/warden/engine/hands/handstest"
)

// Bad roots are refused before anything is touched: nothing is created,
// the runtime is never asked (the socket here does not even exist), and an
// existing dir keeps its content and mode.
func TestBadRootsTouchNothing(t *testing.T) {
	base := handstest.Base(t, "")
	mk := func(name string, mode os.FileMode) string {
		p := filepath.Join(base, name)
		if err := os.Mkdir(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	existing := mk("existing", 0o750)
	if err := os.WriteFile(filepath.Join(existing, "keep"), []byte("mine"), 0o640); err != nil {
		t.Fatal(err)
	}
	real := mk("real", 0o755)
	if err := os.Symlink(real, filepath.Join(base, "link")); err != nil {
		t.Fatal(err)
	}
	ww := mk("world", 0o777)
	gw := mk("group", 0o775)
	old := time.Now().Add(-time.Hour)
	os.Chtimes(existing, old, old)

	cases := map[string]string{
		"relative":          "hands/task1",
		"comma":             filepath.Join(base, "a,b"),
		"control character": filepath.Join(base, "a\tb"),
		"newline":           filepath.Join(base, "a\nb"),
		"DEL":               filepath.Join(base, "a\x7fb"),
		"existing dir":      existing,
		"existing file":     filepath.Join(existing, "keep"),
		"unclean":           base + "/real/../new",
		"symlinked parent":  filepath.Join(base, "link", "new"),
		"symlinked deeper":  filepath.Join(base, "link", "sub", "new"),
		"world-writable":    filepath.Join(ww, "new"),
		"group-writable":    filepath.Join(gw, "new"),
		"missing parent":    filepath.Join(base, "nope", "new"),
		"file system root":  "/",
	}
	for name, root := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Init(context.Background(), InitOptions{Root: root, EngineSocket: filepath.Join(base, "no.sock"), Image: handstest.Image, Access: AccessFiles, Owner: testOwner})
			var re *RootError
			if !errors.As(err, &re) {
				t.Fatalf("want *RootError, got %v", err)
			}
			if root != existing && root != filepath.Join(existing, "keep") && root != "/" {
				if _, err := os.Lstat(root); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("%s was created", root)
				}
			}
		})
	}
	// Nothing new anywhere under base, and the existing dir is untouched.
	entries, _ := os.ReadDir(existing)
	if len(entries) != 1 || entries[0].Name() != "keep" {
		t.Errorf("existing dir changed: %v", entries)
	}
	fi, _ := os.Stat(existing)
	if fi.Mode().Perm() != 0o750 || !fi.ModTime().Equal(old) {
		t.Errorf("existing dir mode %v mtime %v", fi.Mode(), fi.ModTime())
	}
	for _, d := range []string{real, ww, gw} {
		if entries, _ := os.ReadDir(d); len(entries) != 0 {
			t.Errorf("%s has %v", d, entries)
		}
	}
	top, _ := os.ReadDir(base)
	if len(top) != 5 {
		t.Errorf("base has %d entries, want 5", len(top))
	}
}

// A root-owned sticky dir (like /tmp) is a fine ancestor; the same dir
// without the sticky bit is not.
func TestRootUnderStickyDir(t *testing.T) {
	fi, err := os.Stat("/tmp")
	if err != nil || fi.Mode()&fs.ModeSticky == 0 || fi.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Skip("/tmp is not a root-owned sticky dir here")
	}
	dir, err := os.MkdirTemp("/tmp", "warden-sticky-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := ValidateRoot(filepath.Join(dir, "new")); err != nil {
		t.Fatalf("under /tmp: %v", err)
	}
}

// Bad options are refused before anything: no root appears.
func TestInitRefusesBadOptions(t *testing.T) {
	base := handstest.Base(t, "")
	root := filepath.Join(base, "root")
	good := InitOptions{Root: root, EngineSocket: "/nonexistent.sock", Image: handstest.Image, Access: AccessFiles, Owner: testOwner}
	for name, mut := range map[string]func(*InitOptions){
		"access":        func(o *InitOptions) { o.Access = "all" },
		"no image":      func(o *InitOptions) { o.Image = "" },
		"no owner":      func(o *InitOptions) { o.Owner = "" },
		"no socket":     func(o *InitOptions) { o.EngineSocket = "" },
		"relative sock": func(o *InitOptions) { o.EngineSocket = "docker.sock" },
		"no such sock":  func(o *InitOptions) {},
		"not a socket":  func(o *InitOptions) { o.EngineSocket = base },
	} {
		o := good
		mut(&o)
		if _, err := Init(context.Background(), o); err == nil {
			t.Errorf("%s: accepted", name)
		}
		if _, err := os.Lstat(root); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s: the root was created", name)
		}
	}
}

// privateBase is a new dir whose every ancestor only root or this user
// can write (the package's own folder, not /tmp): where MakeParent may
// create a missing parent.
func privateBase(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(wd, ".warden-parent-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Lstat(d)
		if err != nil || fi.Mode().Perm()&0o022 != 0 {
			t.Skipf("%s is group- or world-writable: no private dir to test in", d)
		}
		if d == "/" {
			return dir
		}
	}
}

// A root whose parent is only missing, under private dirs: the refusal
// offers the dirs to create, and MakeParent creates exactly those, 0700,
// not the root. Under a world-writable dir (/tmp) nothing is offered and
// nothing is created, sticky or not.
func TestMakeParent(t *testing.T) {
	base := privateBase(t)
	root := filepath.Join(base, "a", "b", "task1")
	var re *RootError
	if err := ValidateRoot(root); !errors.As(err, &re) || len(re.Create) != 2 || re.Create[0] != filepath.Join(base, "a") || re.Create[1] != filepath.Join(base, "a", "b") || re.UID != os.Geteuid() {
		t.Fatalf("missing parent: %#v", err)
	}
	old := syscall.Umask(0o277) // MakeParent's mode is not the umask's
	made, err := MakeParent(root)
	syscall.Umask(old)
	if err != nil || len(made) != 2 {
		t.Fatalf("MakeParent: %v %v", made, err)
	}
	for _, d := range made {
		if fi, err := os.Lstat(d); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v %v", d, fi.Mode(), err)
		}
	}
	if _, err := os.Lstat(root); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the root itself was created: %v", err)
	}
	if err := ValidateRoot(root); err != nil {
		t.Errorf("after MakeParent: %v", err)
	}

	fi, err := os.Stat("/tmp")
	if err != nil || fi.Mode().Perm()&0o002 == 0 {
		t.Skip("/tmp is not world-writable here")
	}
	priv, err := os.MkdirTemp("/tmp", "warden-parent-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(priv)
	for _, root := range []string{filepath.Join(priv, "missing", "task1"), "/tmp/warden-parent-never-made/task1"} {
		re = nil
		if err := ValidateRoot(root); !errors.As(err, &re) || len(re.Create) != 0 || !strings.Contains(re.Fix, "/tmp is group- or world-writable") {
			t.Errorf("under /tmp: %#v", err)
		}
		if made, err := MakeParent(root); err == nil || len(made) != 0 {
			t.Errorf("MakeParent under /tmp: %v %v", made, err)
		}
		if _, err := os.Lstat(filepath.Dir(root)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s was created", filepath.Dir(root))
		}
	}
}
