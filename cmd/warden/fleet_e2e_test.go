package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/teatest"

	"github.com/wardenhq/warden/engine/fleet"
	"github.com/wardenhq/warden/engine/fleet/fleettest"
	"github.com/wardenhq/warden/storage"
	"github.com/wardenhq/warden/themes"
	"github.com/wardenhq/warden/tui"
)

// natsServer starts (or reuses) a private nats-server -js on loopback in
// dir with scripts/nats-test, and returns its URL. Without nats-server
// the test fails under CI and is skipped elsewhere, saying why.
func natsServer(t *testing.T, dir string) string {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("..", "..", "scripts", "nats-test"))
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command("bash", script, dir)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := fmt.Sprintf("no nats-server for the fleet tests (%s: %v: %s)", script, err, strings.TrimSpace(stderr.String()))
		if os.Getenv("CI") == "true" {
			t.Fatal(msg + "; CI needs one: apt-get install nats-server")
		}
		t.Skip(msg)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}

// killNats kills the test's nats-server outright (SIGKILL: no goodbye).
func killNats(t *testing.T, dir string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "nats.pid"))
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	fmt.Sscan(string(b), &pid)
	if pid <= 1 {
		t.Fatalf("bad nats pid %q", b)
	}
	syscall.Kill(pid, syscall.SIGKILL)
	waitUntil(t, "nats-server to die", 10*time.Second, func() bool { return pidGone(pid) }, nil)
}

// fleetHost is one `warden serve --fleet` on its own data dir.
type fleetHost struct {
	name, data string
	srv        *exec.Cmd
	out        *lockedBuffer
}

type fleetRig struct {
	t        *testing.T
	bin      string
	base     string
	natsDir  string
	url      string
	hello    string
	hosts    map[string]*fleetHost
	extra    []string // flags every fleet command and serve gets (--fleet-domain)
	runsMu   sync.Mutex
	runProcs []*exec.Cmd
}

// setUp builds warden into r.bin, stages the hello module and
// initialises the fleet with admin's credentials.
func (r *fleetRig) setUp() {
	r.t.Helper()
	buildWarden(r.t, r.bin)
	r.hello = filepath.Join(r.base, "modules", "hello")
	os.MkdirAll(filepath.Dir(r.hello), 0o755)
	if out, err := exec.Command("cp", "-a", filepath.Join("..", "..", "examples", "modules", "hello"), r.hello).CombinedOutput(); err != nil {
		r.t.Fatalf("copy hello: %v: %s", err, out)
	}
	if res := r.fleet("admin", "init"); res.code != 0 {
		r.t.Fatalf("fleet init with admin's credentials: %s", res)
	}
}

func (r *fleetRig) creds(user string) string { return filepath.Join(r.natsDir, "creds", user) }

// fleet runs `warden fleet ARGS` as user (role from the flags given).
func (r *fleetRig) fleet(user string, args ...string) result {
	r.t.Helper()
	// The operator's own data dir keeps what verify found to match.
	full := append(append([]string{"fleet", "--data-dir", filepath.Join(r.base, "operator-"+user), "--fleet", r.url, "--fleet-creds", r.creds(user)}, r.extra...), args...)
	return r.cmd(full...)
}

func (r *fleetRig) cmd(args ...string) result {
	r.t.Helper()
	var out, errb bytes.Buffer
	c := exec.Command(r.bin, args...)
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		r.t.Fatal(err)
	}
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

func (r *fleetRig) start(name string) *fleetHost {
	r.t.Helper()
	h := r.hosts[name]
	if h == nil {
		h = &fleetHost{name: name, data: filepath.Join(r.base, name)}
		r.hosts[name] = h
		if res := r.cmd("--data-dir", h.data, "module", "add", r.hello); res.code != 0 {
			r.t.Fatalf("module add on %s: %s", name, res)
		}
	}
	h.out = &lockedBuffer{}
	h.srv = exec.Command(r.bin, append([]string{"--data-dir", h.data, "serve", "--fleet", r.url, "--fleet-creds", r.creds(name), "--fleet-host", name}, r.extra...)...)
	h.srv.Stdout, h.srv.Stderr = h.out, h.out
	if err := h.srv.Start(); err != nil {
		r.t.Fatal(err)
	}
	srv := h.srv
	r.t.Cleanup(func() {
		srv.Process.Signal(syscall.SIGTERM)
		srv.Wait()
	})
	waitUntil(r.t, name+" serving", 20*time.Second, func() bool { return strings.Contains(h.out.String(), "serving data dir") }, h.out.String)
	return h
}

// logs is every host's serve output, for a failure message.
func (r *fleetRig) logs() string {
	var b strings.Builder
	for n, h := range r.hosts {
		fmt.Fprintf(&b, "--- %s:\n%s\n", n, h.out.String())
	}
	return b.String()
}

func (r *fleetRig) stop(name string) {
	r.t.Helper()
	h := r.hosts[name]
	h.srv.Process.Signal(syscall.SIGTERM)
	h.srv.Wait()
}

// ask starts hello/greet on host (attached to its serve): its
// operator.confirm becomes a request. The returned channel gets the run's
// result when it ends.
func (r *fleetRig) ask(host, target string) chan result {
	r.t.Helper()
	done := make(chan result, 1)
	var out, errb bytes.Buffer
	c := exec.Command(r.bin, "--data-dir", r.hosts[host].data, "hook", "run", "hello", "greet", "--input", "target="+target, "--jail=off")
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Start(); err != nil {
		r.t.Fatal(err)
	}
	r.runsMu.Lock()
	r.runProcs = append(r.runProcs, c)
	r.runsMu.Unlock()
	go func() {
		err := c.Wait()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		done <- result{code: code, stdout: out.String(), stderr: errb.String()}
	}()
	return done
}

type fleetReqJSON struct {
	Requests []struct {
		Host    string `json:"host"`
		Request struct {
			ID        uint64 `json:"id"`
			Operation string `json:"operation"`
			Content   json.RawMessage
			Decision  *struct {
				Verdict string `json:"verdict"`
				By      string `json:"by"`
			} `json:"decision"`
		} `json:"request"`
	} `json:"requests"`
	Duplicates int `json:"duplicates"`
}

func (r *fleetRig) requests(all bool) fleetReqJSON {
	r.t.Helper()
	args := []string{"requests", "--json"}
	if all {
		args = append(args, "--all")
	}
	res := r.fleet("alice", args...)
	var out fleetReqJSON
	if res.code != 0 || json.Unmarshal([]byte(res.stdout), &out) != nil {
		r.t.Fatalf("fleet requests: %s", res)
	}
	return out
}

// waitRequest waits until the fleet shows a request on host whose content
// contains marker, and returns its id.
func (r *fleetRig) waitRequest(host, marker string, decided bool) uint64 {
	r.t.Helper()
	var id uint64
	var last fleetReqJSON
	waitUntil(r.t, "the fleet to show "+host+"'s request "+marker, 30*time.Second, func() bool {
		last = r.requests(true)
		for _, q := range last.Requests {
			if q.Host == host && strings.Contains(string(q.Request.Content), marker) && (q.Request.Decision != nil) == decided {
				id = q.Request.ID
				return true
			}
		}
		return false
	}, func() string { b, _ := json.Marshal(last); return string(b) })
	return id
}

type receiptJSON struct {
	Seq     uint64 `json:"seq"`
	Kind    string `json:"kind"`
	Actor   string `json:"actor"`
	Summary string `json:"summary"`
}

func (r *fleetRig) receipts(host string) []receiptJSON {
	r.t.Helper()
	res := r.cmd("--data-dir", r.hosts[host].data, "--json", "receipts", "list")
	var out []receiptJSON
	if res.code != 0 {
		r.t.Fatalf("receipts list on %s: %s", host, res)
	}
	if err := json.Unmarshal([]byte(res.stdout), &out); err != nil {
		var wrapped struct {
			Receipts []receiptJSON `json:"receipts"`
		}
		if err := json.Unmarshal([]byte(res.stdout), &wrapped); err != nil {
			r.t.Fatalf("receipts list --json: %v: %s", err, res.stdout)
		}
		out = wrapped.Receipts
	}
	return out
}

func hasReceipt(rs []receiptJSON, kind, actor string) bool {
	for _, r := range rs {
		if r.Kind == kind && r.Actor == actor {
			return true
		}
	}
	return false
}

// TestFleetEndToEnd: a real nats-server -js and three `warden serve`
// processes on three data dirs as hosts hosta, hostb and hostc.
func TestFleetEndToEnd(t *testing.T) {
	base := privateDir(t, "warden-fleet-")
	r := &fleetRig{t: t, base: base, natsDir: filepath.Join(base, "nats"), bin: filepath.Join(base, "bin", "warden"), hosts: map[string]*fleetHost{}}
	r.url = natsServer(t, r.natsDir)
	t.Cleanup(func() {
		r.runsMu.Lock()
		for _, c := range r.runProcs {
			if c.ProcessState == nil {
				c.Process.Kill()
			}
		}
		r.runsMu.Unlock()
		if b, err := os.ReadFile(filepath.Join(r.natsDir, "nats.pid")); err == nil {
			var pid int
			fmt.Sscan(string(b), &pid)
			if pid > 1 {
				stopPID(pid) // before its dir is removed: a live server would write it again
			}
		}
	})
	r.setUp()

	// A bad fleet config refuses to start and says which setting.
	if res := r.cmd("--data-dir", filepath.Join(base, "bad"), "serve", "--fleet", r.url, "--fleet-creds", r.creds("hosta")); res.code != 2 || !strings.Contains(res.stderr, "--fleet-host") {
		t.Errorf("serve without --fleet-host: %s", res)
	}
	wrong := filepath.Join(base, "wrong.creds")
	os.WriteFile(wrong, []byte("hosta:not-the-password\n"), 0o600)
	if res := r.cmd("--data-dir", filepath.Join(base, "bad"), "serve", "--fleet", r.url, "--fleet-creds", wrong, "--fleet-host", "hosta"); res.code != 1 || !strings.Contains(res.stderr, "refused these credentials") {
		t.Errorf("serve with a wrong password: %s", res)
	}

	for _, h := range []string{"hosta", "hostb", "hostc"} {
		r.start(h)
	}
	waitUntil(t, "three hosts up", 20*time.Second, func() bool {
		res := r.fleet("bob", "--role", "viewer", "hosts", "--json")
		return strings.Count(res.stdout, `"up": true`) == 3
	}, nil)

	// doctor checks the fleet connection as the host.
	doctorFleet := func(host string) string {
		res := r.cmd("--data-dir", r.hosts[host].data, "doctor", "--fleet", r.url, "--fleet-creds", r.creds(host), "--fleet-host", host)
		for _, l := range strings.Split(res.stdout, "\n") {
			if f := strings.Fields(l); len(f) > 1 && f[1] == "fleet" {
				return l
			}
		}
		return res.String()
	}
	if l := doctorFleet("hostb"); !strings.HasPrefix(l, "ok") || !strings.Contains(l, "its key is pinned") {
		t.Errorf("doctor's fleet check on B: %s", l)
	}

	// A hook on host B asks; the fleet sees it.
	runB := r.ask("hostb", "from-b")
	id := r.waitRequest("hostb", "from-b", false)

	// A viewer's decision reaches B and is refused and recorded there.
	if res := r.fleet("bob", "--role", "viewer", "approve", "hostb", fmt.Sprint(id)); res.code != 1 || !strings.Contains(res.stderr, "may watch") {
		t.Errorf("viewer approve: %s", res)
	}
	if !hasReceipt(r.receipts("hostb"), "access.refused", "fleet:bob") {
		t.Errorf("B has no access.refused receipt for fleet:bob: %+v", r.receipts("hostb"))
	}
	// A viewer claiming to be an operator: the fleet's server refuses to
	// carry it (subject permissions), and B never hears of it.
	if res := r.fleet("bob", "approve", "hostb", fmt.Sprint(id)); res.code != 1 || !strings.Contains(res.stderr, "do not allow") {
		t.Errorf("viewer as operator: %s", res)
	}

	// Two operators approve at once: one wins, the other gets "already decided".
	var wg sync.WaitGroup
	results := map[string]result{}
	var mu sync.Mutex
	for _, op := range []string{"alice", "carol"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := r.fleet(op, "approve", "hostb", fmt.Sprint(id))
			mu.Lock()
			results[op] = res
			mu.Unlock()
		}()
	}
	wg.Wait()
	winner, loser := "alice", "carol"
	if results["alice"].code != 0 {
		winner, loser = "carol", "alice"
	}
	if results[winner].code != 0 || results[loser].code != 1 || !strings.Contains(results[loser].stderr, "already decided") ||
		!strings.Contains(results[loser].stderr, "fleet:"+winner) {
		t.Fatalf("race: alice %s; carol %s", results["alice"], results["carol"])
	}
	select {
	case res := <-runB:
		if res.code != 0 || !strings.Contains(res.stdout, "Hello, from-b!") {
			t.Errorf("B's hook after the fleet's approval: %s", res)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("B's hook did not proceed after the approval")
	}
	if !hasReceipt(r.receipts("hostb"), "request.decide", "fleet:"+winner) {
		t.Errorf("B's receipts do not name fleet:%s: %+v", winner, r.receipts("hostb"))
	}
	r.waitRequest("hostb", "from-b", true)
	// B's run summary reaches the fleet too: started, then succeeded.
	waitUntil(t, "B's run summary", 20*time.Second, func() bool {
		res := r.fleet("bob", "--role", "viewer", "runs", "--json")
		var runs struct {
			Runs []struct {
				Host string `json:"host"`
				Run  struct {
					Module, Hook, Status string
				} `json:"run"`
			} `json:"runs"`
		}
		json.Unmarshal([]byte(res.stdout), &runs)
		for _, x := range runs.Runs {
			if x.Host == "hostb" && x.Run.Module == "hello" && x.Run.Hook == "greet" && x.Run.Status == "succeeded" {
				return true
			}
		}
		return false
	}, nil)

	// The fleet console (teatest, over the real client and stream): a
	// second request on B shows in the one queue with its host, and y
	// approves it on B.
	runB2 := r.ask("hostb", "by-console")
	r.waitRequest("hostb", "by-console", false)
	consoleApprove(t, r, "by-console")
	select {
	case res := <-runB2:
		if res.code != 0 || !strings.Contains(res.stdout, "Hello, by-console!") {
			t.Errorf("B's hook after the console's approval: %s", res)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("B's hook did not proceed after the console's approval")
	}

	// nats-server dies mid-run; C's request is answered locally; the
	// server comes back; the fleet shows C's request decided, once.
	killNats(t, r.natsDir)
	runC := r.ask("hostc", "from-c")
	var cid uint64
	waitUntil(t, "C's local request", 20*time.Second, func() bool {
		res := r.cmd("--data-dir", r.hosts["hostc"].data, "--json", "perms", "list")
		var got struct {
			Requests []struct {
				ID uint64 `json:"id"`
			} `json:"requests"`
		}
		var list []struct {
			ID uint64 `json:"id"`
		}
		if json.Unmarshal([]byte(res.stdout), &list) == nil && len(list) > 0 {
			cid = list[0].ID
		} else if json.Unmarshal([]byte(res.stdout), &got) == nil && len(got.Requests) > 0 {
			cid = got.Requests[0].ID
		}
		return cid != 0
	}, nil)
	if res := r.cmd("--data-dir", r.hosts["hostc"].data, "perms", "approve", fmt.Sprint(cid)); res.code != 0 {
		t.Fatalf("local approve on C: %s", res)
	}
	select {
	case res := <-runC:
		if res.code != 0 {
			t.Errorf("C's hook: %s", res)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("C's hook did not proceed after the local approval")
	}
	natsServer(t, r.natsDir) // restart: same port, same store
	r.waitRequest("hostc", "from-c", true)
	all := r.requests(true)
	n := 0
	for _, q := range all.Requests {
		if q.Host == "hostc" && q.Request.ID == cid {
			n++
			if q.Request.Decision == nil || !strings.HasPrefix(q.Request.Decision.By, "local:") {
				t.Errorf("C's request in the fleet: %+v", q.Request.Decision)
			}
		}
	}
	if n != 1 || all.Duplicates != 0 {
		t.Errorf("C's request shows %d times; %d duplicate events in the stream", n, all.Duplicates)
	}

	// Checkpoints: wait until A's head is witnessed, then verify all.
	head := func(host string) uint64 {
		rs := r.receipts(host)
		return rs[len(rs)-1].Seq
	}
	headA := func() uint64 { return head("hosta") }
	waitCheckpoint := func(host string, seq uint64) {
		waitUntil(t, fmt.Sprintf("a checkpoint of %s at seq %d", host, seq), 40*time.Second, func() bool {
			res := r.fleet("alice", "hosts", "--json")
			var hs struct {
				Hosts []struct {
					Host           string `json:"host"`
					LastCheckpoint *struct {
						Seq uint64 `json:"seq"`
					} `json:"lastCheckpoint"`
				} `json:"hosts"`
			}
			json.Unmarshal([]byte(res.stdout), &hs)
			for _, h := range hs.Hosts {
				if h.Host == host && h.LastCheckpoint != nil && h.LastCheckpoint.Seq >= seq {
					return true
				}
			}
			return false
		}, nil)
	}
	for _, h := range []string{"hosta", "hostb", "hostc"} {
		waitCheckpoint(h, head(h))
	}
	if res := r.fleet("alice", "verify"); res.code != 0 || strings.Count(res.stdout, "VERIFIED") != 3 {
		t.Fatalf("verify before any tampering: %s\n%s", res, r.logs())
	}
	// What matched is alice's to keep: the next verify starts there.
	if fi, err := os.Stat(filepath.Join(r.base, "operator-alice", "fleet", fleet.AnchorsFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("alice's verified checkpoints: %v %v", fi, err)
	}
	if res := r.fleet("alice", "verify", "hostb"); res.code != 0 || !strings.Contains(res.stdout, "verified before") {
		t.Errorf("a second verify does not start from the checkpoint verified before: %s", res)
	}

	// Host A's receipts are rewritten after a checkpoint (the whole chain
	// re-hashed, so A's own `receipts verify` finds nothing): the fleet
	// names A and the checkpoint. The rewrite is before the checkpoint
	// the last verify anchored at, so it takes --full (the anchored
	// verify is TestVerifyFromAnchor's).
	witnessed := headA()
	r.stop("hosta")
	fleettest.RewriteReceipt(t, filepath.Join(r.hosts["hosta"].data, "warden.db"), 1, "nothing to see here")
	if res := r.cmd("--data-dir", r.hosts["hosta"].data, "receipts", "verify"); res.code != 0 {
		t.Fatalf("the rewrite should leave A's chain self-consistent: %s", res)
	}
	r.start("hosta")
	res := r.fleet("alice", "verify", "--full")
	if res.code != 1 || !strings.Contains(res.stdout, "hosta: MISMATCH at checkpoint seq") || strings.Count(res.stdout, "VERIFIED") != 2 {
		t.Errorf("verify after A's rewrite: %s", res)
	}
	var vj struct {
		Hosts []struct {
			Host   string `json:"host"`
			Status string `json:"status"`
			BadSeq uint64 `json:"badSeq"`
		} `json:"hosts"`
		OK bool `json:"ok"`
	}
	res = r.fleet("alice", "verify", "--full", "--json")
	if err := json.Unmarshal([]byte(res.stdout), &vj); err != nil || vj.OK {
		t.Fatalf("verify --json: %v %s", err, res)
	}
	for _, h := range vj.Hosts {
		if h.Host == "hosta" && (h.Status != "mismatch" || h.BadSeq == 0 || h.BadSeq > witnessed) {
			t.Errorf("A's verification: %+v (witnessed up to %d)", h, witnessed)
		}
	}

	// A host that does not answer is unverified, not fine.
	r.stop("hostc")
	if res := r.fleet("alice", "verify", "hostc"); res.code != 1 || !strings.Contains(res.stdout, "UNVERIFIED") {
		t.Errorf("verify of a stopped host: %s", res)
	}

	// Host A's fleet key is swapped: the fleet refuses it, loudly, and
	// A does not start.
	r.stop("hosta")
	key := make([]byte, 32)
	rand.Read(key)
	if err := storage.WriteFileAtomic(filepath.Join(r.hosts["hosta"].data, "fleet.key"), key, 0o600); err != nil {
		t.Fatal(err)
	}
	res = r.cmd("--data-dir", r.hosts["hosta"].data, "serve", "--fleet", r.url, "--fleet-creds", r.creds("hosta"), "--fleet-host", "hosta")
	if res.code != 1 || !strings.Contains(res.stderr, "REFUSES host hosta: its fleet key changed") {
		t.Errorf("serve with a swapped key: %s", res)
	}
	if l := doctorFleet("hosta"); !strings.HasPrefix(l, "problem") || !strings.Contains(l, "REFUSES host hosta") {
		t.Errorf("doctor's fleet check with a swapped key: %s", l)
	}
}

// consoleApprove opens the fleet console as alice and approves the
// request whose message holds marker with y.
func consoleApprove(t *testing.T, r *fleetRig, marker string) {
	t.Helper()
	creds, err := fleet.LoadCreds(r.creds("alice"))
	if err != nil {
		t.Fatal(err)
	}
	cl, err := fleet.Dial(r.url, creds, "", fleet.RoleOperator)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	v := fleet.NewLiveView()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, o := range []fleet.FollowOptions{{Kind: fleet.KindRequest, Since: fleet.Window}, {Kind: fleet.KindRun, Since: fleet.Window},
		{Kind: fleet.KindCheckpoint, LastPerHost: true}} {
		go cl.Follow(ctx, v, o)
	}
	hw, err := cl.WatchHosts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m := tui.NewFleet(fleetSource{cl, hw, v}, tui.FleetOptions{Theme: themes.NoColor(), Name: cl.Name, Role: cl.Role, Refresh: 100 * time.Millisecond})
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(120, 30))
	defer tm.Quit()
	var seen []byte
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool {
		seen = append(seen, b...)
		return bytes.Contains(seen, []byte("1 pending")) && bytes.Contains(seen, []byte("HOSTB")) && bytes.Contains(seen, []byte(marker))
	}, teatest.WithDuration(20*time.Second), teatest.WithCheckInterval(50*time.Millisecond))
	tm.Type("y")
	seen = nil
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool {
		seen = append(seen, b...)
		return bytes.Contains(seen, []byte("on hostb: approve-once by fleet:alice"))
	}, teatest.WithDuration(20*time.Second), teatest.WithCheckInterval(50*time.Millisecond))
	// Hosts, from the buckets' watchers: three hosts up.
	tm.Type("1")
	seen = nil
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool {
		seen = append(seen, b...)
		return bytes.Contains(seen, []byte("LAST CHECKPOINT")) && bytes.Contains(seen, []byte("hosta                up")) &&
			bytes.Contains(seen, []byte("hostb                up")) && bytes.Contains(seen, []byte("hostc                up"))
	}, teatest.WithDuration(20*time.Second), teatest.WithCheckInterval(50*time.Millisecond))
}

// stopPID stops a test's nats-server and waits (at most 10 s) until it
// is gone.
func stopPID(pid int) {
	syscall.Kill(pid, syscall.SIGTERM)
	for i := 0; i < 200 && !pidGone(pid); i++ {
		time.Sleep(50 * time.Millisecond)
	}
	syscall.Kill(pid, syscall.SIGKILL)
}

// pidGone: the process is gone, or a zombie not reaped yet (it holds no
// files or ports any more).
func pidGone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return strings.HasPrefix(rest, "Z")
}
