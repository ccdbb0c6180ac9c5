package tui

import (
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/golden"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/themes"
)

func TestReceiptsFilterDetailVerify(t *testing.T) {
	e := newEngine(t)
	streamModule(t, e)
	runHook(t, e, "chatty", "lines")
	c := startConsole(t, e)
	c.keys("3")
	c.wait("Receipts · newest", "hook.end")
	c.keys("/")
	c.wait("filter ›")
	c.keys("hook.", "enter") // a kind: read by key range
	c.wait("of kind hook.")
	c.keys("up", "d") // the hook.start receipt in full
	c.wait("receipt", "details")
	c.keys("esc", "v")
	c.wait("receipt chain intact,")
	view := c.final()
	if !strings.Contains(view, "hook.start") || strings.Contains(view, "module.add") {
		t.Errorf("kind filter not applied:\n%s", view)
	}
	c.golden(view)
}

func TestReceiptsDetailOverlay(t *testing.T) {
	e := newEngine(t)
	streamModule(t, e)
	c := startConsole(t, e)
	c.keys("3")
	c.wait("module.add")
	c.keys("enter")
	c.wait("details")
	c.golden(c.final())
}

func TestModulesRunHooks(t *testing.T) {
	e := newEngine(t)
	addModule(t, e, "chatty", map[string]string{
		"greet": "exec warden greet",
		"lines": "exec warden stream 300",
	}, map[string]string{"greet": "    inputs: {target: string, times: number, loud: bool}\n"})
	c := startConsole(t, e)
	c.keys("4")
	c.wait("Modules (1)", "never run")
	c.keys("down", "enter") // lines: no inputs, so enter asks first
	c.wait("run chatty/lines now, UNJAILED (--jail off)? [y/N]")
	c.keys("y")
	c.wait("line 300: disk full", "succeeded")
	c.keys("4")
	c.wait("✓ succeeded")
	c.keys("up", "enter") // greet: a form for its inputs
	c.wait("Run chatty/greet", "loud (bool)", "target (string)", "times (number)")
	c.keys("y") // loud: true, and on to the next field
	c.wait("┃ target (string)")
	c.keys("world", "enter")
	c.wait("┃ times (number)")
	c.keys("many", "enter")
	c.wait("not a number")
	for range "many" {
		c.tm.Send(keyBackspace)
	}
	c.keys("3", "enter")
	c.wait("hello, world x3 (loud: true)", "chatty/greet · succeeded")
	view := c.final()
	if !strings.Contains(view, "chatty/greet") {
		t.Errorf("not on the greet run's stream:\n%s", view)
	}
	runs, _ := e.Runs(0)
	if len(runs) != 2 || runs[0].Status != engine.RunSucceeded {
		t.Errorf("runs: %+v", runs)
	}
	c.golden(view)
}

func TestHandsEmpty(t *testing.T) {
	e := newEngine(t)
	c := startConsole(t, e)
	c.keys("5")
	c.wait("Hands roots (0)")
	c.golden(c.final())
}

func TestTabsMouseAndHelp(t *testing.T) {
	e := newEngine(t)
	streamModule(t, e)
	c := startConsole(t, e)
	c.wait("no runs yet")
	c.keys("tab")
	c.wait("no requests")
	c.keys("shift+tab", "shift+tab")
	c.wait("Hands roots (0)")
	c.tm.Send(tea.MouseMsg{X: 28, Y: 1, Action: tea.MouseActionPress, Button: tea.MouseButtonLeft})
	c.wait("Receipts · newest")
	c.keys("4")
	c.wait("Modules (1)")
	c.keys("?")
	c.wait("Keys: Modules", "run hook", "add module", "streams", "messages", "quit")
	c.keys("q") // closes the help, not the console
	c.wait("Modules (1)")
	c.golden(c.final())
}

func TestSmallTerminalAndResize(t *testing.T) {
	e := newEngine(t)
	streamModule(t, e)
	runHook(t, e, "chatty", "lines")
	c := startConsole(t, e)
	c.wait("line 300: disk full")
	c.tm.Send(tea.WindowSizeMsg{Width: 80, Height: 24})
	c.keys("right", "w") // wrap on at 80 columns
	c.wait("wrap")
	c.tm.Send(tea.MouseMsg{X: 50, Y: 10, Action: tea.MouseActionPress, Button: tea.MouseButtonWheelUp})
	c.wait("⏸")
	view := c.final()
	lines := strings.Split(c.app.View(), "\n")
	if len(lines) != 24 {
		t.Errorf("%d lines at 80x24", len(lines))
	}
	for i, l := range lines {
		if w := widthOf(l); w > 80 {
			t.Errorf("line %d is %d wide: %q", i, w, l)
		}
	}
	c.golden(view)
}

// The Modules list at 80x24: every hook with its inputs and last run.
func TestModulesListSmall(t *testing.T) {
	e := newEngine(t)
	addModule(t, e, "chatty", map[string]string{
		"greet": "exec warden greet",
		"lines": "exec warden stream 300",
	}, map[string]string{"greet": "    inputs: {target: string, times: number, loud: bool}\n    requires: [operator]\n"})
	runHook(t, e, "chatty", "lines")
	d := newDriver(t, e, 80, 24)
	d.keys("4")
	view := d.view()
	for _, want := range []string{"chatty 1.0.0", "greet", "inputs loud:bool,target:string,times:number", "never run", "✓ succeeded"} {
		if !strings.Contains(view, want) {
			t.Errorf("missing %q:\n%s", want, view)
		}
	}
	golden.RequireEqual(t, []byte(view))
}

// Modules is a view over module.* events: a module added elsewhere (the
// CLI, another console) shows without pressing r.
func TestModulesFollowModuleEvents(t *testing.T) {
	e := newEngine(t)
	c := startConsole(t, e)
	c.keys("4")
	c.wait("Modules (0)")
	addModule(t, e, "latecomer", map[string]string{"greet": "exec warden greet"}, nil)
	c.wait("Modules (1)", "latecomer")
	c.final()
}

// The receipts pane reads a page at open, not the whole log, and reads
// the pages above as the cursor goes up, down to the first receipt.
func TestReceiptsPageByKeyRange(t *testing.T) {
	e := newEngine(t)
	for i := 0; i < 2*receiptsLoad+50; i++ {
		if _, err := e.RotateTrust("local:test"); err != nil {
			t.Fatal(err)
		}
	}
	all, _ := e.Receipts(engine.ReceiptFilter{})
	d := newDriver(t, e, 120, 30)
	d.keys("3")
	p := d.app.receipts
	if len(p.rs) != receiptsLoad || p.rs[len(p.rs)-1].Seq != all[len(all)-1].Seq {
		t.Fatalf("at open the pane holds %d receipts ending at %d; want the newest %d of %d", len(p.rs), p.rs[len(p.rs)-1].Seq, receiptsLoad, len(all))
	}
	for i := 0; i < 3; i++ {
		d.keys("g")
	}
	if len(p.rs) != len(all) || p.rs[0].Seq != 1 || p.sel != 0 {
		t.Fatalf("after going to the top three times: %d receipts held from seq %d, cursor %d; want all %d from seq 1", len(p.rs), p.rs[0].Seq, p.sel, len(all))
	}
	if v := d.view(); !strings.Contains(v, "trust.") {
		t.Errorf("the top of the log is not on screen:\n%s", v)
	}
}

// A run still running is held (and counted in the header) however many
// runs started after it, and paging down past the first page reaches
// every run once, in order.
func TestRunsPageKeepsLiveRuns(t *testing.T) {
	e := newEngine(t)
	addModule(t, e, "m", map[string]string{"slow": "sleep 60", "quick": "true"}, nil)
	h, err := e.StartRun("local:test", engine.RunRequest{Module: "m", Hook: "slow", Jail: engine.JailOff})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Cancel(); h.Wait() })
	for i := 0; i < runsPage+10; i++ {
		runHook(t, e, "m", "quick")
	}
	d := newDriver(t, e, 120, 30)
	p := d.app.streams
	if len(p.runs) != runsPage+1 || p.runs[len(p.runs)-1].ID != h.ID {
		t.Fatalf("at open the list holds %d runs ending at %s; want the newest %d and the running %s", len(p.runs), p.runs[len(p.runs)-1].ID, runsPage, h.ID)
	}
	if v := d.view(); !strings.Contains(v, "1 running") {
		t.Errorf("the header does not count the running run:\n%s", v)
	}
	for i := 0; i < runsPage+20; i++ {
		d.keys("j")
	}
	all, _ := e.Runs(0)
	if len(p.runs) != len(all) {
		t.Fatalf("after paging down the list holds %d runs, want all %d", len(p.runs), len(all))
	}
	for i := range all {
		if p.runs[i].ID != all[i].ID {
			t.Fatalf("run %d is %s, want %s (newest first, each once)", i, p.runs[i].ID, all[i].ID)
		}
	}
}

// TestHelpShowsEveryKeyAt80Columns: at 80x24 the help lays its columns
// out in rows rather than cutting the ones past the edge: every tab's
// help shows the console's own keys (copy, pager, command line,
// messages, quit), in rows no wider than the terminal and within its
// height.
func TestHelpShowsEveryKeyAt80Columns(t *testing.T) {
	e := newEngine(t)
	a := New(e, Options{Theme: themes.NoColor(), Actor: "local:test", Jail: engine.JailOff, Bell: func() {}})
	defer a.Close()
	a.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	var frames []string
	for tab := range tabCount {
		a.setTab(tab)
		a.showHelp = true
		view := normalize(a.View())
		for _, want := range []string{"Keys: " + tabNames[tab], "c   copy id/line/hash", "o   open in $PAGER", ":   command", "M   messages", "q   quit", "tab       next tab"} {
			if !strings.Contains(view, want) {
				t.Errorf("%s: the help does not show %q:\n%s", tabNames[tab], want, view)
			}
		}
		lines := strings.Split(a.View(), "\n")
		if len(lines) != 24 {
			t.Errorf("%s: %d rows at 80x24", tabNames[tab], len(lines))
		}
		for i, l := range lines {
			if w := widthOf(l); w > 80 {
				t.Errorf("%s: row %d is %d cells wide: %q", tabNames[tab], i, w, l)
			}
		}
		frames = append(frames, view)
	}
	golden.RequireEqual(t, []byte(strings.Join(frames, "\n")))
}

// The run form's keys are said once, in the footer: the form's own help
// line repeated "enter submit" just above it.
func TestRunFormKeysSaidOnce(t *testing.T) {
	e := newEngine(t)
	addModule(t, e, "chatty", map[string]string{"greet": "exec warden greet"},
		map[string]string{"greet": "    inputs: {target: string}\n"})
	c := startConsole(t, e)
	c.keys("4")
	c.wait("Modules (1)")
	c.keys("enter")
	c.wait("Run chatty/greet", "target (string)")
	view := c.quit()
	if n := strings.Count(view, "enter submit"); n != 1 {
		t.Errorf("enter submit said %d times:\n%s", n, view)
	}
}

// TestModulesCursorKeepsItsHook: a module added from another terminal
// moves the rows, not the cursor: it stays on the hook the operator
// chose, so enter asks about that one, and the question's default is no.
func TestModulesCursorKeepsItsHook(t *testing.T) {
	e := newEngine(t)
	addModule(t, e, "alpha", map[string]string{"h": "exec warden greet"}, nil)
	addModule(t, e, "gamma", map[string]string{"h": "exec warden greet"}, nil)
	c := startConsole(t, e)
	c.keys("4")
	c.wait("Modules (2)")
	c.keys("down") // gamma/h
	addModule(t, e, "beta", map[string]string{"h": "exec warden greet"}, nil)
	c.wait("Modules (3)", "beta")
	c.keys("enter")
	c.wait("run gamma/h now", "[y/N]")
}

// TestModulesRefreshReadsRunsShownRunning: a run the pane shows running
// whose end no event brought (its engine died and the one that took over
// closed it) shows as it ended after a refresh (r, or a takeover's).
func TestModulesRefreshReadsRunsShownRunning(t *testing.T) {
	e := newEngine(t)
	addModule(t, e, "tick", map[string]string{"tick": "exec warden greet"}, nil)
	o := runHook(t, e, "tick", "tick")
	p := newModulesPane(testShared(e))
	stale := o.Run
	stale.Status, stale.Ended = engine.RunRunning, nil
	p.last["tick/tick"] = stale // what the pane last heard
	p.update(p.refresh(nil)())
	if got := p.last["tick/tick"]; got.Status != o.Run.Status || got.Ended == nil {
		t.Errorf("after a refresh the pane shows the run %s (ended %v), want %s", got.Status, got.Ended, o.Run.Status)
	}
}
