package tui

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/charmbracelet/x/exp/teatest"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/themes"
)

// limitsOff is the engine on a host with no cgroup to hold runs' limits
// (this host has one: engine.TestLimitsOffIsSaid runs the engine itself
// without, in a mount namespace of its own).
type limitsOff struct{ engine.Facade }

func (limitsOff) LimitsReady() error {
	return &engine.LimitsOffError{Detail: "cgroup v1: no memory hierarchy is mounted"}
}

// With the jail on but no cgroup, the header says limits are rlimits
// only, as it says the jail is off; with both there, it says neither.
func TestHeaderSaysLimitsOff(t *testing.T) {
	e := newEngine(t)
	got, err := e.JailBackend("")
	if err != nil {
		t.Skip("no jail here: ", err)
	}
	for _, tc := range []struct {
		f    engine.Facade
		want string
		not  string
	}{
		{limitsOff{e}, "LIMITS: RLIMIT", "JAIL OFF"},
		{e, "jail " + got, "LIMITS: RLIMIT"},
	} {
		app := New(tc.f, Options{Theme: themes.NoColor(), Actor: "local:test", Bell: func() {}})
		h := app.header(120)
		if !strings.Contains(h, tc.want) || strings.Contains(h, tc.not) {
			t.Errorf("header %q: want %q, not %q", h, tc.want, tc.not)
		}
		tm := teatest.NewTestModel(t, app, teatest.WithInitialTermSize(120, 30))
		c := &console{t: t, tm: tm, app: app, e: tc.f, bells: new(atomic.Int32)}
		c.wait(tc.want)
		tm.Quit()
	}
	if err := e.LimitsReady(); err != nil {
		t.Logf("this host: %v", err)
	}
}

// fellBack is a host where auto picks landlock (an unprivileged
// container, where bwrap cannot make its namespaces), with no cgroup.
type fellBack struct{ engine.Facade }

func (fellBack) JailBackend(string) (string, error) { return engine.JailLandlock, nil }
func (fellBack) LimitsReady() error {
	return &engine.LimitsOffError{Detail: "no cgroup is writable here"}
}

// Where auto falls back to landlock, the header says the jail runs get,
// not bwrap, and that limits are rlimits.
func TestHeaderSaysTheJailAutoPicks(t *testing.T) {
	app := New(fellBack{newEngine(t)}, Options{Theme: themes.NoColor(), Actor: "local:test", Bell: func() {}})
	h := app.header(120)
	if !strings.Contains(h, "JAIL landlock") || !strings.Contains(h, "LIMITS: RLIMIT") || strings.Contains(h, "bwrap") {
		t.Errorf("header where auto picks landlock without a cgroup: %q", h)
	}
}

// The landlock backend is weaker than bwrap: the header says so, for a
// console that asked for it and for runs auto put under it.
func TestHeaderSaysJailLandlock(t *testing.T) {
	e := newEngine(t)
	app := New(e, Options{Theme: themes.NoColor(), Actor: "local:test", Bell: func() {}, Jail: engine.JailLandlock})
	if h := app.header(120); !strings.Contains(h, "JAIL landlock") || strings.Contains(h, "jail bwrap") {
		t.Errorf("header with --jail=landlock: %q", h)
	}
	app = New(e, Options{Theme: themes.NoColor(), Actor: "local:test", Bell: func() {}})
	app.streams.runs = append(app.streams.runs, engine.RunRecord{ID: "20261201T092800-e3a1f0", Module: "m", Hook: "h", Status: engine.RunRunning, JailMode: engine.JailLandlock})
	if h := app.header(120); !strings.Contains(h, "1 JAIL landlock") {
		t.Errorf("header with a run under landlock: %q", h)
	}
}
