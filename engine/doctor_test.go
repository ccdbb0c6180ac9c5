package engine

import (
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wardenhq/warden/engine/caps"
	"github.com/wardenhq/warden/engine/jail"
	"github.com/wardenhq/warden/storage"
	"github.com/wardenhq/warden/storage/storagetest"
)

func needBwrap(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(jail.DefaultBwrap); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is missing in CI: the test command installs it (apt-get install bubblewrap)", jail.DefaultBwrap)
		}
		t.Skipf("%s not installed (apt-get install bubblewrap)", jail.DefaultBwrap)
	}
}

func doctorCheck(t *testing.T, rep Report, name string) Check {
	t.Helper()
	for _, c := range rep.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no %q check in %+v", name, rep.Checks)
	return Check{}
}

func TestDoctorFreshDir(t *testing.T) {
	needBwrap(t)
	dir := newDataDir(t)
	rep := Doctor(DoctorOptions{DataDir: dir})
	if !rep.OK() || rep.DataDir != dir {
		t.Fatalf("fresh dir: %+v", rep)
	}
	var names []string
	for _, c := range rep.Checks {
		names = append(names, c.Name)
		if c.Status != "ok" || c.Fix != "" {
			t.Errorf("check %+v", c)
		}
	}
	if got := strings.Join(names, ","); got != "data dir,free space,store,trust root,bubblewrap,jail helper,user namespaces,seccomp,landlock,jail backends,resource limits,jail tmpfs,hook processes" {
		t.Errorf("checks %s", got)
	}
	// Which backends work here: bwrap does on this host, so auto picks it.
	for _, c := range rep.Checks {
		if c.Name == "jail backends" && (!strings.Contains(c.Detail, "bwrap: works") || !strings.Contains(c.Detail, "auto picks bwrap")) {
			t.Errorf("jail backends: %+v", c)
		}
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("doctor left the data dir %v, %v", fi.Mode(), err)
	}
	// The hooks' process limit: its value and the bound that set it.
	np := doctorCheck(t, rep, "hook processes")
	if want := fmt.Sprintf("RLIMIT_NPROC %d for hooks' uid, from %s", jail.HookNproc(), jail.HookNprocSource()); !strings.Contains(np.Detail, want) {
		t.Errorf("hook processes check %q lacks %q", np.Detail, want)
	}
	// Doctor released the store: an engine opens at once.
	e := openEngine(t, Options{DataDir: dir})
	if v, err := e.VerifyReceipts(); err != nil || !v.Intact {
		t.Errorf("after doctor: %+v, %v", v, err)
	}
}

func TestDoctorBwrapAbsent(t *testing.T) {
	rep := Doctor(DoctorOptions{DataDir: newDataDir(t), BwrapPath: "/nonexistent/bwrap"})
	if rep.OK() {
		t.Fatal("OK with bubblewrap absent")
	}
	c := doctorCheck(t, rep, "bubblewrap")
	if c.Status != "problem" || !strings.Contains(c.Detail, "absent") || c.Fix != "apt-get install bubblewrap" {
		t.Errorf("bubblewrap check %+v", c)
	}
	if s := doctorCheck(t, rep, "store"); s.Status != "ok" {
		t.Errorf("store check %+v", s)
	}
}

// untrustedDir makes a root-owned 0755 dir outside /tmp (whose sticky,
// world-writable mode would refuse any bwrap under it anyway).
func untrustedDir(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a root-owned copy of bwrap")
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	// A dot-dir in the package dir: go tooling ignores it.
	dir, err := os.MkdirTemp(wd, ".doctor-bwrap-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func copyFileMode(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(to, mode); err != nil {
		t.Fatal(err)
	}
}

func TestDoctorBwrapWorldWritable(t *testing.T) {
	needBwrap(t)
	dir := untrustedDir(t)
	bw := filepath.Join(dir, "bwrap")
	copyFileMode(t, jail.DefaultBwrap, bw, 0o777)
	rep := Doctor(DoctorOptions{DataDir: newDataDir(t), BwrapPath: bw})
	if rep.OK() {
		t.Fatal("OK with a world-writable bwrap")
	}
	c := doctorCheck(t, rep, "bubblewrap")
	if c.Status != "problem" || !strings.Contains(c.Detail, "untrusted") || strings.Contains(c.Detail, "absent") ||
		!strings.Contains(c.Detail, bw) || !strings.Contains(c.Detail, "writable") || !strings.Contains(c.Fix, "chmod go-w") {
		t.Errorf("bubblewrap check %+v", c)
	}
}

func TestDoctorDataDirMode(t *testing.T) {
	dir := newDataDir(t)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	rep := Doctor(DoctorOptions{DataDir: dir, BwrapPath: "/nonexistent/bwrap"})
	if rep.OK() {
		t.Fatal("OK with a 0755 data dir")
	}
	c := doctorCheck(t, rep, "data dir")
	if c.Status != "problem" || c.Fix != "chmod 700 "+dir || !strings.Contains(c.Detail, "0755") {
		t.Errorf("data dir check %+v", c)
	}
	for _, c := range rep.Checks {
		if c.Name == "store" || c.Name == "trust root" {
			t.Errorf("store checked despite a refused data dir: %+v", c)
		}
	}
	// Doctor diagnoses; it does not fix or create anything.
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o755 {
		t.Errorf("doctor changed the mode to %v", fi.Mode())
	}
	if _, err := os.Stat(filepath.Join(dir, "warden.db")); err == nil {
		t.Error("doctor created warden.db in a refused data dir")
	}
}

func TestDoctorTamperedHostSecret(t *testing.T) {
	dir := newDataDir(t)
	e := openEngine(t, Options{DataDir: dir})
	e.Close()
	var b [32]byte
	rand.Read(b[:])
	if err := os.WriteFile(filepath.Join(dir, caps.HostSecretFile), b[:], 0o600); err != nil {
		t.Fatal(err)
	}
	rep := Doctor(DoctorOptions{DataDir: dir, BwrapPath: "/nonexistent/bwrap"})
	c := doctorCheck(t, rep, "trust root")
	if c.Status != "problem" || c.Fix != "warden trust rotate" || !strings.Contains(c.Detail, "fingerprint") {
		t.Errorf("trust root check %+v", c)
	}
	if s := doctorCheck(t, rep, "store"); s.Status != "ok" {
		t.Errorf("store check %+v", s)
	}
	// Rotating is the way out.
	e = openEngine(t, Options{DataDir: dir})
	if _, err := e.RotateTrust(testActor); err != nil {
		t.Fatal(err)
	}
	e.Close()
	rep = Doctor(DoctorOptions{DataDir: dir, BwrapPath: "/nonexistent/bwrap"})
	if c := doctorCheck(t, rep, "trust root"); c.Status != "ok" {
		t.Errorf("after rotate: %+v", c)
	}
}

func TestDoctorBrokenChain(t *testing.T) {
	dir := newDataDir(t)
	e := openEngine(t, Options{DataDir: dir})
	for _, n := range []string{"a", "b"} {
		if err := e.SetConfig(testActor, "mod", n, "v"); err != nil {
			t.Fatal(err)
		}
	}
	e.Close()
	flipSummaryByte(t, dir, 2)
	rep := Doctor(DoctorOptions{DataDir: dir, BwrapPath: "/nonexistent/bwrap"})
	c := doctorCheck(t, rep, "store")
	if c.Status != "problem" || !strings.Contains(c.Detail, "seq 2") || !strings.Contains(c.Fix, "warden receipts verify") {
		t.Errorf("store check %+v", c)
	}
}

// TestDoctorWhileHeld: with the store held, doctor reports it rather than
// waiting forever or failing (here the holder is this very process).
func TestDoctorWhileHeld(t *testing.T) {
	e := openEngine(t, Options{})
	rep := Doctor(DoctorOptions{DataDir: e.DataDir(), BwrapPath: "/nonexistent/bwrap"})
	c := doctorCheck(t, rep, "store")
	if c.Status != "ok" || !strings.Contains(c.Detail, "in use") {
		t.Errorf("store check while held: %+v", c)
	}
}

// Doctor says, before any run, that user namespaces are refused and why:
// user.max_user_namespaces 0, or Ubuntu's AppArmor restriction with no
// profile for bwrap (read through a fake /proc/sys: this Debian kernel has
// no AppArmor to show it).
func TestDoctorUsernsRefused(t *testing.T) {
	for _, tc := range []struct {
		name, file, detail, fix string
	}{
		{"max zero", "proc/sys/user/max_user_namespaces", "user.max_user_namespaces is 0", "sysctl -w user.max_user_namespaces=15000"},
		{"apparmor", "proc/sys/kernel/apparmor_restrict_unprivileged_userns", "kernel.apparmor_restrict_unprivileged_userns is 1", "apparmor_parser -r /etc/apparmor.d/bwrap"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			write := func(p, v string) {
				os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755)
				if err := os.WriteFile(filepath.Join(root, p), []byte(v), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			write("proc/sys/user/max_user_namespaces", "15000\n")
			write(tc.file, map[bool]string{true: "0\n", false: "1\n"}[tc.name == "max zero"])
			rep := Doctor(DoctorOptions{DataDir: newDataDir(t), SysRoot: root})
			if rep.OK() {
				t.Errorf("doctor OK with user namespaces refused: %+v", rep)
			}
			c := doctorCheck(t, rep, "user namespaces")
			if c.Status != "problem" || c.Warning || !strings.Contains(c.Detail, "unavailable, so bwrap cannot make its jail (jail: auto runs hooks under landlock where it can, see jail backends): "+tc.detail) || !strings.Contains(c.Fix, tc.fix) {
				t.Errorf("user namespaces check %+v", c)
			}
		})
	}
	// The real host's: open here (the tests' jailed runs need it).
	if c := doctorCheck(t, Doctor(DoctorOptions{DataDir: newDataDir(t)}), "user namespaces"); c.Status != "ok" {
		t.Errorf("user namespaces on this host: %+v", c)
	}
}

// TestDoctorStoreDamage: doctor runs bbolt's consistency check on the
// store, read-only, and reports damage with the fix (restore the newest
// backup) instead of faulting or calling it fine: a page leaked from
// the high water mark (every record still reads, so only tx.Check sees
// it), a leaf count flipped (verify's producer panicked), a file cut to
// a quarter (faulted at open).
func TestDoctorStoreDamage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t testing.TB, path string)
		want   string
	}{
		{"leaked page", storagetest.LeakPage, "unreachable unfreed"},
		{"leaf count", func(t testing.TB, path string) { storagetest.FlipLeafCount(t, path, 255) }, "past the page"},
		{"truncated", func(t testing.TB, path string) {
			fi, _ := os.Stat(path)
			os.Truncate(path, fi.Size()/4)
		}, "truncated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := newDataDir(t)
			path := storagetest.FillReceipts(t, dir, 200)
			tc.damage(t, path)
			before, _ := os.ReadFile(path)
			rep := Doctor(DoctorOptions{DataDir: dir, BwrapPath: "/nonexistent/bwrap"})
			c := doctorCheck(t, rep, "store")
			if c.Status != "problem" || !strings.Contains(c.Detail, tc.want) || !strings.Contains(c.Detail, path) || !strings.Contains(c.Fix, "backup") {
				t.Errorf("store check %+v", c)
			}
			if after, _ := os.ReadFile(path); string(after) != string(before) {
				t.Error("doctor changed the damaged file")
			}
		})
	}
}

// TestDoctorCheckCost: what the consistency check costs on a store of
// 10,000 receipts (doctor runs it on every call).
func TestDoctorCheckCost(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a store of 10,000 receipts")
	}
	dir := newDataDir(t)
	s, err := storage.Open(storage.Options{Dir: dir, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10_000; i += 500 {
		if _, err := s.Update(func(tx *storage.Tx) error {
			for j := 0; j < 500; j++ {
				if _, err := tx.AppendReceipt(storage.Draft{Kind: "test.fill", Actor: "local:t", Subject: "s", Summary: strings.Repeat("x", 200)}); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	fi, _ := os.Stat(filepath.Join(dir, storage.DBFile))
	res, err := storage.Check(dir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("consistency check of %d records (%d KiB): %s", res.Keys, fi.Size()>>10, res.Took)
	if res.Took > 2*time.Second {
		t.Errorf("the check took %s on 10,000 receipts", res.Took)
	}
	rep := Doctor(DoctorOptions{DataDir: dir, BwrapPath: "/nonexistent/bwrap"})
	if c := doctorCheck(t, rep, "store"); c.Status != "ok" || !strings.Contains(c.Detail, "consistency checked") {
		t.Errorf("store check %+v", c)
	}
}
