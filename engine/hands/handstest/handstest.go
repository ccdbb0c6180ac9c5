// Package handstest gives tests real container engines (a Docker Engine
// and a Podman service) and safe hands roots. Only tests import it.
//
// Docker is $WARDEN_TEST_DOCKER when set (scripts/test starts one with
// scripts/dockerd-test); otherwise the helper runs scripts/dockerd-test
// itself. Podman likewise: $WARDEN_TEST_PODMAN, else scripts/podman-test.
// PodmanDefaults is a second Podman service started the README's way,
// with Podman's own defaults (storage driver, runtime, cgroup manager):
// $WARDEN_TEST_PODMAN_DEFAULTS, else scripts/podman-test --defaults.
// Without an engine a test is skipped, except in CI (CI=true), where a
// missing engine is a failure.
package handstest

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

// Image is the busybox image scripts/dockerd-test imports.
const Image = "warden-test/busybox:1"

// labelRoot is labelRoot, spelled out so the hands package's own
// tests can import this one.
const labelRoot = "dev.warden.hands.root"

// Engine is one test engine: its name (docker or podman) and its socket.
type Engine struct {
	Name   string
	Socket string
}

type found struct {
	once   sync.Once
	socket string
	err    error
}

var engines = map[string]*found{"docker": {}, "podman": {}, "podman-defaults": {}}

// harnesses says how each test engine is found: the variable that names
// its socket, and the script (with its arguments) that starts it.
var harnesses = map[string]struct {
	env, script string
	args        []string
}{
	"docker":          {"WARDEN_TEST_DOCKER", "dockerd-test", nil},
	"podman":          {"WARDEN_TEST_PODMAN", "podman-test", nil},
	"podman-defaults": {"WARDEN_TEST_PODMAN_DEFAULTS", "podman-test", []string{"--defaults"}},
}

// Docker returns the socket of a running test Docker Engine with Image.
func Docker(t testing.TB) string { return get(t, "docker") }

// Podman returns the socket of a running test Podman service with Image.
func Podman(t testing.TB) string { return get(t, "podman") }

// PodmanDefaults returns the socket of a running Podman service with
// Image, started with Podman's default flags (scripts/podman-test
// --defaults), as the README tells operators to start it.
func PodmanDefaults(t testing.TB) string { return get(t, "podman-defaults") }

// Each runs fn as a subtest per engine (docker, podman); an engine that
// is missing skips its subtest, or fails it in CI.
func Each(t *testing.T, fn func(t *testing.T, e Engine)) {
	t.Helper()
	for _, name := range []string{"docker", "podman"} {
		t.Run(name, func(t *testing.T) {
			fn(t, Engine{Name: name, Socket: get(t, name)})
		})
	}
}

func get(t testing.TB, name string) string {
	t.Helper()
	f := engines[name]
	f.once.Do(func() { f.socket, f.err = find(name) })
	if f.err != nil {
		h := harnesses[name]
		script := strings.Join(append([]string{"scripts/" + h.script}, h.args...), " ")
		env := h.env
		if os.Getenv("CI") == "true" {
			t.Fatalf("no %s engine for the hands tests (CI needs one: scripts/test starts it with %s): %v", name, script, f.err)
		}
		t.Skipf("no %s engine for the hands tests (run %s, or set %s): %v", name, script, env, f.err)
	}
	return f.socket
}

func find(name string) (string, error) {
	h := harnesses[name]
	scriptName := h.script
	sock := os.Getenv(h.env)
	if sock == "" {
		script, err := harness(scriptName)
		if err != nil {
			return "", err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", append([]string{script}, h.args...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("%s: %v: %s", script, err, strings.TrimSpace(stderr.String()))
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		sock = lines[len(lines)-1]
	}
	cli, err := client.New(client.WithHost("unix://" + sock))
	if err != nil {
		return "", err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		return "", fmt.Errorf("engine at %s: %v", sock, err)
	}
	if _, err := cli.ImageInspect(ctx, Image); err != nil {
		return "", fmt.Errorf("engine at %s has no %s (scripts/%s imports it): %v", sock, Image, scriptName, err)
	}
	return sock, nil
}

// harness finds scripts/NAME above the package dir.
func harness(name string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "scripts", name), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the test's dir, so no scripts/" + name)
		}
		dir = parent
	}
}

// Client is a Docker client on sock for the test's own checks and
// tampering; it is closed when the test ends.
func Client(t testing.TB, sock string) *client.Client {
	t.Helper()
	cli, err := client.New(client.WithHost("unix://" + sock))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// Base returns a fresh dir that hands roots may be created in: under the
// user cache dir (its ancestors are owned by root or the user and not
// group- or world-writable), mode 0755, removed with its containers when
// the test ends.
func Base(t testing.TB, sock string) string {
	t.Helper()
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(cache, 0o700); err != nil {
		t.Fatal(err)
	}
	base, err := os.MkdirTemp(cache, "warden-hands-test-")
	if err != nil {
		t.Fatal(err)
	}
	if base, err = filepath.EvalSymlinks(base); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if sock != "" {
			RemoveContainers(t, sock, base)
		}
		os.RemoveAll(base)
	})
	return base
}

// RemoveContainers force-removes every container whose root label lies
// under base: the test's own, so the engine does not fill up.
func RemoveContainers(t testing.TB, sock, base string) {
	cli, err := client.New(client.WithHost("unix://" + sock))
	if err != nil {
		return
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", labelRoot)})
	if err != nil {
		return
	}
	for _, c := range res.Items {
		if r := c.Labels[labelRoot]; r == base || strings.HasPrefix(r, base+"/") {
			cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true})
		}
	}
}

// Labelled lists containers (running or not) whose root label is root.
func Labelled(t testing.TB, cli *client.Client, root string) []string {
	t.Helper()
	res, err := cli.ContainerList(context.Background(), client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", labelRoot+"="+root)})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range res.Items {
		ids = append(ids, c.ID)
	}
	return ids
}

// ImportImage imports Image into the engine behind cli from the host's
// busybox-static (what scripts/dockerd-test does), for engines a test
// starts itself.
func ImportImage(t testing.TB, cli *client.Client) {
	t.Helper()
	ImportImageWith(t, cli, Image, 0o755, nil)
}

// ImportImageWith imports a busybox image like Image as ref, with its
// root directory ("./" of the layer) at mode root and the extra
// directories dirs (e.g. "run/": 0o700), for images that are broken in
// one way.
func ImportImageWith(t testing.TB, cli *client.Client, ref string, root fs.FileMode, dirs map[string]fs.FileMode) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatalf("busybox-static: %v", err)
	}
	now := time.Now()
	tw.WriteHeader(&tar.Header{Name: "./", Typeflag: tar.TypeDir, Mode: int64(root.Perm()), ModTime: now})
	tw.WriteHeader(&tar.Header{Name: "bin/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: now})
	tw.WriteHeader(&tar.Header{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777, ModTime: now})
	names := make([]string, 0, len(dirs))
	for name := range dirs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeDir, Mode: int64(dirs[name].Perm()), ModTime: now})
	}
	tw.WriteHeader(&tar.Header{Name: "bin/busybox", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(bb)), ModTime: now})
	tw.Write(bb)
	for _, app := range []string{"sh", "ls", "cat", "echo", "sleep", "id", "touch", "mkdir", "rm", "true", "head", "tail", "wc", "stat", "df", "grep"} {
		tw.WriteHeader(&tar.Header{Name: "bin/" + app, Typeflag: tar.TypeSymlink, Linkname: "busybox", Mode: 0o777, ModTime: now})
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rc, err := cli.ImageImport(ctx, client.ImageImportSource{Source: &buf, SourceName: "-"}, ref, client.ImageImportOptions{})
	if err != nil {
		t.Fatalf("import %s: %v", ref, err)
	}
	io.Copy(io.Discard, rc)
	rc.Close()
	if _, err := cli.ImageInspect(ctx, ref); err != nil {
		t.Fatalf("import %s: %v", ref, err)
	}
}
