package main

import (
	"bytes"
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

func (u *asUserEnv) run(args ...string) result {
	u.t.Helper()
	cmd := exec.Command(u.bin, args...)
	cmd.Env = hostEnv(u.home)
	cmd.Dir = u.home
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: ordinaryUID, Gid: ordinaryUID}}
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
// a private dir of the user's own. Before, doctor printed "data dir /etc
// (new)" and "fix: chown 1000:1000 /etc".
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
	// The dir it offers works as offered.
	if r := u.run("--data-dir", own, "module", "list"); r.code != 0 {
		t.Errorf("the offered dir: %s", r)
	}
	fi, err := os.Stat(own)
	if err != nil || fi.Mode().Perm() != 0o700 || fi.Sys().(*syscall.Stat_t).Uid != ordinaryUID {
		t.Errorf("the offered dir is not the user's, 0700: %v %v", fi, err)
	}
}
