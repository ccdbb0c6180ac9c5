package main

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// asUserEnv runs a built warden as the ordinary user (uid and gid
// ordinaryUID), with hostEnv(home) for its whole environment.
type asUserEnv struct {
	t         *testing.T
	bin, home string
}

func newAsUser(t *testing.T) *asUserEnv {
	t.Helper()
	needRootFor(t, "running warden as the ordinary user (uid 1000) takes root")
	base := sharedDir(t, "warden-asuser-")
	bin := filepath.Join(base, "warden")
	buildWarden(t, bin)
	home := filepath.Join(base, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	chownTree(t, home, ordinaryUID, ordinaryUID)
	return &asUserEnv{t: t, bin: bin, home: home}
}

// cmd is a command run as the ordinary user, in its home.
func (u *asUserEnv) cmd(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Env = hostEnv(u.home)
	cmd.Dir = u.home
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: ordinaryUID, Gid: ordinaryUID}}
	return cmd
}

func (u *asUserEnv) run(args ...string) result {
	u.t.Helper()
	cmd := u.cmd(u.bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		u.t.Fatalf("warden %v: %v", args, err)
	}
	return result{code, out.String(), errb.String()}
}

// An ordinary user pointing warden at a system dir (/etc, /root) is
// refused, and the advice never weakens the machine: no chown of a dir
// warden did not make, no "(new)" for a dir that exists; the way out is
// a private dir of the user's own, never "data dir /etc (new)" and
// "fix: chown 1000:1000 /etc".
func TestDoctorAdviceNeverWeakensTheMachine(t *testing.T) {
	u := newAsUser(t)
	own := filepath.Join(u.home, ".state", "warden")
	for _, dir := range []string{"/etc", "/root"} {
		for _, verb := range [][]string{{"doctor"}, {"module", "list"}, {"perms", "list"}} {
			r := u.run(append([]string{"--data-dir", dir}, verb...)...)
			all := r.stdout + r.stderr
			if r.code != 1 {
				t.Errorf("--data-dir %s %v: want exit 1, got %s", dir, verb, r)
			}
			for _, bad := range []string{"chown", "(new)", "chmod 7", "chmod o+", "chmod a+"} {
				if strings.Contains(all, bad) {
					t.Errorf("--data-dir %s %v says %q:\n%s", dir, verb, bad, r)
				}
			}
			if !strings.Contains(all, "belongs to uid 0; you are uid 1000") {
				t.Errorf("--data-dir %s %v does not say whose the dir is:\n%s", dir, verb, r)
			}
			if !strings.Contains(all, "mkdir -p -m 700 "+own) || !strings.Contains(all, "--data-dir "+own) {
				t.Errorf("--data-dir %s %v does not offer a private dir of the user's own (%s):\n%s", dir, verb, own, r)
			}
		}
	}
	// The dir it offers works as offered: mkdir, then --data-dir.
	if out, err := u.cmd("mkdir", "-p", "-m", "700", own).CombinedOutput(); err != nil {
		t.Fatalf("mkdir as the user: %v %s", err, out)
	}
	if r := u.run("--data-dir", own, "module", "list"); r.code != 0 {
		t.Errorf("the offered dir: %s", r)
	}
	fi, err := os.Stat(own)
	if err != nil || fi.Mode().Perm() != 0o700 || fi.Sys().(*syscall.Stat_t).Uid != ordinaryUID {
		t.Errorf("the offered dir is not the user's, 0700: %v %v", fi, err)
	}
}

// Data-dir errors say what the dir is. A file given as the data dir was
// "dial unix …/module.yaml/control.sock: connect: not a directory".
func TestDataDirIsAFile(t *testing.T) {
	c := newCLI(t)
	file := filepath.Join(t.TempDir(), "module.yaml")
	if err := os.WriteFile(file, []byte("id: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.dir = file
	for _, verb := range [][]string{{"module", "list"}, {"doctor"}} {
		r := c.run(verb...)
		all := r.stdout + r.stderr
		if r.code != 1 || !strings.Contains(all, file+": data dir is a file, not a directory") ||
			strings.Contains(all, "dial unix") || strings.Contains(all, "control.sock") || !strings.Contains(all, "mkdir -p -m 700 ") {
			t.Errorf("%v on a file: %s", verb, r)
		}
	}
}

// Another user's data dir, behind a dir closed to the ordinary user, is
// said to be that, not "cannot stat data dir: permission denied" with
// "fix: create it with mkdir -m 700 …", since it exists. A data dir of
// the user's own whose control.sock is another's names the socket's
// owner, not the caller's uid, which says nothing about whose it is.
func TestOtherUsersDataDir(t *testing.T) {
	u := newAsUser(t)
	closed := filepath.Join(filepath.Dir(u.home), "rootonly")
	theirs := filepath.Join(closed, "data")
	if err := os.MkdirAll(theirs, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chmod(closed, 0o700)
	for _, verb := range [][]string{{"doctor"}, {"module", "list"}} {
		r := u.run(append([]string{"--data-dir", theirs}, verb...)...)
		all := r.stdout + r.stderr
		if r.code != 1 || !strings.Contains(all, "cannot be reached: a dir above it is closed to you (uid 1000)") ||
			strings.Contains(all, "create it with") || strings.Contains(all, "cannot stat") || strings.Contains(all, "(new)") {
			t.Errorf("%v on another user's data dir: %s", verb, r)
		}
	}

	mine := filepath.Join(u.home, "data")
	if err := os.Mkdir(mine, 0o700); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", filepath.Join(mine, "control.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	os.Chmod(filepath.Join(mine, "control.sock"), 0o600)
	os.Lchown(mine, ordinaryUID, ordinaryUID) // the socket stays root's
	r := u.run("--data-dir", mine, "module", "list")
	if r.code != 1 || !strings.Contains(r.stderr, "control.sock belongs to uid 0 and you are uid 1000: run warden as uid 0") {
		t.Errorf("a control.sock of another user: %s", r)
	}
}
