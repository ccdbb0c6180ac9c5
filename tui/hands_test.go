package tui

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/teatest"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/engine/hands/handstest"
)

// handsBase makes a dir for hands roots under /tmp (a root-owned sticky
// dir is a safe ancestor) with a name of fixed length, so frames that
// show a root are stable once masked. Its containers go when the test
// ends.
func handsBase(t *testing.T, sock string) string {
	t.Helper()
	dir := fmt.Sprintf("/tmp/warden-tui-hands-%08x", rand.Uint32())
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() {
		handstest.RemoveContainers(t, sock, dir)
		os.RemoveAll(dir)
	})
	return dir
}

// handsDocker is the test engine, offered by HandsSocketCandidates.
func handsDocker(t *testing.T) string {
	t.Helper()
	sock := handstest.Docker(t) // skips outside CI without an engine, with why
	t.Setenv("WARDEN_TEST_DOCKER", sock)
	return sock
}

var (
	reHandsBase = regexp.MustCompile(`/tmp/warden-tui-hands-[0-9a-f]{8}`)
	reShortID   = regexp.MustCompile(`\b[0-9a-f]{12}\b`)
	reImageID   = regexp.MustCompile(`sha256:[0-9a-f]+`)
)

// maskHands hides what differs between runs and machines in a hands
// frame: the root's dir, the engine socket and container ids.
func maskHands(view, sock string) string {
	view = strings.ReplaceAll(view, sock, "/SOCKET")
	view = reHandsBase.ReplaceAllString(view, "/tmp/warden-tui-hands-XXXXXXXX")
	view = reImageID.ReplaceAllStringFunc(view, func(m string) string { return "sha256:" + strings.Repeat("I", len(m)-7) })
	return reShortID.ReplaceAllString(view, "CONTAINER-ID")
}

// quit quits with ctrl+c (q would be typed into a form) and returns the
// last frame, normalized.
func (c *console) quit() string {
	c.t.Helper()
	c.tm.Send(tea.KeyMsg{Type: tea.KeyCtrlC})
	m := c.tm.FinalModel(c.t, teatest.WithFinalTimeout(10*time.Second))
	return normalize(m.(*App).View())
}

// downTo presses down until the select's option at index i (0 being the
// "choose…" placeholder) is under the cursor.
func (c *console) downTo(i int) {
	for range i {
		c.keys("down")
	}
}

// initThroughWizard types the init wizard through to its confirmation.
func initThroughWizard(t *testing.T, c *console, sock, root, access string) {
	t.Helper()
	c.keys("5")
	c.wait("Hands roots")
	c.keys("i")
	c.wait("Hands init 1/5 · root", "type the new root's absolute path")
	c.keys(root)
	c.wait("is new and its ancestors are safe")
	c.keys("enter")
	c.wait("Hands init 2/5 · engine socket", "choose the engine's socket (Docker or Podman)…", "other path…")
	cands := engine.HandsSocketCandidates()
	want, _ := os.Stat(sock)
	i := slices.IndexFunc(cands, func(c string) bool { fi, err := os.Stat(c); return err == nil && os.SameFile(fi, want) })
	if i < 0 {
		t.Fatalf("the test engine %s is not among the candidates %v", sock, cands)
	}
	c.keys("enter") // the placeholder is no choice
	c.wait("choose an engine socket (there is no default)")
	c.downTo(i + 1)
	c.keys("enter")
	c.wait("Hands init 3/5 · image", "choose a local image…")
	ims, err := c.e.HandsImages(context.Background(), sock)
	if err != nil {
		t.Fatal(err)
	}
	j := slices.IndexFunc(ims, func(im engine.HandsImage) bool { return im.Ref == handstest.Image })
	if j < 0 {
		t.Fatalf("%s not among %v", handstest.Image, ims)
	}
	c.downTo(j + 1)
	c.keys("enter")
	c.wait("Hands init 4/5 · access", "files: the workspace may be read and written")
	if access == engine.HandsAccessFiles {
		c.keys("down")
	} else {
		c.downTo(2)
	}
	c.keys("enter")
	c.wait("Hands init 5/5 · confirm", "Summary", "Set up this hands root?", "access  "+access)
}

// The init wizard typed through to ready against the real test engine:
// four check marks, and the engine agrees; then x finishes it.
func TestHandsInitWizard(t *testing.T) {
	sock := handsDocker(t)
	root := handsBase(t, sock) + "/task1"
	e := newEngine(t)
	c := startConsole(t, e)
	initThroughWizard(t, c, sock, root, engine.HandsAccessFiles)
	c.keys("y")
	c.wait("Hands init · ready", "✓ ready: container")
	c.keys("x") // straight on to the finish wizard, this root chosen
	c.wait("Hands finish · confirm", "Finish "+root+"?")
	rep, err := e.HandsStatus(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Phase != "ready" || rep.Container.State != "running" || !rep.Container.LabelOK || len(rep.Drift) != 0 {
		t.Errorf("after the wizard: %+v", rep)
	}
	p, _, err := e.Policy("hands:" + root)
	if err != nil || !p.Workspace.Read || !p.Workspace.Write {
		t.Errorf("access files policy: %+v %v", p, err)
	}
	c.keys("esc")
	// The row shows the container's live state once the engine answered.
	c.wait("hands finish cancelled: nothing was done", "container running")
	c.golden(maskHands(c.final(), sock))
}

// The frame at ready, with its four check marks.
func TestHandsInitWizardReady(t *testing.T) {
	sock := handsDocker(t)
	root := handsBase(t, sock) + "/task1"
	e := newEngine(t)
	c := startConsole(t, e)
	initThroughWizard(t, c, sock, root, engine.HandsAccessNone)
	c.keys("y")
	c.wait("Hands init · ready", "✓ ready: container")
	view := maskHands(c.final(), sock)
	for _, want := range []string{"✓ prepared", "✓ creating", "✓ running", "✓ ready", "✓ ready: container CONTAINER-ID from " + handstest.Image + ", access none"} {
		if !strings.Contains(view, want) {
			t.Errorf("missing %q:\n%s", want, view)
		}
	}
	list, err := e.HandsList()
	if err != nil || len(list) != 1 || list[0].Phase != "ready" || list[0].Access != "none" {
		t.Errorf("known roots: %+v %v", list, err)
	}
	c.golden(view)
}

// The finish wizard, on a root set up without the console: it ends at
// finished and the engine agrees.
func TestHandsFinishWizard(t *testing.T) {
	sock := handsDocker(t)
	base := handsBase(t, sock)
	e := newEngine(t)
	ctx := context.Background()
	roots := []string{base + "/a", base + "/b"}
	for _, r := range roots {
		if _, err := e.HandsInit(ctx, "local:test", engine.HandsInitOptions{Root: r, EngineSocket: sock, Image: handstest.Image, Access: engine.HandsAccessFiles}); err != nil {
			t.Fatal(err)
		}
	}
	c := startConsole(t, e)
	c.keys("5")
	c.wait("Hands roots (2)")
	c.keys("down", "up", "x") // x on a: no asking which root again
	c.wait("Finish "+roots[0]+"?", "Finish", "Cancel")
	c.keys("y")
	c.wait("Hands finish · finished", "✓ finished: container")
	view := maskHands(c.final(), sock)
	for _, want := range []string{"✓ receipt", "✓ engine", "✓ stopped", "✓ finished", "phase finished written, every grant revoked", "the stopped container stays on the engine"} {
		if !strings.Contains(view, want) {
			t.Errorf("missing %q:\n%s", want, view)
		}
	}
	rep, err := e.HandsStatus(ctx, roots[0])
	if err != nil {
		t.Fatal(err)
	}
	if rep.Phase != "finished" || rep.Container.State == "running" {
		t.Errorf("after finish: %+v", rep)
	}
	if rep, _ := e.HandsStatus(ctx, roots[1]); rep.Phase != "ready" || rep.Container.State != "running" {
		t.Errorf("the other root was touched: %+v", rep)
	}
	c.golden(view)
}

// A root that breaks the rules is refused as it is typed, and enter does
// not move on.
func TestHandsInitWizardBadRoot(t *testing.T) {
	e := newEngine(t)
	// A relative path is taken from the console's folder, as in the
	// add-module prompt, and the absolute path is what is checked.
	dir := t.TempDir()
	here, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir) // back to here before the golden is read
	c := startConsole(t, e)
	c.keys("5", "i")
	c.wait("Hands init 1/5 · root")
	c.keys("hands/task1")
	c.wait(`✗ hands root "`+dir+`/hands/task1"`, "does not exist yet", "(mode 1777)", "no ancestor is")
	for range "hands/task1" {
		c.tm.Send(keyBackspace)
	}
	c.keys("task1")
	c.wait("✓ " + dir + "/task1 is new and its ancestors are safe")
	for range "task1" {
		c.tm.Send(keyBackspace)
	}
	os.Chdir(here)
	// A missing parent under /tmp is not offered to be created.
	c.keys("/tmp/nonexistent-warden-parent/task1")
	c.wait("does not exist yet", "create it first (mkdir -p /tmp/nonexistent-warden-parent)")
	c.keys("enter")
	c.keys(",")
	c.wait("contains a comma")
	c.tm.Send(keyBackspace)
	c.wait("mkdir -p /tmp/nonexistent-warden-parent")
	view := c.quit()
	if !strings.Contains(view, "Hands init 1/5 · root") {
		t.Errorf("enter moved on from a bad root:\n%s", view)
	}
	c.golden(view)
}

// Esc cancels the form: nothing is created.
func TestHandsInitWizardEscCancels(t *testing.T) {
	e := newEngine(t)
	c := startConsole(t, e)
	c.keys("5", "i")
	c.wait("Hands init 1/5 · root")
	c.keys("esc")
	c.wait("hands init cancelled: nothing was done", "Hands roots (0)")
	if list, _ := e.HandsList(); len(list) != 0 {
		t.Errorf("roots after esc: %+v", list)
	}
	c.final()
}

// An engine that cannot be reached: the image step says so and offers
// another socket.
func TestHandsInitWizardEngineUnreachable(t *testing.T) {
	e := newEngine(t)
	dir := t.TempDir()
	c := startConsole(t, e)
	c.keys("5", "i")
	c.wait("Hands init 1/5 · root")
	c.keys(dir + "/r")
	c.wait(dir + "/r is new and its ancestors are safe")
	c.keys("enter")
	if len(engine.HandsSocketCandidates()) > 0 {
		c.wait("Hands init 2/5 · engine socket", "other path…")
		c.downTo(len(engine.HandsSocketCandidates()) + 1)
		c.keys("enter")
	} // else: no list, straight to the path (and how to start an engine)
	c.wait("Engine socket path")
	c.keys(dir + "/none.sock")
	c.wait("no engine socket at " + dir + "/none.sock")
	for range dir + "/none.sock" {
		c.tm.Send(keyBackspace)
	}
	// A socket nobody answers on.
	l := listenUnix(t, dir+"/dead.sock")
	l.Close()
	c.keys(dir + "/dead.sock")
	c.wait("is a socket")
	c.keys("enter")
	c.wait("✗ the engine's images could not be listed", "cannot reach a container engine at", "dead.sock", "enter: choose another socket")
	c.keys("enter")
	c.wait("Hands init 2/5 · engine socket")
	c.keys("esc")
	c.wait("hands init cancelled")
	c.final()
}

// Cancelling during the run: ctrl+c (and esc) ask first; yes cancels the
// context, the engine's failure path stops the container and writes
// evidence, and the view shows the error, the evidence path and what to
// do next.
func TestHandsInitWizardCancelShowsEvidence(t *testing.T) {
	sock := handsDocker(t)
	// TEST-ONLY hook of engine/hands (PauseEnv): init waits after the
	// container started until its context ends.
	t.Setenv("WARDEN_HANDS_TEST_PAUSE_AFTER", "started")
	root := handsBase(t, sock) + "/task1"
	e := newEngine(t)
	c := startConsole(t, e)
	initThroughWizard(t, c, sock, root, engine.HandsAccessFiles)
	c.keys("y")
	c.wait("Hands init · running", "✓ creating", "started: generation")
	c.tm.Send(tea.KeyMsg{Type: tea.KeyCtrlC})
	c.wait("Cancel the init?", "y: cancel it · n: go on")
	c.keys("n")
	c.wait("esc or ctrl+c cancels")
	c.keys("esc")
	c.wait("Cancel the init?")
	c.keys("y")
	c.wait("Hands init · failed", "interrupted: cancelled from the console by local:test",
		"evidence "+root+"/evidence/", "says stopped true,", "required false",
		"press x to finish this one", "✗ running")
	rep, err := e.HandsStatus(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Phase != "failed" || rep.Container.State == "running" || rep.Failure == nil || !rep.Failure.Stopped {
		t.Errorf("after cancelling: %+v", rep)
	}
	c.golden(maskHands(c.final(), sock))
}

// x on a failed root (here: an init cancelled once its receipt exists,
// before any container) closes its books.
func TestHandsFinishWizardFailedRoot(t *testing.T) {
	sock := handsDocker(t)
	root := handsBase(t, sock) + "/task1"
	e := newEngine(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := e.HandsInit(ctx, "local:test", engine.HandsInitOptions{Root: root, EngineSocket: sock, Image: handstest.Image, Access: engine.HandsAccessNone,
		Progress: func(step, _ string) {
			if step == "prepared" {
				cancel()
			}
		}})
	var failed *engine.HandsInitFailedError
	if !errors.As(err, &failed) {
		t.Fatalf("init cancelled after its receipt: %v", err)
	}
	c := startConsole(t, e)
	c.keys("5")
	c.wait("failed")
	c.keys("x") // on the failed root: straight to confirming it
	c.wait("Finish " + root + "?")
	c.keys("y")
	c.wait("Hands finish · finished", "– stopped   skipped: no container was created", "✓ finished: no container was created")
	if rep, _ := e.HandsStatus(context.Background(), root); rep.Phase != "finished" {
		t.Errorf("after finishing the failed root: %+v", rep)
	}
	c.final()
}

// Progress reaches the console a frame at a time, never a message per
// step.
func TestProgressJobBatches(t *testing.T) {
	j := newProgressJob(context.Background())
	for i := range 100 {
		j.push("step", fmt.Sprint(i))
	}
	m := j.next()().(jobProgressMsg)
	if len(m.steps) != 100 || m.done || m.steps[99][1] != "99" {
		t.Fatalf("first batch: %d steps, done %v", len(m.steps), m.done)
	}
	j.push("last", "")
	j.end(nil, errors.New("boom"))
	m = j.next()().(jobProgressMsg)
	if len(m.steps) != 1 || !m.done {
		t.Fatalf("last batch: %+v", m)
	}
	select {
	case <-j.ended:
	default:
		t.Error("ended is not closed")
	}
}

// The engine's steps move the phases along; a finish with nothing to stop
// skips that phase and says why.
func TestHandsProgressRows(t *testing.T) {
	p := newProgress(wizInit)
	for _, s := range []string{"root", "engine", "layout", "lease", "prepared", "image", "creating", "created"} {
		p.step(s, "d-"+s)
	}
	if p.rows[0].state != rowDone || p.rows[1].state != rowPending || p.cur != 1 || p.rows[1].detail != "created: d-created" {
		t.Errorf("mid-creating: %+v cur %d", p.rows, p.cur)
	}
	for _, s := range []string{"label", "started", "running", "policy", "ready"} {
		p.step(s, "d")
	}
	for _, r := range p.rows {
		if r.state != rowDone {
			t.Errorf("row %s not done", r.name)
		}
	}
	f := newProgress(wizFinish)
	for _, s := range []string{"receipt", "engine", "finished"} {
		f.step(s, "d")
	}
	f.finishDone(engine.HandsFinishResult{Note: "the container was already gone"})
	if f.rows[2].state != rowSkipped || f.rows[2].detail != "the container was already gone" || f.rows[3].state != rowDone {
		t.Errorf("finish without a stop: %+v", f.rows)
	}
	g := newProgress(wizInit)
	g.step("root", "d")
	g.fail("boom")
	if g.rows[0].state != rowFailed {
		t.Errorf("failed init: %+v", g.rows)
	}
}

// listenUnix listens on a unix socket that stays on disk when closed.
func listenUnix(t *testing.T, path string) *net.UnixListener {
	t.Helper()
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	t.Cleanup(func() { l.Close() })
	return l
}

// A failed init at 80x24 (a 20-row body) still shows the phases, the
// error, the evidence path and what to do next.
func TestHandsFailureViewSmall(t *testing.T) {
	e := newEngine(t)
	z := newWizard(testShared(e), wizInit, 80, 20)
	z.root, z.socket, z.image, z.access = "/srv/hands/task1", "/run/docker.sock", "busybox:1.36", "files"
	z.prog, z.stage = newProgress(wizInit), wsDone
	z.prog.step("root", "ok")
	z.err = &engine.HandsInitFailedError{Root: z.root, Cause: &engine.HandsFixError{Problem: `image "busybox:1.36" is gone`, Fix: "load it first, then init a new root"}}
	z.prog.fail(z.err.Error())
	view := z.view(80, 20)
	lines := strings.Split(view, "\n")
	if len(lines) != 20 {
		t.Errorf("%d lines", len(lines))
	}
	for _, want := range []string{"✗ prepared", "evidence /srv/hands/task1/evidence/", "• load it first, then init a new root", "x finishes it"} {
		if !strings.Contains(view, want) {
			t.Errorf("missing %q:\n%s", want, view)
		}
	}
	for i, l := range lines {
		if w := widthOf(l); w > 80 {
			t.Errorf("line %d is %d wide", i, w)
		}
	}
}

// The last step starts on Init: after four filled steps, enter sets the
// root up, not cancels it (a cancel, said only in a status line that
// fades, would go unseen).
func TestHandsInitWizardConfirmEnterInits(t *testing.T) {
	sock := handsDocker(t)
	root := handsBase(t, sock) + "/task1"
	e := newEngine(t)
	c := startConsole(t, e)
	initThroughWizard(t, c, sock, root, engine.HandsAccessFiles)
	c.keys("enter")
	c.wait("Hands init · ready", "✓ ready: container")
	if list, err := e.HandsList(); err != nil || len(list) != 1 || list[0].Phase != "ready" {
		t.Errorf("enter on the last step: roots %+v %v", list, err)
	}
	c.final()
}

// Cancel on the last step: the pane says so (the status line fades), and
// i starts over with every answer kept, each checked again.
func TestHandsInitWizardCancelSaysSoAndKeepsAnswers(t *testing.T) {
	sock := handsDocker(t)
	root := handsBase(t, sock) + "/task1"
	e := newEngine(t)
	c := startConsole(t, e)
	initThroughWizard(t, c, sock, root, engine.HandsAccessNone)
	c.keys("right", "enter") // on Cancel
	c.wait("Hands roots (0)", "✗ hands init cancelled: nothing was done · i starts again with what you typed")
	if list, _ := e.HandsList(); len(list) != 0 {
		t.Errorf("roots after Cancel: %+v", list)
	}
	c.keys("i")
	c.wait("Hands init 1/5 · root", root+" is new and its ancestors are safe")
	c.keys("enter")
	c.wait("Hands init 2/5 · engine socket")
	c.keys("enter")
	c.wait("Hands init 3/5 · image")
	c.keys("enter")
	c.wait("Hands init 4/5 · access")
	c.keys("enter")
	c.wait("Hands init 5/5 · confirm", "root    "+root, "image   "+handstest.Image, "access  none")
	c.quit()
}

// Starting over after a socket nobody answers on keeps the root and the
// socket path typed (the path came back as an empty field with its
// placeholder).
func TestHandsInitWizardStartOverKeepsSocketPath(t *testing.T) {
	e := newEngine(t)
	dir := t.TempDir()
	c := startConsole(t, e)
	other := func() {
		if n := len(engine.HandsSocketCandidates()); n > 0 {
			c.wait("Hands init 2/5 · engine socket", "other path…")
			c.downTo(n + 1)
			c.keys("enter")
		}
	}
	c.keys("5", "i")
	c.wait("Hands init 1/5 · root")
	c.keys(dir + "/r")
	c.wait(dir+"/r", "is new and its ancestors")
	c.keys("enter")
	other()
	c.wait("Engine socket path")
	l := listenUnix(t, dir+"/dead.sock")
	l.Close()
	c.keys(dir + "/dead.sock")
	c.wait("is a socket")
	c.keys("enter")
	c.wait("✗ the engine's images could not be listed")
	c.keys("esc")
	c.wait("✗ hands init cancelled: nothing was done")
	c.keys("i")
	c.wait("Hands init 1/5 · root", dir+"/r", "is new and its ancestors")
	c.keys("enter")
	if n := len(engine.HandsSocketCandidates()); n > 0 {
		c.wait("Hands init 2/5 · engine socket", "other path…")
		c.keys("enter") // still on other path…
	}
	c.wait("Engine socket path", dir+"/dead.sock", "is a socket")
	c.quit()
}
