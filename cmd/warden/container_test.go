package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wardenhq/warden/engine/hands/handstest"
)

// emptyImage is an image with no files of its own: mount points and the
// merged-/usr links. The container gets the host's /usr and /etc read-only,
// so warden, bwrap and the shell inside are this machine's.
const emptyImage = "warden-test/empty:1"

// container runs warden as an ordinary user inside an unprivileged Docker
// container: Docker's default seccomp profile (which refuses the user
// namespaces bwrap needs), no capabilities, no network, uid 1000, a
// private tmpfs HOME. The product's warden and warden-hook are at
// /opt/warden, and mods (a dir of module dirs) at /opt/mod, read-only.
type container struct {
	t          *testing.T
	docker     string // the docker CLI
	sock, bins string
	mods       string
	// root: the script runs as uid 0 (still unprivileged: no user
	// namespace, the default seccomp profile) with Docker's default
	// capabilities, or with none when noCaps.
	root, noCaps bool
}

func newContainer(t *testing.T, mods string) *container {
	t.Helper()
	needTool(t, "docker", "apt-get install docker.io")
	c := &container{t: t, docker: "docker", sock: handstest.Docker(t), mods: mods}
	c.bins = privateDir(t, "warden-container-bin-")
	buildWarden(t, filepath.Join(c.bins, "warden"))
	hook, err := os.ReadFile(wardenHookBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.bins, "warden-hook"), hook, 0o755); err != nil {
		t.Fatal(err)
	}
	c.ensureImage()
	return c
}

// ensureImage imports emptyImage when the engine does not have it.
func (c *container) ensureImage() {
	c.t.Helper()
	if _, err := c.cli(nil, "image", "inspect", emptyImage); err == nil {
		return
	}
	var rootfs bytes.Buffer
	tw := tar.NewWriter(&rootfs)
	for _, d := range []string{"usr", "etc", "proc", "dev", "sys", "tmp", "run", "opt", "opt/warden", "opt/mod", "home", "home/op"} {
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755})
	}
	for _, l := range []string{"bin", "lib", "lib64", "sbin"} {
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: l, Linkname: "usr/" + l})
	}
	tw.Close()
	if out, err := c.cli(&rootfs, "import", "-", emptyImage); err != nil {
		c.t.Fatalf("docker import %s: %v\n%s", emptyImage, err, out)
	}
}

func (c *container) cli(stdin *bytes.Buffer, args ...string) (string, error) {
	cmd := exec.Command(c.docker, append([]string{"-H", "unix://" + c.sock}, args...)...)
	if stdin != nil {
		cmd.Stdin = stdin
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// run runs script with bash in a fresh container and returns its
// output and exit code. The script's PATH has /opt/warden first.
func (c *container) run(script string) (string, int) {
	c.t.Helper()
	uid, caps := "1000", []string{"--cap-drop", "ALL"}
	if c.root {
		uid = "0"
		if !c.noCaps {
			caps = nil
		}
	}
	args := []string{"run", "--rm", "--network", "none", "--user", uid + ":" + uid}
	args = append(args, caps...)
	args = append(args, "--security-opt", "no-new-privileges",
		"--tmpfs", "/home/op:mode=0700,uid="+uid+",gid="+uid+",exec", "--tmpfs", "/tmp:mode=1777",
		"-e", "HOME=/home/op", "-e", "PATH=/opt/warden:/usr/bin:/bin",
		"-v", "/usr:/usr:ro", "-v", "/etc:/etc:ro",
		"-v", c.bins+":/opt/warden:ro")
	if c.mods != "" {
		args = append(args, "-v", c.mods+":/opt/mod:ro")
	}
	// One stream: docker carries stdout and stderr apart, so a line of
	// one can arrive before an earlier line of the other, and the
	// sections the tests cut the output into would lose lines.
	args = append(args, "--entrypoint", "/usr/bin/bash", emptyImage, "-euc", "exec 2>&1\n"+script)
	out, err := c.cli(nil, args...)
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out, 0
	case errors.As(err, &ee):
		return out, ee.ExitCode()
	}
	c.t.Fatalf("docker run: %v\n%s", err, out)
	return "", 0
}

// The container really is the place the issue is about: bwrap cannot
// make its namespaces there, though no sysctl says so.
func TestContainerRefusesBwrapNamespaces(t *testing.T) {
	c := newContainer(t, "")
	out, code := c.run("id -u; bwrap --ro-bind / / true")
	if code == 0 || !strings.Contains(out, "1000") || !strings.Contains(out, "namespace") {
		t.Fatalf("bwrap in an unprivileged container: exit %d\n%s", code, out)
	}
}

// Inside the container, as an ordinary user: `jail: auto` (the default)
// finds bwrap refused and runs the hook under landlock, saying so in the
// first line and the receipts; what the hook tries gets what
// docs/jail.md's landlock section promises; `--jail=bwrap` refuses rather
// than run weaker; doctor says which backend works and why bwrap does
// not.
func TestContainerRunsHooksUnderLandlock(t *testing.T) {
	mods := privateDir(t, "warden-container-mods-")
	probe := `t() { if eval "$2" >/dev/null 2>&1; then echo "$1: yes"; else echo "$1: no"; fi; }
t "read home" "cat /home/op/secret"
t "list data" "ls /home/op/.local/state/warden"
t "write module" "echo x > /home/op/probe/pwn"
t "write tmp" 'echo x > "$TMPDIR/w"'
t "inet socket" "exec 3<>/dev/tcp/127.0.0.1/9"
t "unix socket by path" "perl -MSocket -e 'socket(S, PF_UNIX, SOCK_STREAM, 0) and connect(S, pack_sockaddr_un(\$ARGV[0])) or exit 1' /home/op/host.sock"
t "signal the operator's shell" "kill -0 $(cat /home/op/probe/shell.pid)"
t "broker" "warden hook log from-the-hook"
read -r _ _ _ _ pgid _ < /proc/self/stat
if [ "$pgid" = "$$" ]; then echo "own process group: yes"; else echo "own process group: no"; fi
`
	bashModule(t, mods, "probe", "p", probe)
	c := newContainer(t, mods)
	out, code := c.run(`echo secret > /home/op/secret

perl -MSocket -e 'socket(S, PF_UNIX, SOCK_STREAM, 0) or die; bind(S, pack_sockaddr_un("/home/op/host.sock")) or die; listen(S, 5); while (accept(C, S)) { print "HOST SOCKET REACHED\n" }' &
sleep 0.2
cp -r /opt/mod/modules/probe /home/op/probe
echo $$ > /home/op/probe/shell.pid
warden module add /home/op/probe >/dev/null
echo "== auto"; warden hook run probe p || echo "auto exit $?"
echo "== plan"; warden hook plan probe p 2>&1 | grep -i "runs as" || true
echo "== bwrap"; warden hook run probe p --jail=bwrap 2>&1 || echo "bwrap exit $?"
echo "== receipts"; warden receipts list
echo "== doctor"; warden doctor || true`)
	if code != 0 {
		t.Fatalf("the container's script: exit %d\n%s", code, out)
	}
	section := func(name string) string {
		_, rest, _ := strings.Cut(out, "== "+name+"\n")
		body, _, _ := strings.Cut(rest, "\n== ")
		return body
	}
	auto := section("auto")
	for _, want := range []string{"started (jail landlock", "read home: no", "list data: no", "write module: no", "write tmp: yes",
		"inet socket: no", "unix socket by path: no", "signal the operator's shell: no", "broker: yes", "from-the-hook", "own process group: yes", "succeeded"} {
		if !strings.Contains(auto, want) {
			t.Errorf("jail: auto in the container: no %q in:\n%s", want, auto)
		}
	}
	if strings.Contains(out, "HOST SOCKET REACHED") {
		t.Errorf("the hook reached a socket of the container by its path:\n%s", out)
	}
	if bw := section("bwrap"); !strings.Contains(bw, "user namespaces refused, so the jail cannot start") || strings.Contains(bw, "bwrap exit 0") || strings.Contains(bw, "\": yes") || !strings.Contains(bw, "bwrap exit") {
		t.Errorf("--jail=bwrap in the container:\n%s", bw)
	}
	if rec := section("receipts"); !strings.Contains(rec, "started (jail landlock") || !strings.Contains(rec, "succeeded in") {
		t.Errorf("receipts in the container do not say jail landlock:\n%s", rec)
	}
	doc := section("doctor")
	if !strings.Contains(doc, "jail backends") || !strings.Contains(doc, "auto picks landlock") {
		t.Errorf("doctor in the container does not name the backend auto picks:\n%s", doc)
	}
	t.Logf("in the container:\n%s", out)
}

// In the container cgroups cannot be had, so limits are off and nothing
// of the kernel's holds a run's processes together: no pid namespace, no
// cgroup. A hook that double-forks and calls setsid leaves its process
// group behind. The landlock stage is the run's subreaper, so the run's
// end still takes every such daemon with it: one left behind by a hook
// that exits at once, and one by a hook cut short by its timeout. The
// start line says limits are rlimits only, and so does doctor.
func TestContainerRunLeavesNoDaemon(t *testing.T) {
	mods := privateDir(t, "warden-container-mods-")
	for _, m := range []struct{ id, extra, mark, tail string }{
		{"daemon", "", "11", "exit 0"},
		{"daemonto", "    timeout: 2s\n", "22", "sleep 600"},
	} {
		dir := filepath.Join(mods, "modules", m.id)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		manifest := "id: " + m.id + "\nversion: 1.0.0\ndescription: leaves a daemon\nhooks:\n  d:\n    run: [./hook.sh]\n" + m.extra
		// The marker is sleep's argument: a decimal, so it is unique and
		// still a duration sleep takes.
		script := "#!/bin/bash\n( setsid sleep 1000.$1 </dev/null >/dev/null 2>&1 & )\necho \"left sleep 1000.$1\"\n" + m.tail + "\n"
		os.WriteFile(filepath.Join(dir, "module.yaml"), []byte(manifest), 0o644)
		os.WriteFile(filepath.Join(dir, "hook.sh"), []byte(strings.Replace(script, "$1", m.mark, -1)), 0o755)
	}
	c := newContainer(t, mods)
	out, code := c.run(`alive() { for p in /proc/[0-9]*; do if tr '\0' ' ' < $p/cmdline 2>/dev/null | grep -q "sleep 1000.$1"; then
    if ! grep -q '^State:.*Z' $p/status 2>/dev/null; then echo "$1 alive: $(basename $p)"; return; fi; fi; done; echo "$1 gone"; }
for m in daemon daemonto; do cp -r /opt/mod/modules/$m /home/op/$m; warden module add /home/op/$m >/dev/null; done
echo "== exits"; warden hook run daemon d || echo "exit $?"; alive 11
echo "== timeout"; warden hook run daemonto d || echo "exit $?"; alive 22
echo "== doctor"; warden doctor || true`)
	if code != 0 {
		t.Fatalf("the container's script: exit %d\n%s", code, out)
	}
	for _, want := range []string{"started (jail landlock, limits: rlimit)", "left sleep 1000.11", "11 gone", "left sleep 1000.22", "timeout", "22 gone"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	if _, doc, _ := strings.Cut(out, "== doctor\n"); !strings.Contains(doc, "resource limits") || !strings.Contains(doc, "limits: rlimit") ||
		!strings.Contains(doc, "tmp and run_dir limits (defaults 64MiB, 16MiB) are not held") {
		t.Errorf("doctor in the container does not say limits are off, and tmp and run_dir not held:\n%s", doc)
	}
	t.Logf("in the container:\n%s", out)
}

// As root in the container (uid 0, still no user namespace, Docker's
// default seccomp profile): bwrap is refused there too, and auto picks
// landlock. With Docker's default capabilities the hook runs as uid
// 60999, keeping CAP_DAC_OVERRIDE alone (Docker's set has no
// CAP_DAC_READ_SEARCH) to reach its paths; with none at all it stays
// uid 0 with no capability, and `hook plan` says why.
func TestContainerAsRootPicksLandlock(t *testing.T) {
	mods := privateDir(t, "warden-container-mods-")
	bashModule(t, mods, "probe", "p", `echo "uid=$(id -u)"; grep CapEff /proc/self/status | tr -s "\\t" " "
if cat /home/op/secret >/dev/null 2>&1; then echo "read home: yes"; else echo "read home: no"; fi
if echo x > /opt/pwn 2>/dev/null; then echo "write opt: yes"; else echo "write opt: no"; fi
`)
	for _, v := range []struct {
		name   string
		noCaps bool
		want   []string
	}{
		{"default-caps", false, []string{"uid=60999", "CapEff: 0000000000000002", "runs as uid 60999, as under bwrap, keeping one capability, CAP_DAC_OVERRIDE"}},
		{"no-caps", true, []string{"uid=0", "CapEff: 0000000000000000", "runs as uid 0 with every capability dropped", "without CAP_SETUID, CAP_SETGID, CAP_SETPCAP"}},
	} {
		t.Run(v.name, func(t *testing.T) {
			c := newContainer(t, mods)
			c.root, c.noCaps = true, v.noCaps
			out, code := c.run(`echo secret > /home/op/secret; chmod 600 /home/op/secret
echo x > /opt/contrast && echo "root may write /opt"
cp -r /opt/mod/modules/probe /home/op/probe
warden module add /home/op/probe >/dev/null
echo "== auto"; warden hook run probe p || echo "auto exit $?"
echo "== plan"; warden hook plan probe p 2>&1 | grep -i "runs as" || true
echo "== doctor"; warden doctor 2>&1 || true`)
			t.Logf("as root in the container (%s), exit %d:\n%s", v.name, code, out)
			for _, want := range append([]string{"started (jail landlock", "read home: no", "root may write /opt", "write opt: no", "succeeded", "auto picks landlock"}, v.want...) {
				if !strings.Contains(out, want) {
					t.Errorf("no %q in:\n%s", want, out)
				}
			}
		})
	}
}

// In the container there is no cgroup: kill -9 of `warden serve` while
// its landlock hook runs, having left a setsid daemon. The stage's
// parent-death signal makes it kill its whole tree, so nothing of the
// run is left, as uid 1000 and as root; the next engine closes the run.
// Without that signal, the daemon and the stage would outlive the engine
// with no cgroup to find them by.
func TestContainerEngineDeathLeavesNothing(t *testing.T) {
	mods := privateDir(t, "warden-container-mods-")
	bashModule(t, mods, "daemon", "d", "( setsid sleep 1000.33 </dev/null >/dev/null 2>&1 & )\necho left-a-daemon\nsleep 600\n")
	for _, asRoot := range []bool{false, true} {
		t.Run(map[bool]string{false: "uid1000", true: "root"}[asRoot], func(t *testing.T) {
			c := newContainer(t, mods)
			c.root = asRoot
			out, code := c.run(`alive() { n=0; for p in /proc/[0-9]*; do if tr '\0' ' ' < $p/cmdline 2>/dev/null | grep -q "sleep ${1/./[.]}"; then
    if ! grep -q '^State:.*Z' $p/status 2>/dev/null; then n=$((n+1)); fi; fi; done; echo "$2: $n left"; }
cp -r /opt/mod/modules/daemon /home/op/daemon; warden module add /home/op/daemon >/dev/null
warden serve --run daemon/d > /home/op/serve.log 2>&1 &
srv=$!
for i in $(seq 100); do grep -q "left-a-daemon" /home/op/serve.log 2>/dev/null && break; sleep 0.1; done
alive 1000.33 before; alive 600 "hook before"
kill -9 $srv; wait $srv || true
sleep 1
alive 1000.33 after; alive 600 "hook after"
echo "== runs"; warden hook runs
echo "== serve"; cat /home/op/serve.log`)
			t.Logf("in the container, exit %d:\n%s", code, out)
			if code != 0 {
				t.Fatalf("the container's script: exit %d", code)
			}
			for _, want := range []string{"before: 1 left", "hook before: 1 left", "after: 0 left", "hook after: 0 left", "stopped while the run was in progress", "started (jail landlock, limits: rlimit)"} {
				if !strings.Contains(out, want) {
					t.Errorf("no %q in the output", want)
				}
			}
		})
	}
}

// In the container there is no cgroup: a fork bomb and a memory bomb
// are stopped by warden's watch of the run (and the rlimits under it),
// and the run's record and receipts name the limit, as uid 1000 and as
// root: no cgroup is no reason for "limits OFF".
func TestContainerBombsAreNamed(t *testing.T) {
	mods := privateDir(t, "warden-container-mods-")
	bashModule(t, mods, "forkbomb", "f", "for i in $(seq 2000); do sleep 1000.44 & done\necho forked-2000\nwait\n")
	bashModule(t, mods, "membomb", "m", "perl -e '$| = 1; my @x; while (1) { push @x, \"x\" x (64 * 1024**2); print \"grown\\n\" if @x == 16 }'\n")
	for _, asRoot := range []bool{false, true} {
		t.Run(map[bool]string{false: "uid1000", true: "root"}[asRoot], func(t *testing.T) {
			c := newContainer(t, mods)
			c.root = asRoot
			out, code := c.run(`for m in forkbomb membomb; do cp -r /opt/mod/modules/$m /home/op/$m; warden module add /home/op/$m >/dev/null; done
echo "== fork"; warden hook run forkbomb f || echo "exit $?"
n=0; for p in /proc/[0-9]*; do tr '\0' ' ' < $p/cmdline 2>/dev/null | grep -q "sleep 1000[.]44" && n=$((n+1)); done; echo "sleepers left: $n"
echo "== mem"; warden hook run membomb m || echo "exit $?"
echo "== receipts"; warden receipts list --kind hook.end --json`)
			t.Logf("in the container, exit %d:\n%s", code, out)
			if code != 0 {
				t.Fatalf("the container's script: exit %d", code)
			}
			for _, want := range []string{"started (jail landlock, limits: rlimit)", "pids limit 256 reached", "sleepers left: 0",
				"memory limit 512MiB reached", `"limit": "pids"`, `"limit": "memory"`} {
				if !strings.Contains(out, want) {
					t.Errorf("no %q in the output", want)
				}
			}
			for _, not := range []string{"forked-2000", "grown"} {
				if strings.Contains(out, not) {
					t.Errorf("the bomb got as far as %q", not)
				}
			}
		})
	}
}
