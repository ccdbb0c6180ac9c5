package tui

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"

	"github.com/wardenhq/warden/engine"
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

// Streams: the log title lists the destinations a run reached, learnt
// from the engine's network.connect receipts only: a refused connection,
// a second connection to the same place, another kind of receipt and the
// run's own stream (which a hook writes) add nothing.
func TestDestTrackerTitle(t *testing.T) {
	d := destTracker{}
	connect := func(run, host string, port int, allowed bool) engine.Receipt {
		det, _ := json.Marshal(map[string]any{"run": run, "host": host, "port": port, "allowed": allowed})
		return engine.Receipt{Kind: engine.KindNetworkConnect, Details: det}
	}
	d.receipt(connect("r1", "api.github.com", 443, true))
	if got := d.title("r1"); got != "→ api.github.com:443" {
		t.Errorf("one: %q", got)
	}
	d.receipt(connect("r1", "api.github.com", 443, true))
	d.receipt(connect("r1", "evil.example", 443, false))
	fake, _ := json.Marshal(map[string]any{"run": "r1", "host": "bank.example", "port": 443, "allowed": true})
	d.receipt(engine.Receipt{Kind: engine.KindHookEnd, Details: fake})
	d.receipt(connect("r1", "2001:db8::1", 443, true))
	if got := d.title("r1"); got != "→ 2 hosts: api.github.com:443, [2001:db8::1]:443" {
		t.Errorf("after a repeat, a refusal, a fake and an address: %q", got)
	}
	if d.title("r2") != "" {
		t.Error("another run shows destinations")
	}
}

// TestStreamLinesCannotClaimDestinations: a hook printing the engine's own
// "egress: reached" line gets no destination shown for its run.
func TestStreamLinesCannotClaimDestinations(t *testing.T) {
	e := newEngine(t)
	p := newStreamsPane(testShared(e))
	p.lines(&engine.LinesEvent{Run: "r1", Lines: []engine.Line{{Text: "egress: reached bank.example:443 (1.2.3.4:443), allowed by rule: x"}}})
	if got := p.dests.title("r1"); got != "" {
		t.Errorf("a stream line claimed a destination: %q", got)
	}
}

// A jailed hook in egress mode asks for a name its policy lacks: the
// console shows the request with the destination, the operator denies it
// with a reason, and the hook (Python's urllib, through the proxy) sees a
// 403 carrying that reason.
func TestRequestsNetworkDenyReachesHook(t *testing.T) {
	if _, err := newEngine(t).JailBackend(""); err != nil {
		t.Skip("no jail here: ", err)
	}
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI needs /usr/bin/python3 for this test (apt-get install python3-minimal)")
		}
		t.Skip("no /usr/bin/python3")
	}
	e := newEngine(t)
	addModule(t, e, "fetcher", map[string]string{"fetch": `exec /usr/bin/python3 -c '
import urllib.request, urllib.error
try:
    urllib.request.urlopen("https://api.example.test/", timeout=60)
except urllib.error.URLError as e:
    print("reason:", e.reason)
'`}, map[string]string{"fetch": "    network: [api.example.test:443]\n"})
	c := startConsole(t, e)
	c.keys("2")
	c.wait("no requests")
	h, err := e.StartRun("local:test", engine.RunRequest{Module: "fetcher", Hook: "fetch", Jail: engine.JailBwrap})
	if err != nil {
		t.Fatal(err)
	}
	c.wait("CONNECT api.example.test:443", "CONNECT  api.example.test:443")
	c.keys("n")
	c.wait("deny: reason")
	c.keys("not from CI", "enter")
	c.wait("deny by local:test")
	o := h.Wait()
	if out := streamText(t, e, h.ID); !strings.Contains(out, "reason: Tunnel connection failed: 403 Forbidden: not from CI") {
		t.Errorf("run %s: the hook did not see the reason:\n%s", o.Run.Status, out)
	}
}

// Streams: the destinations an egress run reached are in its log title,
// also for a run that ended before this console opened (from its hook.end
// receipt). The hook reaches a server on the host's loopback by an
// explicit ip: entry, the one way past the address deny list.
func TestStreamsShowsDestinationsReached(t *testing.T) {
	if _, err := newEngine(t).JailBackend(""); err != nil {
		t.Skip("no jail here: ", err)
	}
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI needs /usr/bin/python3 for this test (apt-get install python3-minimal)")
		}
		t.Skip("no /usr/bin/python3")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hi") }))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	e := newEngine(t)
	addModule(t, e, "fetcher", map[string]string{"fetch": `exec /usr/bin/python3 -c '
import urllib.request
print("got", urllib.request.urlopen("` + srv.URL + `/", timeout=60).read().decode())
'`}, map[string]string{"fetch": "    network: [ip:" + addr + "]\n"})
	p, _, err := e.Policy("module:fetcher")
	if err != nil {
		t.Fatal(err)
	}
	p.NetworkAllow = []string{"ip:" + addr}
	if _, err := e.SetPolicy("local:test", p, p.Revision); err != nil {
		t.Fatal(err)
	}
	o, err := runToEnd(e, "local:test", engine.RunRequest{Module: "fetcher", Hook: "fetch", Jail: engine.JailBwrap})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(streamText(t, e, o.Run.ID), "got hi") {
		t.Fatalf("the hook did not get through:\n%s", streamText(t, e, o.Run.ID))
	}
	c := startConsole(t, e)
	c.wait("fetcher/fetch", "→ "+addr)
}

// A click in the Requests list while a filter hides some rows picks the
// request drawn on that row, not the one at that place in the whole list.
func TestRequestsClickWhileFiltered(t *testing.T) {
	e := newEngine(t)
	p := newRequestsPane(testShared(e))
	now := time.Now()
	for i, mod := range []string{"alpha", "beta", "gamma"} {
		r := engine.Request{ID: uint64(i + 1), Subject: "module:" + mod, Operation: "operator.confirm", Created: now, Expires: now.Add(time.Hour)}
		r.Requester.Run, r.Requester.Module, r.Requester.Hook = "r", mod, "h"
		p.upsert(r)
	}
	p.query = "gamma"
	p.view(100, 30)
	p.update(tea.MouseMsg{Button: tea.MouseButtonLeft, Action: tea.MouseActionPress, Y: 1})
	if r, ok := p.current(); !ok || r.Requester.Module != "gamma" {
		t.Errorf("the click on the only row shown selected %+v", r)
	}
}

// A request to connect to an address past the deny list carries the
// engine's warning, and the detail shows it under the destination.
func TestRequestsPaneShowsTheDenyListWarning(t *testing.T) {
	e := newEngine(t)
	p := newRequestsPane(testShared(e))
	content, _ := json.Marshal(map[string]any{"host": "169.254.169.254", "port": 80})
	now := time.Now()
	r := engine.Request{ID: 8, Subject: "module:m", Operation: "network.connect", Content: content, Created: now, Expires: now.Add(time.Hour),
		Warning: "approving lets the hook reach ip:169.254.169.254:80 past the address deny list: 169.254.169.254 is link-local"}
	r.Requester.Run, r.Requester.Module, r.Requester.Hook = "r1", "m", "h"
	p.upsert(r)
	if view := p.view(160, 30); !strings.Contains(view, "warning: approving lets the hook reach ip:169.254.169.254:80 past the address deny list") {
		t.Errorf("the detail does not warn:\n%s", view)
	}
}

// Enter shows the whole request: warden's own styling is not escaped into
// the text (it once showed ␛[1;38;5;75m before every field), while the
// hook's own escape sequences are, once.
func TestRequestsWholeRequestIsEscapedOnce(t *testing.T) {
	// In colour, as a real terminal gets it (the tests draw in ASCII).
	lipgloss.SetColorProfile(termenv.ANSI256)
	t.Cleanup(func() { lipgloss.SetColorProfile(termenv.Ascii) })
	e := newEngine(t)
	sh := testShared(e)
	p := newRequestsPane(sh)
	content, _ := json.Marshal(map[string]any{"message": "Store it?\x1b[2J\x1b]0;pwned\x07"})
	now := time.Now()
	r := engine.Request{ID: 9, Subject: "module:m", Operation: "operator.confirm", Content: content, Created: now, Expires: now.Add(time.Hour)}
	r.Requester.Run, r.Requester.Module, r.Requester.Hook = "r1", "m", "h"
	p.upsert(r)
	p.view(120, 30)
	cmd := p.key(tea.KeyMsg{Type: tea.KeyEnter})
	if cmd == nil {
		t.Fatal("enter opened nothing")
	}
	msg, ok := cmd().(openOverlayMsg)
	if !ok {
		t.Fatalf("enter gave %T, want an overlay", cmd())
	}
	view := msg.ov.View(120, 30)
	plain := ansi.Strip(view)
	if strings.Contains(plain, "␛[1;") || strings.Contains(plain, "␛[0m") || strings.Contains(plain, "␛[m") {
		t.Errorf("warden's own styling shows as text:\n%s", plain)
	}
	if !strings.Contains(plain, `Store it?\u001b[2J`) && !strings.Contains(plain, "Store it?␛[2J") {
		t.Errorf("the hook's text is not there, escaped once:\n%s", plain)
	}
	if strings.Contains(view, "\x1b[2J") || strings.Contains(view, "\x1b]0;") {
		t.Errorf("the hook's escape sequence reached the terminal raw")
	}
}
