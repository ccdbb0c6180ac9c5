package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func wantPolicy(t *testing.T, err error, path, fix string) *PolicyError {
	t.Helper()
	var pe *PolicyError
	if !errors.As(err, &pe) {
		t.Fatalf("want *PolicyError, got %T: %v", err, err)
	}
	if path != "" && pe.Path != path {
		t.Errorf("PolicyError.Path = %q, want %q", pe.Path, path)
	}
	if fix != "" && pe.Fix != fix {
		t.Errorf("PolicyError.Fix = %q, want %q", pe.Fix, fix)
	}
	if !strings.Contains(pe.Error(), pe.Fix) {
		t.Errorf("message does not spell out the fix: %v", pe)
	}
	return pe
}

func TestOpenCreatesPrivateDir(t *testing.T) {
	dir := newDir(t)
	s := openStore(t, dir)
	for name, want := range map[string]os.FileMode{dir: os.ModeDir | 0o700, filepath.Join(dir, DBFile): 0o600, filepath.Join(dir, SealKeyFile): 0o600, filepath.Join(dir, PIDFile): 0o600} {
		fi, err := os.Lstat(name)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", name, fi.Mode(), want)
		}
	}
	if pid := readPID(dir); pid != os.Getpid() {
		t.Errorf("pid file says %d, want %d", pid, os.Getpid())
	}
	if s.Dir() != dir || s.Path() != filepath.Join(dir, DBFile) {
		t.Errorf("Dir/Path = %q/%q", s.Dir(), s.Path())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dir, PIDFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pid file still there after Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := s.AppendReceipt(Draft{Kind: "x", Actor: "a"}); !errors.Is(err, ErrClosed) {
		t.Errorf("append after Close: %v, want ErrClosed", err)
	}
	// Re-open works and keeps the data.
	s = openStore(t, dir)
	defer s.Close()
	if _, err := s.AppendReceipt(Draft{Kind: "x", Actor: "a"}); err != nil {
		t.Fatal(err)
	}
}

func TestOpenRefusesOpenDirMode(t *testing.T) {
	dir := newDir(t)
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := Open(Options{Dir: dir})
	wantPolicy(t, err, dir, "chmod 700 "+dir)
	if _, err := os.Lstat(filepath.Join(dir, DBFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("warden.db created in a refused dir")
	}
}

func TestOpenRefusesForeignOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown")
	}
	dir := newDir(t)
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 12345, 12345); err != nil {
		t.Fatal(err)
	}
	_, err := Open(Options{Dir: dir})
	pe := wantPolicy(t, err, dir, OwnDirFix(dir))
	if !strings.Contains(pe.Problem, "12345") {
		t.Errorf("problem does not name the owner: %q", pe.Problem)
	}
	// Another user's dir is never handed over: the fix is a dir of one's own.
	if strings.Contains(pe.Fix, "chown") || !strings.Contains(pe.Fix, "mkdir -p -m 700 ") {
		t.Errorf("fix for another user's dir: %q", pe.Fix)
	}
}

func TestOpenRefusesSymlinkedDir(t *testing.T) {
	base := t.TempDir()
	real := filepath.Join(base, "real")
	if err := os.Mkdir(real, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	_, err := Open(Options{Dir: link})
	pe := wantPolicy(t, err, link, "")
	if !strings.Contains(pe.Fix, real) {
		t.Errorf("fix does not name the real path: %q", pe.Fix)
	}
	if ents, _ := os.ReadDir(real); len(ents) != 0 {
		t.Errorf("files created behind the symlink: %v", ents)
	}
}

func TestOpenRefusesSymlinkedDB(t *testing.T) {
	dir := newDir(t)
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "target")
	if err := os.WriteFile(target, []byte("not yours"), 0o600); err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(target)
	db := filepath.Join(dir, DBFile)
	if err := os.Symlink(target, db); err != nil {
		t.Fatal(err)
	}
	_, err := Open(Options{Dir: dir})
	wantPolicy(t, err, db, "")
	got, err := os.ReadFile(target)
	if err != nil || string(got) != "not yours" {
		t.Errorf("symlink target changed: %q %v", got, err)
	}
	after, _ := os.Stat(target)
	if after.Mode() != before.Mode() || !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("symlink target touched: %v/%v -> %v/%v", before.Mode(), before.ModTime(), after.Mode(), after.ModTime())
	}
	// A dangling link is refused the same way and nothing is created.
	os.Remove(target)
	_, err = Open(Options{Dir: dir})
	wantPolicy(t, err, db, "")
	if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("dangling symlink target was created")
	}
}

func TestOpenRefusesHardLinkedDB(t *testing.T) {
	dir := newDir(t)
	openStore(t, dir).Close()
	db := filepath.Join(dir, DBFile)
	if err := os.Link(db, filepath.Join(t.TempDir(), "copy.db")); err != nil {
		t.Fatal(err)
	}
	_, err := Open(Options{Dir: dir})
	pe := wantPolicy(t, err, db, "")
	if !strings.Contains(pe.Problem, "2 hard links") {
		t.Errorf("problem = %q", pe.Problem)
	}
}

func TestOpenRefusesDBMode(t *testing.T) {
	dir := newDir(t)
	openStore(t, dir).Close()
	db := filepath.Join(dir, DBFile)
	if err := os.Chmod(db, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(Options{Dir: dir})
	wantPolicy(t, err, db, "chmod 600 "+db)
}

func TestOpenRefusesBadSealKey(t *testing.T) {
	dir := newDir(t)
	openStore(t, dir).Close()
	key := filepath.Join(dir, SealKeyFile)
	if err := os.Chmod(key, 0o640); err != nil {
		t.Fatal(err)
	}
	_, err := Open(Options{Dir: dir})
	wantPolicy(t, err, key, "chmod 600 "+key)
	if pid := readPID(dir); pid != 0 {
		t.Errorf("failed Open left a pid file naming %d", pid)
	}
	os.Chmod(key, 0o600)
	os.WriteFile(key, []byte("short"), 0o600)
	_, err = Open(Options{Dir: dir})
	wantPolicy(t, err, key, "")
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	dir := newDir(t)
	openStore(t, dir).Close()
	rawPut(t, dir, bucketMeta, keySchema, []byte(`{"version":99}`))
	for i := 0; i < 2; i++ { // a refused Open releases the file
		_, err := Open(Options{Dir: dir})
		var se *SchemaError
		if !errors.As(err, &se) {
			t.Fatalf("want *SchemaError, got %T: %v", err, err)
		}
		if se.Found != 99 || se.Supported != SchemaVersion {
			t.Fatalf("SchemaError = %+v", se)
		}
		if msg := se.Error(); !strings.Contains(msg, "99") || !strings.Contains(msg, strconv.Itoa(SchemaVersion)) {
			t.Fatalf("message does not name both versions: %q", msg)
		}
	}
	if pid := readPID(dir); pid != 0 {
		t.Errorf("refused Open left a pid file naming %d", pid)
	}
}

func TestOpenRefusesForeignBoltFile(t *testing.T) {
	dir := newDir(t)
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(filepath.Join(dir, DBFile), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("other")); return err })
	db.Close()
	_, err = Open(Options{Dir: dir})
	wantCorrupt(t, err, "other", "-")
}

func TestOpenLockedBySecondProcess(t *testing.T) {
	dir := newDir(t)
	child := startHelper(t, "hold", dir)
	defer func() {
		child.stdin.Close()
		if err := child.cmd.Wait(); err != nil {
			t.Errorf("helper: %v; stderr: %s", err, child.stderr)
		}
	}()
	start := time.Now()
	s, err := Open(Options{Dir: dir})
	took := time.Since(start)
	if err == nil {
		s.Close()
		t.Fatal("second Open succeeded while another process holds the store")
	}
	var le *LockedError
	if !errors.As(err, &le) {
		t.Fatalf("want *LockedError, got %T: %v", err, err)
	}
	if took > 1500*time.Millisecond {
		t.Errorf("Open took %v to give up, want about 1s", took)
	}
	pid := child.cmd.Process.Pid
	if le.PID != pid {
		t.Errorf("LockedError.PID = %d, want %d", le.PID, pid)
	}
	if !strings.Contains(le.Error(), strconv.Itoa(pid)) {
		t.Errorf("message does not name pid %d: %v", pid, le)
	}
	if got := HolderPID(dir); got != pid {
		t.Errorf("HolderPID = %d, want %d", got, pid)
	}
	// The refused Open must not have disturbed the holder's pid file.
	if got := readPID(dir); got != pid {
		t.Errorf("pid file now says %d", got)
	}
}

func TestOpenAfterLockReleased(t *testing.T) {
	dir := newDir(t)
	child := startHelper(t, "hold", dir)
	child.stdin.Close()
	if err := child.cmd.Wait(); err != nil {
		t.Fatalf("helper: %v; stderr: %s", err, child.stderr)
	}
	if _, err := os.Lstat(filepath.Join(dir, PIDFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pid file left after the holder closed: %v", err)
	}
	s := openStore(t, dir)
	defer s.Close()
	if got := readPID(dir); got != os.Getpid() {
		t.Errorf("pid file says %d", got)
	}
}

func TestLockedErrorWithoutPID(t *testing.T) {
	e := &LockedError{Dir: "/d"}
	if !strings.Contains(e.Error(), "fuser") {
		t.Errorf("message without pid gives no way to find the holder: %v", e)
	}
	e.PID = 42
	if !strings.Contains(e.Error(), "42") {
		t.Error(e)
	}
}

func TestDefaultDir(t *testing.T) {
	t.Setenv("WARDEN_DATA_DIR", "")
	t.Setenv("XDG_STATE_HOME", "/x/state")
	if d, _ := DefaultDir(); d != "/x/state/warden" {
		t.Errorf("DefaultDir = %q", d)
	}
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv("HOME", "/home/h")
	if d, _ := DefaultDir(); d != "/home/h/.local/state/warden" {
		t.Errorf("DefaultDir = %q", d)
	}
	t.Setenv("WARDEN_DATA_DIR", "/over")
	if d, _ := DefaultDir(); d != "/over" {
		t.Errorf("DefaultDir = %q", d)
	}
}

func TestKeyFiles(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadKeyFile(dir, "k", false); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing key without create: %v", err)
	}
	k1, err := LoadKeyFile(dir, "k", true)
	if err != nil || len(k1) != KeySize {
		t.Fatalf("create: %d %v", len(k1), err)
	}
	k2, err := LoadKeyFile(dir, "k", true)
	if err != nil || string(k1) != string(k2) {
		t.Fatalf("second load differs: %v", err)
	}
	k3, err := ReplaceKeyFile(dir, "k")
	if err != nil || string(k3) == string(k1) {
		t.Fatalf("replace: %v", err)
	}
	if k4, _ := LoadKeyFile(dir, "k", false); string(k4) != string(k3) {
		t.Fatal("replaced key not read back")
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("leftover files: %v", ents)
	}
	fi, _ := os.Lstat(filepath.Join(dir, "k"))
	if fi.Mode() != 0o600 {
		t.Errorf("mode %v", fi.Mode())
	}
}

func ExampleLockedError() {
	fmt.Println(&LockedError{Dir: "/d", PID: 7})
	// Output: data dir /d is in use by warden pid 7; see it with `ps -o pid,args -p 7`, stop it with `kill 7`, or use another --data-dir
}
