package tui

import (
	"strings"
	"testing"
	"time"

	"github.com/wardenhq/warden/engine"
)

func askModule(t *testing.T, e engine.Facade) {
	addModule(t, e, "asker", map[string]string{
		"ask": `exec warden confirm "Reboot now?"`,
		"net": `echo "network or not, here I am"`,
	}, map[string]string{"ask": "    requires: [operator]\n", "net": "    network: true\n"})
}

func streamText(t *testing.T, e engine.Facade, run string) string {
	lines, err := e.StreamLines(run, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l.Text + "\n")
	}
	return b.String()
}

func TestRequestsApproveOnce(t *testing.T) {
	e := newEngine(t)
	askModule(t, e)
	c := startConsole(t, e)
	c.wait("no runs yet")
	h, err := e.StartRun("local:test", engine.RunRequest{Module: "asker", Hook: "ask", Jail: engine.JailOff})
	if err != nil {
		t.Fatal(err)
	}
	// The toast shows on the Streams tab; the bell rang.
	c.wait("request 1 · press 2 to answer · asker/ask", "1 pending")
	if n := c.bells.Load(); n != 1 {
		t.Errorf("bell rang %d times, want 1", n)
	}
	c.keys("2")
	c.wait("operator.confirm: Reboot now?", `"message": "Reboot now?"`)
	c.keys("a") // a question cannot become a rule
	c.wait("is a question")
	c.keys("y")
	// One wait for both: the run ends right after the answer, and the frame
	// that says so can come with the decision's (a wait for the decision
	// alone would consume it).
	c.wait("approve-once by local:test", "0 running")
	o := h.Wait()
	if !o.OK() || !strings.Contains(streamText(t, e, h.ID), "answer: true") {
		t.Errorf("run %s: %s\n%s", o.Run.Status, o.Run.Error, streamText(t, e, h.ID))
	}
	view := c.final()
	if !strings.Contains(view, "0 pending") {
		t.Errorf("still pending:\n%s", view)
	}
	c.golden(view)
}

func TestRequestsDenyWithReason(t *testing.T) {
	e := newEngine(t)
	askModule(t, e)
	c := startConsole(t, e)
	c.keys("2")
	c.wait("no requests")
	h, err := e.StartRun("local:test", engine.RunRequest{Module: "asker", Hook: "ask", Jail: engine.JailOff})
	if err != nil {
		t.Fatal(err)
	}
	c.wait("Reboot now?")
	c.keys("n")
	c.wait("deny: reason")
	c.keys("not today", "enter")
	c.wait("deny by local:test")
	o := h.Wait()
	c.heardEnd("2")
	// The run's stream says who denied it, and why.
	if s := streamText(t, e, h.ID); !strings.Contains(s, "answer: false") ||
		!strings.Contains(s, `request 1 (operator.confirm {"message":"Reboot now?"}): deny by local:test: not today`) {
		t.Errorf("run %s: %s\n%s", o.Run.Status, o.Run.Error, s)
	}
	rs, _ := e.Requests(engine.RequestFilter{All: true})
	if len(rs) != 1 || rs[0].Decision == nil || rs[0].Decision.Reason != "not today" || rs[0].Decision.By != "local:test" {
		t.Errorf("requests: %+v", rs)
	}
	view := c.final()
	if !strings.Contains(view, "not today") {
		t.Errorf("the reason is not shown:\n%s", view)
	}
	c.golden(view)
}

func TestRequestsApproveAlways(t *testing.T) {
	if _, err := newEngine(t).JailBackend(""); err != nil {
		t.Skip("no jail here: ", err)
	}
	e := newEngine(t)
	askModule(t, e)
	c := startConsole(t, e)
	c.keys("2")
	c.wait("no requests")
	// StartRun waits in preflight for the network decision.
	started := make(chan *engine.RunHandle, 1)
	go func() {
		h, err := e.StartRun("local:test", engine.RunRequest{Module: "asker", Hook: "net"})
		if err != nil {
			t.Error(err)
		}
		started <- h
	}()
	c.wait("1 pending", "network")
	c.keys("a")
	c.wait("adds the rule", "[y/N]", "allow network")
	c.keys("y")
	c.wait("approve-always by local:test")
	h := <-started
	if h == nil {
		t.FailNow()
	}
	o := h.Wait()
	c.heardEnd("2")
	if !strings.Contains(streamText(t, e, h.ID), "network granted by local:test") {
		t.Errorf("run %s: %s\n%s", o.Run.Status, o.Run.Error, streamText(t, e, h.ID))
	}
	p, _, err := e.Policy("module:asker")
	if err != nil || len(p.Rules) != 1 {
		t.Errorf("policy after approve-always: %+v, %v", p, err)
	}
	c.golden(c.final())
}

// TestRequestsFilterMatchingNothingAnswersNothing: with a filter that
// leaves no row ("no match for …"), y answers nothing: not the request
// the cursor was left on.
func TestRequestsFilterMatchingNothingAnswersNothing(t *testing.T) {
	e := newEngine(t)
	askModule(t, e)
	c := startConsole(t, e)
	h1 := startAsk(t, e)
	c.wait("🔔 request 1 · press 2 to answer")
	c.keys("2", "/", "zzz-nothing", "enter")
	c.wait("no match for zzz-nothing")
	c.keys("y")
	time.Sleep(500 * time.Millisecond)
	rs, err := e.Requests(engine.RequestFilter{All: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Decision != nil {
			t.Errorf("request %d was answered (%s) while the filter showed no request at all", r.ID, r.Decision.Verdict)
		}
	}
	e.Deny("local:test", 1, "cleanup")
	h1.Wait()
}
