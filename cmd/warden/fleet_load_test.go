package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/wardenhq/warden/engine/fleet"
	"github.com/wardenhq/warden/storage"
	"github.com/wardenhq/warden/themes"
	"github.com/wardenhq/warden/tui"
)

// simHost speaks the host protocol through the real client: a request a
// second (each with its Nats-Msg-Id), a signed checkpoint every 10 s, a
// heartbeat every 5 s, and answers decisions on its decision subject,
// publishing the decided request as a host does.
type simHost struct {
	name string
	nc   *nats.Conn
	js   jetstream.JetStream
	key  ed25519.PrivateKey
	mu   sync.Mutex
	seq  uint64
	reqs map[uint64]*storage.RequestRecord
	sent atomic.Int64
	errs atomic.Int64
}

func (h *simHost) publish(ctx context.Context, kind string, env fleet.Envelope) {
	b, _ := json.Marshal(env)
	m := nats.NewMsg(fleet.EventSubject(h.name, kind))
	m.Data = b
	m.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("%s.%d.%s", h.name, env.Seq, kind))
	if _, err := h.js.PublishMsg(ctx, m); err != nil {
		h.errs.Add(1)
		return
	}
	h.sent.Add(1)
}

func (h *simHost) next() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	return h.seq
}

// every is a sim's schedule for periodic work: a host's own (a random
// phase, then period ±10%: fleet.FirstAfter, fleet.Jittered), or with
// lockstep every sim firing at the same instant each period, the worst
// case of hosts started together on plain tickers
// (WARDEN_FLEET_LOAD_LOCKSTEP=1).
type every struct {
	t        *time.Timer
	C        <-chan time.Time
	period   time.Duration
	lockstep bool
}

func newEvery(period time.Duration, lockstep bool) *every {
	first := fleet.FirstAfter(period)
	if lockstep {
		first = period
	}
	e := &every{t: time.NewTimer(first), period: period, lockstep: lockstep}
	e.C = e.t.C
	return e
}

func (e *every) next() {
	if e.lockstep {
		e.t.Reset(e.period)
	} else {
		e.t.Reset(fleet.Jittered(e.period))
	}
}

func (h *simHost) run(ctx context.Context, d time.Duration, lockstep bool) {
	end := time.After(d)
	// Requests come from hooks, at no shared instant across hosts; a
	// sim makes one a second.
	reqT := newEvery(time.Second, lockstep)
	cpT := newEvery(fleet.CheckpointEvery, lockstep)
	hbT := newEvery(fleet.HeartbeatEvery, lockstep)
	defer reqT.t.Stop()
	defer cpT.t.Stop()
	defer hbT.t.Stop()
	var id uint64
	for {
		select {
		case <-ctx.Done():
			return
		case <-end:
			return
		case <-reqT.C:
			reqT.next()
			id++
			now := time.Now().UTC()
			r := storage.RequestRecord{ID: id, Subject: "module:sim", Requester: storage.Requester{Run: "r", Module: "sim", Hook: "go"},
				Operation: "operator.confirm", Content: json.RawMessage(fmt.Sprintf(`{"message":"request %d of %s?"}`, id, h.name)),
				Created: now, Expires: now.Add(time.Hour)}
			h.mu.Lock()
			h.reqs[id] = &r
			h.mu.Unlock()
			seq := h.next()
			h.publish(ctx, fleet.KindRequest, fleet.Envelope{Host: h.name, Seq: seq, At: now, Request: &r})
		case <-cpT.C:
			cpT.next()
			seq := h.next()
			sc := fleet.Sign(fleet.Checkpoint{At: time.Now().UTC(), Hash: strings.Repeat("a", 64), Host: h.name, Seq: seq}, h.key)
			h.publish(ctx, fleet.KindCheckpoint, fleet.Envelope{Host: h.name, Seq: seq, At: sc.At, Checkpoint: &sc})
		case <-hbT.C:
			hbT.next()
			b, _ := json.Marshal(fleet.Heartbeat{Host: h.name, Version: "sim", At: time.Now().UTC()})
			m := nats.NewMsg("$KV." + fleet.HostsBucket + "." + h.name)
			m.Data = b
			h.js.PublishMsg(ctx, m)
		}
	}
}

// legs are when each host got a decision and answered it (wall-clock
// ns, key "host/id"), to split a round trip into its legs: the operator
// may run in another process (WARDEN_FLEET_LOAD_OPERATOR=process), and
// both read the same machine's clock.
var legs sync.Map

func (h *simHost) onDecide(m *nats.Msg) {
	got := time.Now().UnixNano()
	var d fleet.Decision
	json.Unmarshal(m.Data, &d)
	toks := strings.Split(m.Subject, ".")
	h.mu.Lock()
	r := h.reqs[d.Request]
	var rep fleet.DecisionReply
	var decided storage.RequestRecord
	switch {
	case r == nil:
		rep = fleet.DecisionReply{Code: fleet.CodeNotFound}
	case r.Decision != nil:
		rep = fleet.DecisionReply{Code: fleet.CodeAlreadyDecided}
	default:
		r.Decision = &storage.Decision{Verdict: d.Verdict, By: "fleet:" + toks[len(toks)-1], At: time.Now().UTC()}
		decided = *r
		rep = fleet.DecisionReply{Code: fleet.CodeOK, Request: &decided}
	}
	h.mu.Unlock()
	b, _ := json.Marshal(rep)
	legs.LoadOrStore(fmt.Sprintf("%s/%d", h.name, d.Request), [2]int64{got, time.Now().UnixNano()})
	m.Respond(b)
	if rep.Code == fleet.CodeOK {
		seq := h.next()
		h.publish(context.Background(), fleet.KindRequest, fleet.Envelope{Host: h.name, Seq: seq, At: time.Now().UTC(), Request: &decided})
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func rssKiB(pid int) int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			n, _ := strconv.Atoi(strings.Fields(l)[1])
			return n
		}
	}
	return 0
}

// TestFleetLoad: simulated hosts against one nats-server. The test
// command runs it small (20 hosts for 12 s); the size is
// WARDEN_FLEET_LOAD_HOSTS=200 WARDEN_FLEET_LOAD_SECONDS=60. It checks
// that every request arrived exactly once and every decision was
// answered, and reports (does not assert) the console's frame time with
// everything pending, the decision round trip p50/p99 and the server's
// memory. Each slow decision is split into its legs (operator to host,
// host, host to operator). WARDEN_FLEET_LOAD_LOCKSTEP=1 starts every sim's
// periodic work in the same instant (plain tickers: the worst case the
// hosts' jitter avoids); WARDEN_FLEET_LOAD_OPERATOR=process decides from
// a process of its own; WARDEN_FLEET_LOAD_TRACE=FILE writes every
// decision's legs (µs) to FILE.
func TestFleetLoad(t *testing.T) {
	hosts := envInt("WARDEN_FLEET_LOAD_HOSTS", 20)
	secs := envInt("WARDEN_FLEET_LOAD_SECONDS", 12)
	lockstep := os.Getenv("WARDEN_FLEET_LOAD_LOCKSTEP") == "1"
	if hosts > 200 {
		t.Fatalf("WARDEN_FLEET_LOAD_HOSTS=%d: scripts/nats-test makes 200 host users (sim0000..sim0199)", hosts)
	}
	dir := filepath.Join(privateDir(t, "warden-fleet-load-"), "nats")
	url := natsServer(t, dir)
	pidB, _ := os.ReadFile(filepath.Join(dir, "nats.pid"))
	pid, _ := strconv.Atoi(strings.TrimSpace(string(pidB)))
	t.Cleanup(func() {
		if pid > 1 {
			stopPID(pid) // before its dir is removed: a live server would write it again
		}
	})
	creds := func(u string) fleet.Creds {
		c, err := fleet.LoadCreds(filepath.Join(dir, "creds", u))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	admin, err := fleet.Dial(url, creds("admin"), "admin", fleet.RoleOperator)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := admin.Init(ctx, fleet.InitOptions{MaxBytes: 1 << 30}); err != nil {
		t.Fatal(err)
	}
	rss0 := rssKiB(pid)

	sims := make([]*simHost, hosts)
	for i := range sims {
		name := fmt.Sprintf("sim%04d", i)
		c := creds(name)
		nc, err := nats.Connect(url, nats.UserInfo(name, credsPassword(t, filepath.Join(dir, "creds", name))))
		if err != nil {
			t.Fatalf("%s: %v (user %s)", name, err, c.User)
		}
		defer nc.Close()
		js, _ := jetstream.New(nc)
		_, key, _ := ed25519.GenerateKey(rand.Reader)
		h := &simHost{name: name, nc: nc, js: js, key: key, reqs: map[uint64]*storage.RequestRecord{}}
		if _, err := nc.Subscribe(fleet.DecideSubject(name, "*", "*"), h.onDecide); err != nil {
			t.Fatal(err)
		}
		sims[i] = h
	}
	op, err := fleet.Dial(url, creds("alice"), "", fleet.RoleOperator)
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close()

	var wg sync.WaitGroup
	start := time.Now()
	for _, h := range sims {
		wg.Add(1)
		go func() { defer wg.Done(); h.run(ctx, time.Duration(secs)*time.Second, lockstep) }()
	}
	// The operator decides a request of a host 5 times a second, timing
	// each round trip: here, or in a process of its own as a real
	// operator's console is (WARDEN_FLEET_LOAD_OPERATOR=process), so the
	// load generator's 200 hosts do not share its Go scheduler.
	deadline := start.Add(time.Duration(secs) * time.Second)
	var decisions []decisionTiming
	if os.Getenv("WARDEN_FLEET_LOAD_OPERATOR") == "process" {
		decisions = operatorProcess(t, url, filepath.Join(dir, "creds", "alice"), hosts, start, deadline)
	} else {
		decisions = operate(ctx, op, hosts, start, deadline)
	}
	var rtts []time.Duration
	type leg struct{ at, rtt, out, host, back time.Duration }
	var slow []leg
	var decideErrs []string
	for _, d := range decisions {
		rtts = append(rtts, time.Duration(d.RTT))
		if d.Err != "" {
			decideErrs = append(decideErrs, d.Err)
		}
		if l, ok := legs.Load(fmt.Sprintf("%s/%d", d.Host, d.ID)); ok {
			ga := l.([2]int64)
			slow = append(slow, leg{at: time.Duration(d.T0 - start.UnixNano()), rtt: time.Duration(d.RTT), out: time.Duration(ga[0] - d.T0),
				host: time.Duration(ga[1] - ga[0]), back: time.Duration(d.T0 + d.RTT - ga[1])})
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	rssPeak := rssKiB(pid)
	var sent, errs int64
	for _, h := range sims {
		sent += h.sent.Load()
		errs += h.errs.Load()
	}
	if errs > 0 || len(decideErrs) > 0 {
		t.Errorf("%d publishes failed; decisions that failed: %q", errs, decideErrs)
	}

	// Everything arrived, exactly once.
	lctx, lcancel := context.WithTimeout(ctx, 2*time.Minute)
	defer lcancel()
	t0 := time.Now()
	v, err := op.Load(lctx, false)
	if err != nil {
		t.Fatal(err)
	}
	loadTime := time.Since(t0)
	now := time.Now()
	all := v.Requests(true, now)
	pending := v.Requests(false, now)
	want := 0
	for _, h := range sims {
		h.mu.Lock()
		want += len(h.reqs)
		h.mu.Unlock()
	}
	if len(all) != want || v.Duplicates() != 0 {
		t.Errorf("the fleet holds %d requests (%d duplicates); the hosts made %d", len(all), v.Duplicates(), want)
	}

	// The console over this real view: frame time with everything pending.
	m := tui.NewFleet(fleetSource{cl: op, v: v}, tui.FleetOptions{Theme: themes.NoColor(), Name: "alice", Role: "operator"})
	m.Update(tea.WindowSizeMsg{Width: 160, Height: 50})
	frames := make([]time.Duration, 0, 200)
	for i := 0; i < 200; i++ {
		f0 := time.Now()
		m.Update(tea.KeyMsg{Type: tea.KeyDown})
		_ = m.View()
		frames = append(frames, time.Since(f0))
	}
	// Which frames were slow (the first one sorts the whole queue).
	order := make([]int, len(frames))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(i, j int) bool { return frames[order[i]] > frames[order[j]] })
	for _, i := range order[:min(3, len(order))] {
		t.Logf("slow frame: #%d of %d, %s", i, len(frames), frames[i])
	}
	sort.Slice(frames, func(i, j int) bool { return frames[i] < frames[j] })
	sort.Slice(rtts, func(i, j int) bool { return rtts[i] < rtts[j] })
	pct := func(ds []time.Duration, p float64) time.Duration {
		if len(ds) == 0 {
			return 0
		}
		return ds[min(int(float64(len(ds))*p), len(ds)-1)]
	}
	if f := os.Getenv("WARDEN_FLEET_LOAD_TRACE"); f != "" {
		var b strings.Builder
		for _, l := range slow {
			fmt.Fprintf(&b, "%.3f %d %d %d %d\n", l.at.Seconds(), l.rtt.Microseconds(), l.out.Microseconds(), l.host.Microseconds(), l.back.Microseconds())
		}
		os.WriteFile(f, []byte(b.String()), 0o600)
	}
	sort.Slice(slow, func(i, j int) bool { return slow[i].rtt > slow[j].rtt })
	for _, l := range slow[:min(5, len(slow))] {
		t.Logf("slow decision at +%.2fs: %s = out %s + host %s + back %s", l.at.Seconds(), l.rtt, l.out, l.host, l.back)
	}
	si, _ := jetstreamInfo(ctx, op)
	t.Logf("load: %d hosts x %d s (%.1f s): %d messages published (%.0f/s), %d requests, %d pending at the end",
		hosts, secs, elapsed.Seconds(), sent, float64(sent)/elapsed.Seconds(), want, len(pending))
	t.Logf("decision round trip over %d decisions: p50 %s, p99 %s, max %s", len(rtts), pct(rtts, .5), pct(rtts, .99), pct(rtts, 1))
	t.Logf("console frame with %d pending (real view): p50 %s, p99 %s; loading the stream into the view took %s", len(pending), pct(frames, .5), pct(frames, .99), loadTime)
	t.Logf("nats-server RSS: %d KiB before, %d KiB after the run; stream %s", rss0, rssPeak, si)
}

func jetstreamInfo(ctx context.Context, c *fleet.Client) (string, error) {
	js, _ := jetstream.New(c.Conn())
	s, err := js.Stream(ctx, fleet.StreamName)
	if err != nil {
		return "", err
	}
	i, err := s.Info(ctx)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d msgs, %d bytes (%.0f bytes/msg)", i.State.Msgs, i.State.Bytes, float64(i.State.Bytes)/float64(max(i.State.Msgs, 1))), nil
}

func credsPassword(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, p, _ := strings.Cut(strings.TrimSpace(string(b)), ":")
	return p
}

// decisionTiming is one decision's round trip (wall-clock ns).
type decisionTiming struct {
	Host string `json:"host"`
	ID   uint64 `json:"id"`
	T0   int64  `json:"t0"`
	RTT  int64  `json:"rtt"`
	Err  string `json:"err,omitempty"`
}

// operate decides, 5 times a second until 2 s before deadline, request
// 1+elapsed/2 of host sim<i mod hosts> (it exists by then on every host).
func operate(ctx context.Context, op *fleet.Client, hosts int, start, deadline time.Time) []decisionTiming {
	var out []decisionTiming
	time.Sleep(time.Until(start.Add(1500 * time.Millisecond))) // request 1 exists on every host
	for i := 0; time.Now().Before(deadline.Add(-2 * time.Second)); i++ {
		time.Sleep(200 * time.Millisecond)
		name := fmt.Sprintf("sim%04d", i%hosts)
		id := uint64(1 + int(time.Since(start).Seconds())/2)
		t0 := time.Now()
		rep, err := op.Decide(ctx, name, fleet.Decision{Request: id, Verdict: "approve-once"})
		d := decisionTiming{Host: name, ID: id, T0: t0.UnixNano(), RTT: int64(time.Since(t0))}
		if err != nil || (rep.Code != fleet.CodeOK && rep.Code != fleet.CodeAlreadyDecided) {
			d.Err = fmt.Sprintf("%s/%d: %v %+v", name, id, err, rep)
		}
		out = append(out, d)
	}
	return out
}

// operatorProcess runs operate in a child process (this test binary,
// TestFleetLoadOperator) and returns its timings.
func operatorProcess(t *testing.T, url, creds string, hosts int, start, deadline time.Time) []decisionTiming {
	t.Helper()
	out := filepath.Join(t.TempDir(), "decisions.json")
	cmd := exec.Command(os.Args[0], "-test.run=^TestFleetLoadOperator$", "-test.count=1")
	cmd.Env = append(os.Environ(), "WARDEN_FLEET_LOAD_CHILD="+strings.Join([]string{url, creds, strconv.Itoa(hosts),
		strconv.FormatInt(start.UnixNano(), 10), strconv.FormatInt(deadline.UnixNano(), 10), out}, ","))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the operator's process: %v\n%s", err, b)
	}
	var ds []decisionTiming
	b, err := os.ReadFile(out)
	if err != nil || json.Unmarshal(b, &ds) != nil {
		t.Fatalf("the operator's process wrote no timings: %v", err)
	}
	return ds
}

// TestFleetLoadOperator is TestFleetLoad's operator in its own process
// (WARDEN_FLEET_LOAD_OPERATOR=process); on its own it does nothing.
func TestFleetLoadOperator(t *testing.T) {
	args := strings.Split(os.Getenv("WARDEN_FLEET_LOAD_CHILD"), ",")
	if len(args) != 6 {
		t.Skip("the operator of TestFleetLoad with WARDEN_FLEET_LOAD_OPERATOR=process; nothing to do on its own")
	}
	hosts, _ := strconv.Atoi(args[2])
	startNs, _ := strconv.ParseInt(args[3], 10, 64)
	deadlineNs, _ := strconv.ParseInt(args[4], 10, 64)
	c, err := fleet.LoadCreds(args[1])
	if err != nil {
		t.Fatal(err)
	}
	op, err := fleet.Dial(args[0], c, "", fleet.RoleOperator)
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	ds := operate(t.Context(), op, hosts, time.Unix(0, startNs), time.Unix(0, deadlineNs))
	b, _ := json.Marshal(ds)
	if err := os.WriteFile(args[5], b, 0o600); err != nil {
		t.Fatal(err)
	}
}
