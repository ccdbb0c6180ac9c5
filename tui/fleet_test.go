package tui

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/teatest"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/themes"
)

// fakeFleet plays the fleet behind the console (engine.Fleet): it
// decides like a host's engine (first decision wins, a second hears who
// won) and folds each change into its queue as the fleet's view does
// (pending oldest first, then decided newest first). The real hosts,
// server, client and view are in cmd/warden's TestFleetEndToEnd, which
// drives this console over them; this stands in for the network so the
// console's keys and frames can be checked.
type fakeFleet struct {
	mu    sync.Mutex
	rev   uint64
	reqs  map[string]*engine.FleetRequest
	runs  []engine.FleetRun
	calls []string
	hosts []engine.FleetHost
}

func newFakeFleet() *fakeFleet { return &fakeFleet{reqs: map[string]*engine.FleetRequest{}} }

func (f *fakeFleet) publish(host string, r engine.Request) {
	f.rev++
	f.reqs[fmt.Sprintf("%s/%d", host, r.ID)] = &engine.FleetRequest{Host: host, Request: r}
}

func (f *fakeFleet) ask(host string, id uint64, module, message string, age time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now().Add(-age)
	content, _ := json.Marshal(map[string]string{"message": message})
	f.publish(host, engine.Request{ID: id, Subject: "module:" + module, Requester: fleetRequester(module), Operation: "operator.confirm",
		Content: content, Created: now, Expires: now.Add(time.Hour)})
}

func fleetRequester(module string) engine.Requester {
	return engine.Requester{Run: "20261201T000000-abcdef", Module: module, Hook: "go"}
}

func (f *fakeFleet) Rev() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rev
}

func (f *fakeFleet) Queue(now time.Time, maxDecided int) []engine.FleetRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	// As the real view: pointers sorted on precomputed keys, so that the
	// benchmark below measures the console, not this fake.
	type item struct {
		at   int64
		host string
		r    *engine.FleetRequest
	}
	var pending, decided []item
	for _, r := range f.reqs {
		if r.Pending(now) {
			pending = append(pending, item{r.Request.Created.UnixNano(), r.Host, r})
		} else {
			at := r.Request.Expires
			if d := r.Request.Decision; d != nil {
				at = d.At
			}
			decided = append(decided, item{at.UnixNano(), r.Host, r})
		}
	}
	sort.Slice(pending, func(i, j int) bool {
		if pending[i].at != pending[j].at {
			return pending[i].at < pending[j].at
		}
		return pending[i].host < pending[j].host
	})
	sort.Slice(decided, func(i, j int) bool { return decided[i].at > decided[j].at })
	if maxDecided >= 0 && len(decided) > maxDecided {
		decided = decided[:maxDecided]
	}
	out := make([]engine.FleetRequest, 0, len(pending)+len(decided))
	for _, it := range append(pending, decided...) {
		out = append(out, *it.r)
	}
	return out
}

func (f *fakeFleet) Runs(limit int) []engine.FleetRun {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]engine.FleetRun(nil), f.runs[:min(limit, len(f.runs))]...)
}

func (f *fakeFleet) Forget(time.Time) {}

func (f *fakeFleet) Hosts(context.Context) ([]engine.FleetHost, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]engine.FleetHost(nil), f.hosts...), nil
}

func (f *fakeFleet) Decide(_ context.Context, host string, d engine.FleetDecision) (engine.FleetReply, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("%s %d %s %s", host, d.Request, d.Verdict, d.Reason))
	r := f.reqs[fmt.Sprintf("%s/%d", host, d.Request)]
	if r == nil {
		return engine.FleetReply{Message: "no such request"}, nil
	}
	if dd := r.Request.Decision; dd != nil {
		return engine.FleetReply{Message: fmt.Sprintf("host %s: request %d was already decided (%s by %s)", host, d.Request, dd.Verdict, dd.By)}, nil
	}
	req := r.Request
	req.Decision = &engine.Decision{Verdict: d.Verdict, By: "fleet:alice", At: time.Now(), Reason: d.Reason}
	f.publish(host, req)
	return engine.FleetReply{OK: true, Message: fmt.Sprintf("request %d on %s: %s by fleet:alice", d.Request, host, d.Verdict)}, nil
}

func (f *fakeFleet) decided() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func startFleet(t *testing.T, f *fakeFleet) *teatest.TestModel {
	t.Helper()
	m := NewFleet(f, FleetOptions{Theme: themes.NoColor(), Name: "alice", Role: "operator", Refresh: 50 * time.Millisecond})
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(110, 30))
	t.Cleanup(func() { tm.Quit() })
	return tm
}

func waitScreen(t *testing.T, tm *teatest.TestModel, subs ...string) {
	t.Helper()
	var seen []byte
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool {
		seen = append(seen, b...)
		for _, s := range subs {
			if !bytes.Contains(seen, []byte(s)) {
				return false
			}
		}
		return true
	}, teatest.WithDuration(10*time.Second), teatest.WithCheckInterval(20*time.Millisecond))
}

func waitCalls(t *testing.T, f *fakeFleet, n int) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if c := f.decided(); len(c) >= n {
			return c
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("want %d decisions sent, got %q", n, f.decided())
	return nil
}

// TestFleetConsoleQueue: one queue across hosts, oldest first, each row
// and the detail naming its host large; y, n (with a reason) and a (after
// its confirmation) go to the right host as the local console's keys do,
// and a decided request is not sent again.
func TestFleetConsoleQueue(t *testing.T) {
	f := newFakeFleet()
	f.ask("hostb", 3, "deploy", "Restart nginx?", 2*time.Minute)
	f.ask("hostc", 3, "backup", "Prune old snapshots?", time.Minute)
	f.ask("hosta", 9, "evil", "Pwn\x1b]52;c;aGk=\x07 me?", 30*time.Second)
	now := time.Now()
	f.hosts = []engine.FleetHost{{Host: "hosta", Up: true, Beat: &engine.FleetBeat{At: now, Running: 2}, Pending: 1},
		{Host: "hostb", Up: false, Beat: &engine.FleetBeat{At: now.Add(-time.Minute)}, Pending: 1,
			Checkpoint: &engine.FleetCheckpoint{Seq: 400, At: now.Add(-5 * time.Second)}}}
	tm := startFleet(t, f)

	// The queue: three pending, oldest first; the selected one's host in
	// a banner.
	waitScreen(t, tm, "3 pending", "HOSTB", "HOSTC", "HOSTA", "Restart nginx?", "request 3")
	tm.Type("y")
	if c := waitCalls(t, f, 1); c[0] != "hostb 3 approve-once " {
		t.Errorf("y sent %q", c)
	}
	waitScreen(t, tm, "request 3 on hostb: approve-once by fleet:alice", "2 pending")
	// The next pending comes up: hostc's 3 (the same id on another
	// host). n asks a reason.
	tm.Type("n")
	waitScreen(t, tm, "deny: reason")
	tm.Type("not now")
	tm.Send(tea.KeyMsg{Type: tea.KeyEnter})
	if c := waitCalls(t, f, 2); c[1] != "hostc 3 deny not now" {
		t.Errorf("n sent %q", c)
	}
	waitScreen(t, tm, "1 pending")
	// The hostile message is escaped, and approve-always asks first.
	waitScreen(t, tm, "Pwn␛]52;c;aGk=␇ me?")
	tm.Type("a")
	waitScreen(t, tm, "ALWAYS")
	tm.Type("y")
	if c := waitCalls(t, f, 3); c[2] != "hosta 9 approve-always " {
		t.Errorf("a,y sent %q", c)
	}
	waitScreen(t, tm, "0 pending")
	// A decided request: y says so and sends nothing.
	tm.Send(tea.KeyMsg{Type: tea.KeyUp})
	tm.Type("y")
	waitScreen(t, tm, "was already decided")
	if c := f.decided(); len(c) != 3 {
		t.Errorf("a decided request was sent again: %q", c)
	}
	// ? lists every key; any key closes it.
	tm.Type("?")
	waitScreen(t, tm, "Keys: Requests", "(any key closes", "approve always")
	tm.Type("x")
	// Hosts: up and down, heartbeat, running, pending, checkpoint.
	tm.Type("1")
	waitScreen(t, tm, "LAST CHECKPOINT", "hosta", "up", "down", "seq 400")
	tm.Type("q")
	final := tm.FinalModel(t, teatest.WithFinalTimeout(5*time.Second)).(*Fleet).View()
	if strings.Contains(final, "\x1b]52") {
		t.Error("a raw OSC 52 reached the screen")
	}
}

// BenchmarkFleetFrame is the console's frame time with 10,000 pending
// requests across 200 hosts, against 10 pending as the baseline.
func BenchmarkFleetFrame(b *testing.B) {
	for _, n := range []int{10, 10000} {
		b.Run(fmt.Sprintf("pending=%d", n), func(b *testing.B) {
			f := newFakeFleet()
			for i := 0; i < n; i++ {
				f.ask(fmt.Sprintf("sim%04d", i%200), uint64(i/200+1), "mod", fmt.Sprintf("request %d?", i), time.Duration(n-i)*time.Millisecond)
			}
			m := NewFleet(f, FleetOptions{Theme: themes.NoColor(), Name: "alice", Role: "operator"})
			m.Update(tea.WindowSizeMsg{Width: 160, Height: 50})
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				m.Update(tea.KeyMsg{Type: tea.KeyDown})
				_ = m.View()
			}
		})
	}
	// The worst frame: an event arrived, so the queue is re-folded
	// (10,000 requests re-sorted) before it is drawn.
	b.Run("pending=10000/changed", func(b *testing.B) {
		f := newFakeFleet()
		for i := 0; i < 10000; i++ {
			f.ask(fmt.Sprintf("sim%04d", i%200), uint64(i/200+1), "mod", fmt.Sprintf("request %d?", i), time.Duration(10000-i)*time.Millisecond)
		}
		m := NewFleet(f, FleetOptions{Theme: themes.NoColor(), Name: "alice", Role: "operator"})
		m.Update(tea.WindowSizeMsg{Width: 160, Height: 50})
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			f.ask("simnew", uint64(i+1), "mod", "new?", 0)
			b.StartTimer()
			m.Update(fleetTickMsg{})
			_ = m.View()
		}
	})
}
