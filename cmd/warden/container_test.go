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
	args := []string{"run", "--rm", "--network", "none", "--user", "1000:1000", "--cap-drop", "ALL",
		"--security-opt", "no-new-privileges",
		"--tmpfs", "/home/op:mode=0700,uid=1000,gid=1000", "--tmpfs", "/tmp:mode=1777",
		"-e", "HOME=/home/op", "-e", "PATH=/opt/warden:/usr/bin:/bin",
		"-v", "/usr:/usr:ro", "-v", "/etc:/etc:ro",
		"-v", c.bins + ":/opt/warden:ro"}
	if c.mods != "" {
		args = append(args, "-v", c.mods+":/opt/mod:ro")
	}
	args = append(args, "--entrypoint", "/usr/bin/bash", emptyImage, "-euc", script)
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
