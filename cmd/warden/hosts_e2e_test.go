package main

// Hosts that are not this test machine's root: an ordinary user with a
// hardened process limit, and a user namespace that refuses nested ones
// (as a container may). The real warden binary runs in each, as an
// operator's would.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/engine/jail"
)

// ordinaryUID is the unprivileged user the tests run warden as (on the
// test machine, cloudsdk). setpriv needs no passwd entry for it.
const ordinaryUID = 1000

// needRootFor skips, saying why, when the test cannot set up its host
// without root; in CI (which runs as root) it fails instead.
func needRootFor(t *testing.T, why string) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("not root in CI: %s", why)
	}
	t.Skipf("needs root: %s", why)
}

// sharedDir makes a fresh root-owned 0755 dir that an ordinary user can
// reach and whose ancestors no one else can write (module dirs under
// /tmp's world-writable ancestor are refused): under /var/lib, not the
// checkout, which may sit under /root (0700, out of an ordinary user's
// reach, as privateDir's dirs are).
func sharedDir(t *testing.T, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/lib", "."+prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for d := dir; d != "/"; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm()&0o001 == 0 {
			t.Fatalf("%s is not searchable by others (%v): the ordinary user cannot reach the test's files", d, err)
		}
	}
	return dir
}

// bashModule writes a module of one bash hook into dir/modules/id.
func bashModule(t *testing.T, dir, id, hook, script string) string {
	t.Helper()
	m := filepath.Join(dir, "modules", id)
	if err := os.MkdirAll(m, 0o755); err != nil {
		t.Fatal(err)
	}
	manifest := fmt.Sprintf("id: %s\nversion: 1.0.0\ndescription: Test module %s.\nhooks:\n  %s:\n    run: [./hook.sh]\n", id, id, hook)
	if err := os.WriteFile(filepath.Join(m, "module.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(m, "hook.sh"), []byte("#!/bin/bash\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
	return m
}

// chownTree gives every file under dir to uid:gid.
func chownTree(t *testing.T, dir string, uid, gid int) {
	t.Helper()
	if err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	}); err != nil {
		t.Fatal(err)
	}
}

// hostEnv is the whole environment of warden in these tests: nothing of
// the test's own (config, state) reaches it.
func hostEnv(home string) []string {
	return []string{"PATH=/usr/bin:/bin", "HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "XDG_STATE_HOME=" + filepath.Join(home, ".state"), "LANG=C.UTF-8"}
}

// TestHookRunUnderLowHardNproc: an ordinary user whose hard RLIMIT_NPROC
// is below warden's cap (ulimit -u 3000, as an enterprise limits.conf
// sets) runs a jailed hook. It runs and succeeds, with its RLIMIT_NPROC
// lowered to that hard limit, soft and hard; doctor names the value and
// where it comes from. Asking prlimit for more than the hard limit (8192,
// say) would fail every jailed run: "prlimit: failed to set the NPROC
// resource limit: Operation not permitted".
func TestHookRunUnderLowHardNproc(t *testing.T) {
	needBwrap(t)
	needRootFor(t, "setpriv to the ordinary user, with a hard RLIMIT_NPROC only root can set for it")
	needTool(t, "prlimit", "apt-get install util-linux")
	// Below what the cap and pid_max bounds alone would ask for, so that
	// asking for those bounds is refused.
	pidMax, _ := strconv.Atoi(strings.TrimSpace(string(must(os.ReadFile("/proc/sys/kernel/pid_max")))))
	hard := min(3000, min(jail.NprocCap, pidMax/4)-1)

	base := sharedDir(t, "warden-nproc-")
	bin := filepath.Join(base, "warden")
	buildWarden(t, bin)
	data, home := filepath.Join(base, "data"), filepath.Join(base, "home")
	for _, d := range []string{data, home} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	mod := bashModule(t, base, "nproc", "show", `echo "nproc soft $(ulimit -Su) hard $(ulimit -Hu)"
if ulimit -Hu $(( $(ulimit -Hu) + 1 )) 2>/dev/null; then echo "raised"; else echo "cannot raise"; fi
`)
	for _, d := range []string{data, home, filepath.Dir(mod)} {
		chownTree(t, d, ordinaryUID, ordinaryUID)
	}
	asUser := func(args ...string) (string, error) {
		argv := append([]string{"--nproc=" + strconv.Itoa(hard) + ":" + strconv.Itoa(hard),
			"setpriv", "--reuid", strconv.Itoa(ordinaryUID), "--regid", strconv.Itoa(ordinaryUID), "--clear-groups", "--",
			bin, "--data-dir", data}, args...)
		cmd := exec.Command("prlimit", argv...)
		cmd.Env = hostEnv(home)
		cmd.Dir = home
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := asUser("module", "add", mod); err != nil {
		t.Fatalf("module add: %v\n%s", err, out)
	}
	out, err := asUser("hook", "run", "nproc", "show")
	runOut := out
	if err != nil {
		t.Fatalf("hook run as uid %d with hard nproc %d: %v\n%s", ordinaryUID, hard, err, out)
	}
	if want := fmt.Sprintf("nproc soft %d hard %d", hard, hard); !strings.Contains(out, want) || !strings.Contains(out, "cannot raise") || !strings.Contains(out, "succeeded") {
		t.Errorf("hook run as uid %d with hard nproc %d: want %q and \"cannot raise\" in:\n%s", ordinaryUID, hard, want, out)
	}

	out, _ = asUser("doctor", "--json")
	var rep engine.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, out)
	}
	found := false
	for _, c := range rep.Checks {
		if c.Name == "hook processes" {
			found = true
			if want := fmt.Sprintf("RLIMIT_NPROC %d for hooks' uid, from %s", hard, jail.NprocFromHard); c.Status != "ok" || !strings.Contains(c.Detail, want) {
				t.Errorf("doctor's hook processes check %+v, want %q", c, want)
			}
		}
	}
	if !found {
		t.Errorf("doctor --json has no hook processes check:\n%s", out)
	}
	// Where doctor says no cgroup holds limits for this user (uid
	// 1000 on cgroup v1), the run's start line says so, as its receipts
	// do ("limits: rlimit"): not a bare "(jail bwrap)".
	for _, c := range rep.Checks {
		if c.Name == "resource limits" && c.Status == "problem" && !strings.Contains(runOut, "started (jail bwrap, limits: rlimit)") {
			t.Errorf("limits are rlimits only for uid %d, but the start line does not say so:\n%s", ordinaryUID, runOut)
		}
	}
}

// TestUsernsRefusedExplained: warden (root, as in a container) in a user
// namespace whose user.max_user_namespaces is 0, so that the jail's bwrap
// cannot create one. The run fails with one message that says so and what
// to do, not bwrap's raw "Creating new namespace failed: ... (ENOSPC)";
// doctor, in the same namespace, names the cause before any run. The
// sysctl is the child namespace's own: the host's is never touched.
func TestUsernsRefusedExplained(t *testing.T) {
	needBwrap(t)
	needRootFor(t, "a user namespace mapping uids 0-65535 (the hooks' 60999 too), which only root may write")
	hostMax := string(must(os.ReadFile("/proc/sys/user/max_user_namespaces")))

	base := sharedDir(t, "warden-userns-")
	bin := filepath.Join(base, "warden")
	buildWarden(t, bin)
	data, home := filepath.Join(base, "data"), filepath.Join(base, "home")
	for _, d := range []string{data, home} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	mod := bashModule(t, base, "userns", "show", "echo the hook ran\n")
	if out, err := exec.Command(bin, "--data-dir", data, "module", "add", mod).CombinedOutput(); err != nil {
		t.Fatalf("module add: %v\n%s", err, out)
	}
	inRefusingNS := func(args ...string) (string, error) {
		cmd := exec.Command("/bin/sh", append([]string{"-c", `echo 0 > /proc/sys/user/max_user_namespaces && exec "$@"`, "sh", bin, "--data-dir", data}, args...)...)
		cmd.Env = hostEnv(home)
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Cloneflags:                 syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
			UidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 65536}},
			GidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 65536}},
			GidMappingsEnableSetgroups: true,
		}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	// jail: bwrap never falls back: the run fails, explained.
	out, err := inRefusingNS("hook", "run", "userns", "show", "--jail=bwrap")
	if err == nil || strings.Contains(out, "the hook ran") {
		t.Fatalf("the hook ran with user namespaces refused: %v\n%s", err, out)
	}
	for _, want := range []string{
		"failed in", "user namespaces refused, so the jail cannot start: user.max_user_namespaces is 0",
		"sysctl -w user.max_user_namespaces=15000", "container",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the failed run does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "failed in") && strings.HasSuffix(strings.TrimSpace(out), "exit code 1") {
		t.Errorf("the run's error is bwrap's exit code, not the cause:\n%s", out)
	}

	// auto (the default) falls back to the landlock backend, and says so.
	if abi := jail.ProbeHost().LandlockABI; abi >= jail.MinLandlockABI {
		out, err := inRefusingNS("hook", "run", "userns", "show")
		if err != nil || !strings.Contains(out, "the hook ran") || !strings.Contains(out, "started (jail landlock") {
			t.Errorf("jail: auto with user namespaces refused: want the hook run under landlock: %v\n%s", err, out)
		}
	}

	out, _ = inRefusingNS("doctor", "--json")
	var rep engine.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, out)
	}
	found := false
	for _, c := range rep.Checks {
		if c.Name == "user namespaces" {
			found = true
			if c.Status != "problem" || !strings.Contains(c.Detail, "user.max_user_namespaces is 0") || !strings.Contains(c.Fix, "sysctl -w user.max_user_namespaces=15000") {
				t.Errorf("doctor's user namespaces check %+v", c)
			}
		}
	}
	if !found || rep.OK() {
		t.Errorf("doctor --json in the refusing namespace (OK %v):\n%s", rep.OK(), out)
	}
	if now := string(must(os.ReadFile("/proc/sys/user/max_user_namespaces"))); now != hostMax {
		t.Fatalf("the host's user.max_user_namespaces changed: %q, was %q", now, hostMax)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
