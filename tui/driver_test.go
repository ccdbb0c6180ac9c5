package tui

import (
	"runtime"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/wardenhq/warden/engine"
)

// driver runs the App's Update loop by hand, for tests that look at
// frames between keys. Each command runs to its end, except those that
// wait by design (ticks, blinks, the event reader), which are dropped.
type driver struct {
	t   *testing.T
	app *App
}

func newDriver(t *testing.T, e engine.Facade, w, h int) *driver {
	d := &driver{t: t, app: New(e, Options{Theme: testShared(e).th, Actor: "local:test", Jail: engine.JailOff, Bell: func() {}})}
	t.Cleanup(d.app.Close)
	d.send(tea.WindowSizeMsg{Width: w, Height: h})
	return d
}

func (d *driver) send(msgs ...tea.Msg) {
	for len(msgs) > 0 {
		msg := msgs[0]
		msgs = msgs[1:]
		if b, ok := msg.(tea.BatchMsg); ok {
			for _, c := range b {
				msgs = append(msgs, d.run(c)...)
			}
			continue
		}
		if s, ok := msg.(tea.KeyMsg); ok && s.Type == tea.KeyRunes && len(s.Runes) > 1 {
			split := make([]tea.Msg, 0, len(s.Runes)+len(msgs))
			for _, r := range s.Runes {
				split = append(split, tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}})
			}
			msgs = append(split, msgs...)
			continue
		}
		_, cmd := d.app.Update(msg)
		msgs = append(msgs, d.run(cmd)...)
	}
}

func (d *driver) run(cmd tea.Cmd) []tea.Msg {
	if cmd == nil {
		return nil
	}
	ch := make(chan tea.Msg, 1)
	id := make(chan string, 1)
	go driverCommand(cmd, id, ch)
	gid := <-id
	look := time.NewTicker(100 * time.Millisecond)
	defer look.Stop()
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case m := <-ch:
			if m == nil {
				return nil
			}
			if _, ok := m.(tea.QuitMsg); ok {
				return nil
			}
			return []tea.Msg{m}
		case <-look.C:
			stack, alive := goroutineStack(gid)
			if !alive {
				continue // it has just returned: its message is on ch
			}
			if waitsOnPurpose(stack) {
				return nil
			}
			if time.Now().After(deadline) {
				d.t.Fatalf("a console command ran for 20 s without returning:\n%s", stack)
			}
		}
	}
}

// driverCommand runs one command on its own goroutine, first saying which
// goroutine that is, so that the driver can look at what it waits on.
func driverCommand(cmd tea.Cmd, id chan<- string, out chan<- tea.Msg) {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	f := strings.Fields(string(buf)) // "goroutine N [running]:"
	id <- f[1]
	out <- cmd()
}

// goroutineStack is the stack of goroutine gid, and whether it is alive.
func goroutineStack(gid string) (string, bool) {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.HasPrefix(g, "goroutine "+gid+" [") {
			return g, true
		}
	}
	return "", false
}

// waitsOnPurpose tells a command that waits by design (a tick, a cursor
// blink, the event reader: the driver drops those, as nothing the test
// does will end them) from one doing work that a loaded machine has made
// slow (a storage read, a decision's fsync'd receipt, a job's progress:
// the driver waits for those, so that a test never sees a frame from
// before its own key's work). A tick does no work of its own in the
// console (it returns a message; Update starts the work), so a stack
// through a tick is a wait. A tick shorter than the driver's first look
// (a spinner's) is delivered and re-armed, so a driver test never shows
// a running spinner; teatest tests do.
func waitsOnPurpose(stack string) bool {
	// Closures are named after the function that made them, and a made
	// inline one after its caller too ("(*App).tookOver.(*App).waitEvents
	// .func1"), hence names without their package.
	for _, w := range []string{
		".Tick.func",             // bubbletea.Tick: the tick, a toast, spinners
		".Every.func",            // bubbletea.Every
		"(*Model).BlinkCmd.func", // a text input's cursor
		"(*App).waitEvents.func", // the event reader
	} {
		if strings.Contains(stack, w) {
			return true
		}
	}
	return false
}

// typ types runes and named keys.
func (d *driver) keys(ks ...string) {
	for _, k := range ks {
		d.send(keyMsg(k))
	}
}

func keyMsg(k string) tea.Msg {
	switch k {
	case "enter":
		return tea.KeyMsg{Type: tea.KeyEnter}
	case "esc":
		return tea.KeyMsg{Type: tea.KeyEsc}
	case "up":
		return tea.KeyMsg{Type: tea.KeyUp}
	case "down":
		return tea.KeyMsg{Type: tea.KeyDown}
	case "left":
		return tea.KeyMsg{Type: tea.KeyLeft}
	case "right":
		return tea.KeyMsg{Type: tea.KeyRight}
	case "pgup":
		return tea.KeyMsg{Type: tea.KeyPgUp}
	case "pgdown":
		return tea.KeyMsg{Type: tea.KeyPgDown}
	case "tab":
		return tea.KeyMsg{Type: tea.KeyTab}
	case "shift+tab":
		return tea.KeyMsg{Type: tea.KeyShiftTab}
	case "backspace":
		return tea.KeyMsg{Type: tea.KeyBackspace}
	}
	return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)}
}

func (d *driver) view() string { return normalize(d.app.View()) }

// TestDriverWaitsForWorkNotForTicks: the harness itself. Work made slow
// by a loaded machine reaches Update; a tick that nothing will end is
// dropped, as the event reader is.
func TestDriverWaitsForWorkNotForTicks(t *testing.T) {
	d := &driver{t: t}
	type done struct{}
	slow := func() tea.Msg { time.Sleep(400 * time.Millisecond); return done{} }
	if got := d.run(slow); len(got) != 1 {
		t.Fatalf("slow work was dropped: %v", got)
	}
	// Were the tick taken for work, the driver would fail this test at
	// its 20 s limit.
	if got := d.run(tea.Tick(time.Hour, func(time.Time) tea.Msg { return done{} })); got != nil {
		t.Fatalf("a tick reached Update: %v", got)
	}
}
