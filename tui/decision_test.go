package tui

import (
	"fmt"
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/wardenhq/warden/engine"
)

// TestDecisionFlow: the one flow both Requests tabs (the console's and
// the fleet's) ask through: a deny's reason, trimmed, goes out with the
// deny; approve-always goes out only on y (or t, for a tool call, and
// only then); any other key is a no, said once; and it has the keyboard
// exactly while it asks.
func TestDecisionFlow(t *testing.T) {
	type sent struct {
		id              int
		verdict, reason string
	}
	var out []sent
	nos := 0
	d := newDecision[int]()
	decide := func(id int, verdict, reason string) tea.Cmd {
		out = append(out, sent{id, verdict, reason})
		return nil
	}
	no := func() { nos++ }
	press := func(keys ...string) {
		for _, k := range keys {
			if _, ok := d.key(keyMsg(k).(tea.KeyMsg), decide, no); !ok {
				t.Fatalf("key %q: the flow did not take it", k)
			}
		}
	}
	if _, ok := d.key(keyMsg("y").(tea.KeyMsg), decide, no); ok || d.active() {
		t.Fatal("an idle flow took a key")
	}

	d.askReason(7)
	press(" ", "t", "o", "o", " ", "l", "a", "t", "e", " ", "enter")
	d.askAlways(8, false)
	press("t") // not a tool call: t is a no
	d.askAlways(9, false)
	press("y")
	d.askAlways(10, true)
	press("t")
	d.askAlways(11, true)
	press("esc")
	d.askAlways(12, true)
	press("y")
	want := []sent{{7, engine.Deny, "too late"}, {9, engine.ApproveAlways, ""}, {10, approveAlwaysTool, ""}, {12, engine.ApproveAlways, ""}}
	if fmt.Sprint(out) != fmt.Sprint(want) || nos != 2 || d.active() {
		t.Fatalf("sent %v with %d noes (active %v); want %v with 2", out, nos, d.active(), want)
	}

	help := func() string {
		km, ok := d.keys()
		if !ok {
			return "(none)"
		}
		var s []string
		for _, b := range km.short {
			s = append(s, b.Help().Key+" "+b.Help().Desc)
		}
		return strings.Join(s, " · ")
	}
	if h := help(); h != "(none)" {
		t.Errorf("idle, the flow offers keys: %s", h)
	}
	d.askAlways(1, true)
	if h := help(); h != "y yes, add the rule · t the whole tool · any other key no" {
		t.Errorf("approve-always on a tool call offers: %s", h)
	}
	d.askAlways(1, false)
	if h := help(); h != "y yes, add the rule · any other key no" {
		t.Errorf("approve-always offers: %s", h)
	}
	d.cancel()
	if d.active() {
		t.Error("cancel left the question open")
	}
}
