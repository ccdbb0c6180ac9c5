package tui

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/themes"
)

// startAsk starts asker/ask (it asks "Reboot now?") and returns its run.
func startAsk(t *testing.T, e engine.Facade) *engine.RunHandle {
	t.Helper()
	h, err := e.StartRun("local:test", engine.RunRequest{Module: "asker", Hook: "ask", Jail: engine.JailOff})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// The toast at 80 columns keeps its instruction; 2 lands on the oldest
// PENDING request even with the cursor left on a decided one, y answers
// it (not "already decided"), and the cursor moves on to the next
// question, which [ or ] reach too.
func TestRequestsTwoLandsOnOldestPending(t *testing.T) {
	e := newEngine(t)
	askModule(t, e)
	c := startConsoleSize(t, e, 80, 24)
	c.wait("no runs yet")
	h1 := startAsk(t, e)
	c.wait("🔔 request 1 · press 2 to answer")
	c.keys("2", "y")
	c.wait("request 1: approve-once")
	if o := h1.Wait(); !o.OK() {
		t.Fatalf("run 1: %s %s", o.Run.Status, o.Run.Error)
	}
	// The cursor rests on request 1, decided. Two new questions arrive.
	c.keys("1")
	h2 := startAsk(t, e)
	c.wait("🔔 request 2 · press 2 to answer")
	h3 := startAsk(t, e)
	c.wait("🔔 request 3 · press 2 to answer (2 pending)")
	c.keys("2", "y")
	c.wait("request 2: approve-once · 1 more to answer")
	c.keys("]") // the only other pending one: request 3
	c.wait("▸#3")
	c.keys("y")
	c.wait("request 3: approve-once")
	for i, h := range []*engine.RunHandle{h2, h3} {
		// The run's stream says who approved it, as it would a denial.
		want := fmt.Sprintf(`request %d (operator.confirm {"message":"Reboot now?"}): approve-once by local:test`, i+2)
		if o := h.Wait(); !o.OK() || !strings.Contains(streamText(t, e, h.ID), "answer: true") || !strings.Contains(streamText(t, e, h.ID), want) {
			t.Errorf("run %d: %s %s\n%s", i+2, o.Run.Status, o.Run.Error, streamText(t, e, h.ID))
		}
	}
	rs, err := e.Requests(engine.RequestFilter{All: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Decision == nil || r.Decision.Verdict != engine.ApproveOnce || r.Decision.By != "local:test" {
			t.Errorf("request %d: %+v", r.ID, r.Decision)
		}
	}
	view := c.final()
	if !strings.Contains(view, "0 pending") {
		t.Errorf("still pending:\n%s", view)
	}
	// Ages straddle 10s on a slow machine (-race): one width for them.
	view = regexp.MustCompile(` +N+s+ by `).ReplaceAllString(view, " AGE by ")
	view = regexp.MustCompile(`\(N+s+ ago\)`).ReplaceAllString(view, "(AGE ago)")
	c.golden(view)
}

// A viewer sees the question but no decision hints; y still reaches the
// engine, which refuses it (and receipts the attempt).
func TestRequestsViewerHasNoDecisionHints(t *testing.T) {
	e := newEngine(t)
	askModule(t, e)
	detach := e.AttachOperator() // an operator elsewhere; the viewer watches
	defer detach()
	h := startAsk(t, e)
	defer h.Cancel()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if rs, _ := e.Requests(engine.RequestFilter{}); len(rs) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no request")
		}
		time.Sleep(20 * time.Millisecond)
	}
	app := New(e, Options{Theme: themes.NoColor(), Actor: "ssh:SHA256:AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcdefg",
		Viewer: true, NoAttach: true, Role: "viewer", Jail: engine.JailOff, Bell: func() {},
		ActorName: func(a engine.Actor) string { return "alice@laptop" }})
	d := &driver{t: t, app: app}
	t.Cleanup(app.Close)
	d.send(teaSize(100, 30))
	d.keys("2")
	view := d.view()
	for _, bad := range []string{"approve", "deny"} {
		if strings.Contains(view, bad) {
			t.Errorf("a viewer is shown %q:\n%s", bad, view)
		}
	}
	if !strings.Contains(view, "alice@laptop · viewer") {
		t.Errorf("the header does not say who this is:\n%s", view)
	}
	golden.RequireEqual(t, []byte(view))
	d.keys("y")
	if v := d.view(); !strings.Contains(v, "may watch but not approve") {
		t.Errorf("y by a viewer:\n%s", v)
	}
	if rs, _ := e.Requests(engine.RequestFilter{}); len(rs) != 1 {
		t.Errorf("a viewer's y decided: %d pending", len(rs))
	}
}

// Esc clears the search and the filter; search and filter belong to a
// run (the next run shown starts without them, and the first gets its
// own back); help lists N once; q in help closes help; M shows every
// message whole.
func TestStreamsEscPerRunStateMessagesAndHelp(t *testing.T) {
	e := newEngine(t)
	streamModule(t, e)
	runHook(t, e, "chatty", "lines")
	runHook(t, e, "chatty", "lines")
	d := newDriver(t, e, 100, 30)
	d.keys("right", "l", "l", "/", "disk", "enter")
	if v := d.view(); !strings.Contains(v, "≥warn") || !strings.Contains(v, "/disk") {
		t.Fatalf("filter and search not set:\n%s", v)
	}
	d.keys("esc")
	if v := d.view(); strings.Contains(v, "≥warn") || strings.Contains(v, "/disk") || !strings.Contains(v, "search and filter cleared") {
		t.Errorf("esc left the search or filter:\n%s", v)
	}
	d.keys("l", "l", "/", "disk", "enter")
	d.keys("left", "down") // the older run
	if v := d.view(); strings.Contains(v, "≥warn") || strings.Contains(v, "/disk") {
		t.Errorf("the next run inherited the search or filter:\n%s", v)
	}
	d.keys("up") // back: its own search and filter again
	if v := d.view(); !strings.Contains(v, "≥warn") || !strings.Contains(v, "/disk") {
		t.Errorf("the run lost its search or filter:\n%s", v)
	}
	d.keys("?")
	help := d.view()
	if n := strings.Count(help, "prev match"); n != 1 || strings.Contains(help, "n/N") {
		t.Errorf("help lists N %d times:\n%s", n, help)
	}
	d.keys("q")
	if v := d.view(); strings.Contains(v, "Keys: Streams") || d.app.closed {
		t.Errorf("q in help did not just close it (closed %v):\n%s", d.app.closed, v)
	}
	// An error longer than the line is cut in the status line, kept
	// whole in the message log.
	long := "module x cannot be added: " + strings.Repeat("a very long reason ", 12) + "THE END"
	d.app.sh.errStatus(errString(long))
	if v := d.view(); strings.Contains(v, "THE END") {
		t.Errorf("the status line was not cut:\n%s", v)
	}
	d.keys("M")
	view := d.view()
	if !strings.Contains(view, "Messages (") || !strings.Contains(view, "THE END") || !strings.Contains(view, "search and filter cleared") {
		t.Errorf("the message log:\n%s", view)
	}
	golden.RequireEqual(t, []byte(view))
}

type errString string

func (e errString) Error() string { return string(e) }

// q with a run going asks, naming it; n keeps it going, y quits and
// cancels it.
func TestQuitAsksWhileRunsGo(t *testing.T) {
	e := newEngine(t)
	streamModule(t, e)
	c := startConsole(t, e)
	h := c.startSlowRun()
	c.wait("chatty/slow · running")
	c.keys("q")
	c.wait("quit and cancel 1 run (chatty/slow)? [y/N]")
	c.keys("n")
	c.wait("nothing done")
	if r, _ := e.Run(h.ID); r.Status != engine.RunRunning {
		t.Fatalf("n ended the run: %s", r.Status)
	}
	c.keys("q", "y")
	if m := c.tm.FinalModel(t, teatestFinal()); !m.(*App).closed {
		t.Error("q y did not close the console")
	}
	// The run was cancelled by the operator who quit, and says so.
	if o := h.Wait(); o.Run.Status != engine.RunCancelled || !strings.Contains(o.Run.Error, "cancelled by local:test") {
		t.Errorf("after q y: %s (%s)", o.Run.Status, o.Run.Error)
	}
}

// An empty console says where to start.
func TestEmptyConsoleSaysWhereToStart(t *testing.T) {
	e := newEngine(t)
	d := newDriver(t, e, 100, 30)
	view := d.view()
	if !strings.Contains(view, "4 Modules → enter on a hook") {
		t.Errorf("no start hint:\n%s", view)
	}
	golden.RequireEqual(t, []byte(view))
}

// The add-module prompt takes a path relative to the console's folder.
func TestModulesAddRelativePath(t *testing.T) {
	e := newEngine(t)
	other := newEngine(t)
	addModule(t, other, "rel", map[string]string{"x": "true"}, nil)
	mods, err := other.Modules()
	if err != nil || len(mods) != 1 {
		t.Fatal(mods, err)
	}
	dir := mods[0].Record.Path
	t.Chdir(filepath.Dir(dir))
	d := newDriver(t, e, 100, 30)
	d.keys("4", "a", filepath.Base(dir), "enter")
	for deadline := time.Now().Add(10 * time.Second); ; {
		if ms, _ := e.Modules(); len(ms) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not added:\n%s", d.view())
		}
		time.Sleep(20 * time.Millisecond)
	}
	home, _ := os.UserHomeDir()
	if p, _ := resolvePath("~/x"); p != filepath.Join(home, "x") {
		t.Errorf("~/x resolved to %q", p)
	}
}

func teaSize(w, h int) tea.Msg { return tea.WindowSizeMsg{Width: w, Height: h} }

func teatestFinal() teatest.FinalOpt { return teatest.WithFinalTimeout(10 * time.Second) }

// A pending question shows under the stream of the run that asked it,
// and y (or n with a reason) answers it there.
func TestStreamsAnswerInline(t *testing.T) {
	e := newEngine(t)
	askModule(t, e)
	c := startConsole(t, e)
	c.wait("no runs yet")
	h := startAsk(t, e)
	c.wait("⚠ request 1 asks: operator.confirm: Reboot now? · y approve · n deny")
	c.keys("y")
	c.wait("request 1: approve-once")
	if o := h.Wait(); !o.OK() || !strings.Contains(streamText(t, e, h.ID), "answer: true") {
		t.Fatalf("run 1: %s %s", o.Run.Status, o.Run.Error)
	}
	h2 := startAsk(t, e)
	c.wait("🔔 request 2")
	c.keys("up") // the new run, on top: the selection stayed on run 1
	c.wait("⚠ request 2 asks")
	c.keys("n")
	c.wait("deny: reason")
	c.keys("not now", "enter")
	c.wait("request 2: deny")
	if o := h2.Wait(); !strings.Contains(streamText(t, e, h2.ID), "deny by local:test: not now") {
		t.Errorf("run 2: %s\n%s", o.Run.Status, streamText(t, e, h2.ID))
	}
	view := c.final()
	if strings.Contains(view, "⚠ request") {
		t.Errorf("an answered question still shows:\n%s", view)
	}
	c.golden(view)
}

// Actors: a local user as is; an SSH key by its comment next to a
// fingerprint cut from the middle (both ends tell keys apart); the
// comment alone in a narrow column; hostile comments escaped.
func TestActorLabels(t *testing.T) {
	sh := testShared(nil)
	const fp = "ssh:SHA256:Np3fAbCdEfGhIjKlMnOpQrStUvWxYz0123456789x9Qk"
	if got := sh.actorLabel("local:root"); got != "local:root" {
		t.Errorf("local: %q", got)
	}
	if got := sh.actorLabel(fp); got != "ssh:SHA256:Np3fAb…x9Qk" {
		t.Errorf("unnamed key: %q", got)
	}
	sh.opts.ActorName = func(a engine.Actor) string {
		if a == fp {
			return "alice\x1b[2J"
		}
		return ""
	}
	if got := sh.actorLabel(fp); got != "alice␛[2J (ssh:SHA256:Np3fAb…x9Qk)" {
		t.Errorf("named key: %q", got)
	}
	if got := sh.actorShort(fp); got != "alice␛[2J" {
		t.Errorf("named key, short: %q", got)
	}
	if got := sh.actorShort("ssh:SHA256:other0123456789abcdef"); got != "ssh:SHA256:other0…cdef" {
		t.Errorf("unnamed key, short: %q", got)
	}
}

// TestRequestsFilterNeverHidesTheAnswered: under a / filter, the wheel
// moves among the requests shown only, so y answers the one the list
// shows selected; and when the cursor moves on to a question the filter
// hides, the filter is cleared so that question is shown.
func TestRequestsFilterNeverHidesTheAnswered(t *testing.T) {
	e := newEngine(t)
	askModule(t, e)
	c := startConsole(t, e)
	h1 := startAsk(t, e)
	c.wait("🔔 request 1 · press 2 to answer")
	h2 := startAsk(t, e)
	c.wait("🔔 request 2 · press 2 to answer (2 pending)")
	c.keys("2", "/", "#2", "enter")
	c.wait("filter #2 (esc clears) · 1 of 2")
	c.tm.Send(tea.MouseMsg{Button: tea.MouseButtonWheelUp, Action: tea.MouseActionPress})
	c.tm.Send(tea.MouseMsg{Button: tea.MouseButtonWheelDown, Action: tea.MouseActionPress})
	c.tm.Send(tea.MouseMsg{Button: tea.MouseButtonWheelUp, Action: tea.MouseActionPress})
	c.keys("y")
	c.wait("request 2: approve-once · 1 more to answer · filter cleared to show request 1")
	c.keys("y")
	c.wait("request 1: approve-once")
	for _, h := range []*engine.RunHandle{h1, h2} {
		if o := h.Wait(); !o.OK() {
			t.Errorf("run %s: %s %s", h.ID, o.Run.Status, o.Run.Error)
		}
	}
	rs, err := e.Requests(engine.RequestFilter{All: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Decision == nil || r.Decision.Verdict != engine.ApproveOnce {
			t.Errorf("request %d: %+v", r.ID, r.Decision)
		}
	}
	c.final()
}

// q when the engine says the runs the list shows as going have ended
// (their end not heard yet) waits frames for the news, asks nothing,
// and quits: the tick waits, each look at the engine is its own command.
func TestQuitHearsARunEndedMeanwhile(t *testing.T) {
	e := newEngine(t)
	addModule(t, e, "waits", map[string]string{"long": "exec sleep 60"}, nil)
	d := newDriver(t, e, 120, 30)
	h, err := e.StartRun("local:test", engine.RunRequest{Module: "waits", Hook: "long", Jail: engine.JailOff})
	if err != nil {
		t.Fatal(err)
	}
	d.send(d.run(d.app.waitEvents())...) // the console hears the start
	if len(d.app.streams.runningRuns()) != 1 {
		t.Fatalf("the console does not show the run going:\n%s", d.view())
	}
	h.Cancel() // ... and not the end: no event reader runs
	h.Wait()
	d.keys("q")
	if v := d.view(); strings.Contains(v, "quit and cancel") {
		t.Fatalf("q asked about a run the engine says ended:\n%s", v)
	}
	if !d.app.closed {
		t.Fatalf("q did not quit:\n%s", d.view())
	}
}
