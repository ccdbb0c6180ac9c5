// Package handstest gives tests a real Docker Engine and safe hands roots.
// Only tests import it.
//
// The engine is $WARDEN_TEST_DOCKER when set (scripts/test starts one
// with scripts/dockerd-test); otherwise the helper runs scripts/dockerd-test
// itself. Without an engine a test is skipped, except in CI (CI=true),
// where a missing engine is a failure.
package handstest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

var (
	once    sync.Once
	socket  string
	findErr error
)

// Docker returns the socket of a running test engine with Image loaded.
func Docker(t testing.TB) string {
	t.Helper()
	once.Do(func() { socket, findErr = find() })
	if findErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no Docker Engine for the hands tests (CI needs one: scripts/test starts it with scripts/dockerd-test): %v", findErr)
		}
		t.Skipf("no Docker Engine for the hands tests (run scripts/dockerd-test, or set WARDEN_TEST_DOCKER): %v", findErr)
	}
	return socket
}

func find() (string, error) {
	sock := os.Getenv("WARDEN_TEST_DOCKER")
	if sock == "" {
		script, err := harness()
		if err != nil {
			return "", err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", script)
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
		return "", fmt.Errorf("engine at %s has no %s (scripts/dockerd-test imports it): %v", sock, Image, err)
	}
	return sock, nil
}

// harness finds scripts/dockerd-test above the package dir.
func harness() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "scripts", "dockerd-test"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the test's dir, so no scripts/dockerd-test")
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
