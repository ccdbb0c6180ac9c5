package tui

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/moby/moby/client"

	"warden/engine"
	"warden/engine/hands/handstest"
)

// TestHandsWizardWithoutAnEngine: with no engine socket anywhere, the
// wizard offers no list of nothing: it says how to start or install
// Docker (or Podman) and asks for the path.
func TestHandsWizardWithoutAnEngine(t *testing.T) {
	for _, p := range []string{"/run/docker.sock", "/var/run/docker.sock", "/run/podman/podman.sock"} {
		if _, err := os.Stat(p); err == nil {
			t.Skipf("%s exists on this machine: the wizard would offer it", p)
		}
	}
	t.Setenv("WARDEN_TEST_DOCKER", "")
	t.Setenv("WARDEN_TEST_PODMAN", "")
	t.Setenv("XDG_RUNTIME_DIR", "")
	dir := fmt.Sprintf("/tmp/warden-tui-hands-%08x", rand.Uint32())
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	e := newEngine(t)
	c := startConsole(t, e)
	c.keys("5", "i")
	c.wait("Hands init 1/5 · root")
	c.keys(dir+"/task1", "enter")
	c.wait("No Docker Engine or Podman socket found", "sudo systemctl start docker", "Engine socket path")
	c.keys("esc")
	c.wait("cancelled")
	c.final()
	if _, err := os.Stat(dir + "/task1"); err == nil {
		t.Errorf("the wizard created the root before it had an engine")
	}
}

// TestHandsViewerRefusedAtOnce: a viewer's i is refused at the first
// step, not after five.
func TestHandsViewerRefusedAtOnce(t *testing.T) {
	e := newEngine(t)
	c := startConsoleWith(t, e, func(o *Options) { o.NoAttach = true })
	c.keys("5", "i")
	c.wait("setting up a hands root needs an operator")
	view := c.final()
	if strings.Contains(view, "Hands init 1/5") {
		t.Errorf("a viewer got the wizard:\n%s", view)
	}
	c.golden(view)
}

// TestHandsRowShowsDriftAfterStop: after the container is stopped behind
// warden's back, r re-reads the engine: the row shows the drift badge, and
// s shows the drift as text (the CLI's printer), not JSON.
func TestHandsRowShowsDriftAfterStop(t *testing.T) {
	sock := handsDocker(t)
	root := handsBase(t, sock) + "/task1"
	e := newEngine(t)
	ctx := context.Background()
	res, err := e.HandsInit(ctx, "local:test", engine.HandsInitOptions{Root: root, EngineSocket: sock, Image: handstest.Image, Access: engine.HandsAccessFiles})
	if err != nil {
		t.Fatal(err)
	}
	c := startConsole(t, e)
	c.keys("5")
	c.wait("container running", handstest.Image+" @")
	cli := handstest.Client(t, sock)
	if _, err := cli.ContainerStop(ctx, res.ContainerID, client.ContainerStopOptions{}); err != nil {
		t.Fatal(err)
	}
	c.keys("r")
	c.wait("⚠ DRIFT")
	c.keys("s")
	c.wait("drift:", "    fix: ")
	c.keys("esc")
	view := maskHands(c.final(), sock)
	if !strings.Contains(view, "⚠ DRIFT") {
		t.Errorf("no drift badge:\n%s", view)
	}
}
