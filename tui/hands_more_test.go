package tui

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/moby/moby/client"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/engine/hands/handstest"
	"github.com/wardenhq/warden/themes"
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
	c.wait("No Docker Engine or Podman socket found", "sudo systemctl start docker", "Engine socket path", "Podman as root", "drops the container's ulimits")
	// Rootless Podman (systemctl --user start podman.socket) is not
	// offered: init refuses it.
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

// TestHandsWizardSocketErrorSaidOnce: at 80 columns a socket path that
// is not there is refused once, under the form, broken only at spaces,
// saying what went wrong and what to do (no CLI flag: this is the
// console). A select left on its placeholder says so the same way.
func TestHandsWizardSocketErrorSaidOnce(t *testing.T) {
	// One engine is always offered, so the frame does not depend on the
	// machine's engines: a socket that listens (it is never dialled here).
	t.Setenv("WARDEN_TEST_DOCKER", listenUnix(t, t.TempDir()+"/e.sock").Addr().String())
	t.Setenv("WARDEN_TEST_PODMAN", "")
	e := newEngine(t)
	dir := t.TempDir()
	c := startConsoleSize(t, e, 80, 24)
	c.keys("5", "i")
	c.wait("Hands init 1/5 · root")
	c.keys(dir + "/r")
	c.wait("is new and its ancestors are safe")
	c.keys("enter")
	c.wait("Hands init 2/5 · engine socket", "other path…")
	c.keys("enter") // the placeholder is no choice
	c.wait("✗ choose an engine socket (there is no default)")
	c.downTo(len(engine.HandsSocketCandidates()) + 1)
	c.keys("enter")
	c.wait("Engine socket path")
	const missing = "/run/warden-test-nowhere/docker.sock"
	c.keys(missing)
	c.wait("no engine socket at " + missing)
	c.keys("enter") // refused: the form stays
	view := c.quit()

	if n := strings.Count(view, "no engine socket at"); n != 1 {
		t.Errorf("the socket error is said %d times, want once:\n%s", n, view)
	}
	if strings.Contains(view, "there is no default") {
		t.Errorf("the select's error outlived the choice:\n%s", view)
	}
	if strings.Contains(view, "--engine-socket") {
		t.Errorf("the console's error names a CLI flag:\n%s", view)
	}
	lines := strings.Split(view, "\n")
	var block []string
	for i, l := range lines {
		if w := textWidth(l); w > 80 {
			t.Errorf("row %d is %d cells wide at 80 columns: %q", i, w, l)
		}
		if strings.HasPrefix(l, "✗ no engine socket") {
			block = append(block, strings.TrimPrefix(l, "✗ "))
			for _, m := range lines[i+1:] {
				if !strings.HasPrefix(m, "  ") || strings.TrimSpace(m) == "" {
					break
				}
				block = append(block, strings.TrimSpace(m))
			}
		}
	}
	want := e.ValidateHandsSocket(missing).Error()
	if got := strings.Join(block, " "); got != want {
		t.Errorf("the error's rows, joined at spaces:\n%q\nwant the whole error, broken only at spaces:\n%q", got, want)
	}
	if len(block) < 2 {
		t.Errorf("a %d-cell error in %d rows at 80 columns", len(want), len(block))
	}
	for _, s := range []string{"start the engine", "give the path"} {
		if !strings.Contains(want, s) {
			t.Errorf("the error does not say what to do (%q): %s", s, want)
		}
	}
	c.golden(view)
}

// TestSlashFiltersHands: / filters the Hands roots as it does the other
// lists: the title says how many of how many, the cursor lands on a root
// the filter leaves (what c copies and s asks about), a filter leaving
// none says so and s/c act on nothing, and esc shows every root again.
func TestSlashFiltersHands(t *testing.T) {
	sock := handsDocker(t)
	base := handsBase(t, sock)
	e := newEngine(t)
	ctx := context.Background()
	for _, r := range []struct{ name, access string }{{"alpha", engine.HandsAccessFiles}, {"beta", engine.HandsAccessFiles}, {"gamma", engine.HandsAccessNone}} {
		if _, err := e.HandsInit(ctx, "local:test", engine.HandsInitOptions{Root: base + "/" + r.name, EngineSocket: sock, Image: handstest.Image, Access: r.access}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var copied []string
	c := startConsoleWith(t, e, func(o *Options) {
		o.Copy = func(seq string) {
			b, _ := base64.StdEncoding.DecodeString(strings.TrimSuffix(strings.TrimPrefix(seq, "\x1b]52;c;"), "\x07"))
			mu.Lock()
			copied = append(copied, string(b))
			mu.Unlock()
		}
	})
	c.keys("5")
	c.wait("Hands roots (3)", "container running")
	c.keys("/")
	c.wait("filter ›")
	c.keys("beta", "enter")
	c.wait("Hands roots · filter beta (esc clears) · 1 of 3")
	c.keys("c")
	c.wait("copied hands root")

	// Nothing left: said, and s and c act on no root.
	c.keys("/")
	for range "beta" {
		c.tm.Send(keyBackspace)
	}
	c.keys("zzz", "enter")
	c.wait("filter zzz (esc clears) · 0 of 3", "no match for zzz")
	c.keys("c", "s", "esc")
	c.wait("Hands roots (3)")

	// From the last root, a filter that hides it moves the cursor to
	// the one it leaves.
	c.keys("G", "/", "alpha", "enter")
	c.wait("filter alpha (esc clears) · 1 of 3")
	c.keys("c")
	c.wait("copied hands root")
	c.keys("esc")
	c.wait("Hands roots (3)")
	c.keys("/", "access none", "enter")
	c.wait("filter access none (esc clears) · 1 of 3")
	view := maskHands(c.final(), sock)

	mu.Lock()
	defer mu.Unlock()
	if want := []string{base + "/beta", base + "/alpha"}; !slices.Equal(copied, want) {
		t.Errorf("c copied %q, want %q (nothing while no root was shown)", copied, want)
	}
	if strings.Contains(view, "asking the Docker engine") {
		t.Errorf("s asked about a root the filter hid:\n%s", view)
	}
	row := "▸ ready     /tmp/warden-tui-hands-XXXXXXXX/gamma"
	if !strings.Contains(view, row) || strings.Contains(view, "/alpha") || strings.Contains(view, "/beta") {
		t.Errorf("filtered on access none, want only gamma, selected (%q):\n%s", row, view)
	}
}

// TestHandsListScrolls: with more roots than rows, the cursor's row is
// always drawn (G shows the last root), and the offset is valid again
// once a filter shrinks the list: every root it leaves is shown.
func TestHandsListScrolls(t *testing.T) {
	now := time.Now()
	sh := &shared{th: themes.NoColor(), opts: Options{Now: func() time.Time { return now }}}
	p := newHandsPane(sh)
	var rs []engine.HandsRecord
	for i := range 30 {
		rs = append(rs, engine.HandsRecord{Root: fmt.Sprintf("/srv/hands/task%02d", i), Phase: engine.HandsPhaseReady, Access: engine.HandsAccessFiles, Updated: now})
	}
	p.apply(rs, "")
	p.resize(80, 10)
	p.update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("G")})
	view := p.view(80, 10)
	if !strings.Contains(view, "▸ ready     /srv/hands/task29") {
		t.Errorf("G: the last root is not drawn selected:\n%s", view)
	}
	p.setQuery("task2")
	view = p.view(80, 10)
	for i := 23; i < 30; i++ { // the last 7 of the 10 matches fill the 7 rows
		if !strings.Contains(view, fmt.Sprintf("/srv/hands/task%02d ", i)) {
			t.Errorf("task%02d not drawn after the filter:\n%s", i, view)
		}
	}
	if !strings.Contains(view, "· 10 of 30") || !strings.Contains(view, "▸ ready     /srv/hands/task29") || strings.Contains(view, "task19") {
		t.Errorf("filter task2 from the bottom:\n%s", view)
	}
	p.update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("g")})
	if view = p.view(80, 10); !strings.Contains(view, "▸ ready     /srv/hands/task20") {
		t.Errorf("g under the filter lands on the first match (task20):\n%s", view)
	}
}

// privateParentBase is a new dir whose every ancestor only root or this
// user can write (the home dir, else the package's folder; not /tmp),
// where the engine may create a root's missing parent. The shorter of the
// two: the wizard's lines the test waits for must not wrap, wherever the
// repo is cloned (CI's clone is deeper than this machine's).
func privateParentBase(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if home, err := os.UserHomeDir(); err == nil && filepath.IsAbs(home) && len(home) < len(wd) {
		wd = home
	}
	dir, err := os.MkdirTemp(wd, ".warden-parent-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	for d := dir; ; d = filepath.Dir(d) {
		if fi, err := os.Lstat(d); err != nil || fi.Mode().Perm()&0o022 != 0 {
			t.Skipf("%s is group- or world-writable: no private dir to test in", d)
		}
		if d == "/" {
			return dir
		}
	}
}

// A root whose parent is missing: enter offers to create it, saying
// where and with which mode; Back creates nothing and keeps the path,
// Create makes it 0700 and goes on. Under /tmp (world-writable) nothing
// is offered, and the refusal says why. The operator need not go to
// another terminal for mkdir -p.
func TestHandsInitWizardCreatesMissingParent(t *testing.T) {
	base := privateParentBase(t)
	parent := filepath.Join(base, "hands")
	root := filepath.Join(parent, "task1")
	e := newEngine(t)
	c := startConsole(t, e)
	c.keys("5", "i")
	c.wait("Hands init 1/5 · root")
	c.keys(root)
	c.wait("does not exist yet: enter offers to create it")
	c.keys("enter")
	c.wait("Hands init 1/5 · create the parent", "Create "+parent+"?", "mode 0700", fmt.Sprintf("uid %d", os.Geteuid()), "Create", "Back")
	c.keys("right", "enter") // Back
	c.wait("Hands init 1/5 · root", "does not exist yet: enter offers to create it")
	if _, err := os.Lstat(parent); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Back created %s: %v", parent, err)
	}
	c.keys("enter")
	c.wait("Create " + parent + "?")
	c.keys("enter") // Create, where the focus starts
	c.wait("Hands init 2/5 · engine socket")
	fi, err := os.Lstat(parent)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the parent: %v %v", fi, err)
	}
	if _, err := os.Lstat(root); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the root itself was created before init: %v", err)
	}
	c.keys("esc")
	c.wait("hands init cancelled")

	if fi, err := os.Stat("/tmp"); err != nil || fi.Mode().Perm()&0o002 == 0 {
		t.Skip("/tmp is not world-writable here")
	}
	c.keys("i")
	c.wait("Hands init 1/5 · root")
	for range root {
		c.tm.Send(keyBackspace)
	}
	c.keys("/tmp/warden-parent-never-made/task1")
	c.wait("not create it: /tmp is", "group- or world-writable (mode 1777)")
	c.keys("enter")
	view := c.quit()
	if !strings.Contains(view, "Hands init 1/5 · root") || strings.Contains(view, "Create /tmp") {
		t.Errorf("enter moved on from a parent under /tmp:\n%s", view)
	}
	if _, err := os.Lstat("/tmp/warden-parent-never-made"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("created under /tmp: %v", err)
	}
}
