package tui

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/themes"
)

// console is a console under teatest at 100x30.
type console struct {
	t     *testing.T
	tm    *teatest.TestModel
	app   *App
	e     engine.Facade
	bells *atomic.Int32
}

func startConsole(t *testing.T, e engine.Facade) *console {
	t.Helper()
	return startConsoleWith(t, e, nil)
}

// startConsoleSize is a console under teatest at w x h.
func startConsoleSize(t *testing.T, e engine.Facade, w, h int) *console {
	t.Helper()
	return startConsoleWithSize(t, e, nil, w, h)
}

// startConsoleWith is startConsole with options of the test's own.
func startConsoleWith(t *testing.T, e engine.Facade, set func(*Options)) *console {
	t.Helper()
	return startConsoleWithSize(t, e, set, 100, 30)
}

func startConsoleWithSize(t *testing.T, e engine.Facade, set func(*Options), w, h int) *console {
	t.Helper()
	bells := new(atomic.Int32)
	opts := Options{Theme: themes.NoColor(), Actor: "local:test", Jail: engine.JailOff, Bell: func() { bells.Add(1) },
		// c never reaches the tmux or terminal the tests run in.
		clip: &localClipboard{getenv: func(string) string { return "" }, term: io.Discard,
			tmux: func(context.Context, string) error { return errors.New("no tmux in tests") }}}
	if set != nil {
		set(&opts)
	}
	app := New(e, opts)
	tm := teatest.NewTestModel(t, app, teatest.WithInitialTermSize(w, h))
	t.Cleanup(func() { tm.Quit() })
	return &console{t: t, tm: tm, app: app, e: e, bells: bells}
}

// keys sends key presses: names (enter, esc, up, ...) or runes.
func (c *console) keys(ks ...string) {
	for _, k := range ks {
		var msg tea.KeyMsg
		switch k {
		case "enter":
			msg = tea.KeyMsg{Type: tea.KeyEnter}
		case "esc":
			msg = tea.KeyMsg{Type: tea.KeyEsc}
		case "up":
			msg = tea.KeyMsg{Type: tea.KeyUp}
		case "down":
			msg = tea.KeyMsg{Type: tea.KeyDown}
		case "left":
			msg = tea.KeyMsg{Type: tea.KeyLeft}
		case "right":
			msg = tea.KeyMsg{Type: tea.KeyRight}
		case "pgup":
			msg = tea.KeyMsg{Type: tea.KeyPgUp}
		case "pgdown":
			msg = tea.KeyMsg{Type: tea.KeyPgDown}
		case "tab":
			msg = tea.KeyMsg{Type: tea.KeyTab}
		case "shift+tab":
			msg = tea.KeyMsg{Type: tea.KeyShiftTab}
		default:
			c.tm.Type(k)
			continue
		}
		c.tm.Send(msg)
	}
}

// wait waits until the screen has shown every one of subs.
func (c *console) wait(subs ...string) {
	c.t.Helper()
	var seen []byte
	teatest.WaitFor(c.t, c.tm.Output(), func(b []byte) bool {
		seen = append(seen, b...)
		for _, s := range subs {
			if !bytes.Contains(seen, []byte(s)) {
				return false
			}
		}
		return true
	}, teatest.WithDuration(15*time.Second), teatest.WithCheckInterval(20*time.Millisecond))
}

// heardEnd waits until the console has heard that its one run ended:
// the Streams tab's title says END. The header's "0 running" is no sign
// of it: the header is redrawn with it whenever the pending count changes
// before the run starts, and a run that starts and ends within a frame
// never redraws it. The console is left on tab back.
func (c *console) heardEnd(back string) {
	c.t.Helper()
	c.keys("1")
	c.wait("END ")
	c.keys(back)
}

// final quits with q and returns the last frame, normalized. ctrl+c
// after it says yes if q asked first: the console may not have heard
// yet that the test's runs ended.
func (c *console) final() string {
	c.t.Helper()
	c.keys("q")
	c.tm.Send(tea.KeyMsg{Type: tea.KeyCtrlC})
	m := c.tm.FinalModel(c.t, teatest.WithFinalTimeout(10*time.Second))
	return normalize(m.(*App).View())
}

func (c *console) golden(view string) {
	c.t.Helper()
	golden.RequireEqual(c.t, []byte(view))
}

func streamModule(t *testing.T, e engine.Facade) {
	addModule(t, e, "chatty", map[string]string{
		"lines": "exec warden stream 300",
		"slow":  "exec warden stream 400 30ms",
	}, nil)
}

func TestStreamsFinishedRun(t *testing.T) {
	e := newEngine(t)
	streamModule(t, e)
	runHook(t, e, "chatty", "lines")
	c := startConsole(t, e)
	c.wait("line 300: disk full", "END 300 lines")
	view := c.final()
	if !strings.Contains(view, "▸300 E line 300: disk full") {
		t.Errorf("the cursor is not on the last line:\n%s", view)
	}
	c.golden(view)
}

func TestStreamsFilterAndSearch(t *testing.T) {
	e := newEngine(t)
	streamModule(t, e)
	runHook(t, e, "chatty", "lines")
	c := startConsole(t, e)
	c.wait("line 300: disk full")
	c.keys("right", "l", "l") // ≥warn
	c.wait("≥warn")
	c.keys("/")
	c.keys("disk full", "enter") // a match above the cursor: found backwards
	c.wait("/disk full")
	c.keys("g", "n") // top, then the first match
	c.wait("⏸ 100/300")
	c.keys("!") // inverted: info, debug and success lines
	c.wait("!≥warn")
	view := c.final()
	for _, want := range []string{"!≥warn", "/disk full", "line 99: all good", "⏸ 99/300"} {
		if !strings.Contains(view, want) {
			t.Errorf("missing %q in\n%s", want, view)
		}
	}
	if strings.Contains(view, "line 100: disk full") {
		t.Errorf("the inverted filter still shows an error line:\n%s", view)
	}
	c.golden(view)
}

func TestStreamsLongLine(t *testing.T) {
	e := newEngine(t)
	streamModule(t, e)
	runHook(t, e, "chatty", "lines")
	c := startConsole(t, e)
	c.wait("line 300: disk full")
	c.keys("right", "/")
	c.keys("long:", "enter")
	c.wait("⏸ 120/300", "…→")
	c.keys("enter") // the whole line
	c.wait("line 120 · info")
	c.keys("G") // the overlay's bottom
	view := c.final()
	if !strings.Contains(view, "xxxx") || !strings.Contains(view, "line 120 · info") {
		t.Errorf("no overlay with the whole line:\n%s", view)
	}
	c.golden(view)
}

func TestStreamsLiveBatched(t *testing.T) {
	e := newEngine(t)
	streamModule(t, e)
	c := startConsole(t, e)
	h := c.startSlowRun()
	// One wait for both: the last line and the run's end can arrive in one
	// frame, which a wait for the line alone would consume.
	c.wait("line 400: disk full", "chatty/slow · succeeded")
	h.Wait()
	view := c.final()
	if !strings.Contains(view, "▸400 E line 400: disk full") || !strings.Contains(view, "END 400 lines") {
		// It followed the tail to the end, and says the run is whole.
		t.Errorf("not at the end of the stream:\n%s", view)
	}
	if n := c.app.eventMsgs; n == 0 || n >= 400 {
		t.Errorf("%d event messages for 400 lines: want them batched", n)
	}
	t.Logf("400 lines arrived in %d event messages", c.app.eventMsgs)
	c.golden(view)
}

var keyBackspace = tea.KeyMsg{Type: tea.KeyBackspace}

// x on a running run cancels it through the engine (off the UI
// goroutine); the run ends cancelled, by the console's actor.
func TestStreamsCancelRun(t *testing.T) {
	e := newEngine(t)
	streamModule(t, e)
	c := startConsole(t, e)
	h := c.startSlowRun()
	c.wait("chatty/slow · running")
	// x asks first, naming what it cancels; only y cancels.
	c.keys("x")
	c.wait("cancel run "+h.ID+" (chatty/slow, running for", "[y/N]")
	if st, _ := e.Run(h.ID); st.Status != engine.RunRunning {
		t.Fatalf("x alone ended the run: %s", st.Status)
	}
	c.keys("y")
	c.wait("cancelling run " + h.ID)
	if o := h.Wait(); o.Run.Status != engine.RunCancelled || !strings.Contains(o.Run.Error, "local:test") {
		t.Errorf("run after x: %s (%s)", o.Run.Status, o.Run.Error)
	}
	c.final()
}

// startSlowRun starts chatty/slow (400 lines, 30ms apart) once the
// console shows it has no runs yet.
func (c *console) startSlowRun() *engine.RunHandle {
	c.t.Helper()
	c.wait("no runs yet")
	h, err := c.e.StartRun("local:test", engine.RunRequest{Module: "chatty", Hook: "slow", Jail: engine.JailOff})
	if err != nil {
		c.t.Fatal(err)
	}
	return h
}
