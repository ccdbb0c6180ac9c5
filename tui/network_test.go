package tui

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"warden/engine"
)

// A network request shows its destination first and large-ish (a title
// line of its own), in the list and in the detail; approve-always says it
// adds the name to the module's network list.
func TestRequestsPaneShowsNetworkDestination(t *testing.T) {
	e := newEngine(t)
	p := newRequestsPane(testShared(e))
	content, _ := json.Marshal(map[string]any{"host": "api.github.com", "port": 443})
	now := time.Now()
	r := engine.Request{ID: 7, Subject: "module:ghstars", Operation: "network.connect", Content: content, Created: now, Expires: now.Add(time.Hour)}
	r.Requester.Run, r.Requester.Module, r.Requester.Hook = "r1", "ghstars", "stars"
	p.upsert(r)
	view := p.view(100, 30)
	if !strings.Contains(view, "CONNECT api.github.com:443") {
		t.Errorf("the list row does not name the destination:\n%s", view)
	}
	if !strings.Contains(view, "   CONNECT  api.github.com:443") {
		t.Errorf("the detail has no destination banner:\n%s", view)
	}
	rule, ok := connectRule(r, 3)
	if !ok || rule != "add api.github.com:443 to the network list of module:ghstars, policy revision 3 → 4" {
		t.Errorf("approve-always says %q", rule)
	}
}

// Streams: the log title lists the destinations a run reached.
func TestDestTrackerTitle(t *testing.T) {
	d := destTracker{}
	d.take(&engine.LinesEvent{Run: "r1", Lines: []engine.Line{{Text: "egress: reached api.github.com:443 (140.82.121.6:443), allowed by rule: x"}, {Text: "plain line"}}})
	if got := d.title("r1"); got != "→ api.github.com:443" {
		t.Errorf("one: %q", got)
	}
	d.take(&engine.LinesEvent{Run: "r1", Lines: []engine.Line{{Text: "egress: reached pypi.org:443 (151.101.0.223:443), allowed by rule: y"}}})
	if got := d.title("r1"); got != "→ 2 hosts: api.github.com:443, pypi.org:443" {
		t.Errorf("two: %q", got)
	}
	if d.title("r2") != "" {
		t.Error("another run shows destinations")
	}
}
