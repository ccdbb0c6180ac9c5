package tui

import (
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/wardenhq/warden/engine"
)

// TestCleanHandOverNeverDrawsACrash: when the process a console is
// attached to lets go on purpose, every frame until the console holds the
// data dir says it is taking over, and none says the engine is gone; a
// real death does say so, and waits for the operator.
func TestCleanHandOverNeverDrawsACrash(t *testing.T) {
	e := newEngine(t)
	next := newEngine(t)
	release := make(chan struct{})
	app := New(e, Options{Theme: testShared(e).th, Actor: "local:test", Jail: engine.JailOff, Bell: func() {},
		AttachedPID: 4242,
		Takeover: func() (engine.Facade, int, error) {
			<-release
			return next, 0, nil
		}})
	t.Cleanup(app.Close)
	d := &driver{t: t, app: app}
	d.send(tea.WindowSizeMsg{Width: 120, Height: 30})

	_, cmd := app.Update(subClosedMsg{err: &engine.EngineGoneError{DataDir: "/d", PID: 4242, Closed: true}})
	if cmd == nil {
		t.Fatal("a clean hand-over started no takeover")
	}
	v := d.view()
	if strings.Contains(v, "GONE") || !strings.Contains(v, "pid 4242 stopped: taking over") {
		t.Fatalf("the frame while taking over after a clean stop:\n%s", v)
	}
	close(release)
	d.send(cmd())
	v = d.view()
	if strings.Contains(v, "GONE") || strings.Contains(v, "4242") || !strings.Contains(v, "took over the data dir") {
		t.Fatalf("the frame after the hand-over:\n%s", v)
	}
}

func TestCrashShowsGone(t *testing.T) {
	e := newEngine(t)
	app := New(e, Options{Theme: testShared(e).th, Actor: "local:test", Jail: engine.JailOff, Bell: func() {},
		AttachedPID: 4242,
		Takeover:    func() (engine.Facade, int, error) { t.Error("took over without asking"); return nil, 0, nil }})
	t.Cleanup(app.Close)
	d := &driver{t: t, app: app}
	d.send(tea.WindowSizeMsg{Width: 120, Height: 30})
	if _, cmd := app.Update(subClosedMsg{err: &engine.EngineGoneError{DataDir: "/d", PID: 4242}}); cmd != nil {
		t.Fatal("a crash started a takeover by itself")
	}
	if v := d.view(); !strings.Contains(v, "ENGINE (pid 4242) GONE") || !strings.Contains(v, "crashed or was killed") {
		t.Fatalf("the frame after a crash:\n%s", v)
	}
}
