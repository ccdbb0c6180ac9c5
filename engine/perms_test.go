package engine

// Permission requests end to end: a real hook process (this test binary,
// scenario "perms-*") calls a test-only capability, "testfx.do", that
// asks RequestPermission for a hands.exec of its argument on a test
// subject, exactly as the hands capabilities do; the test plays the
// operator through the engine's facade.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wardenhq/warden/engine/perms"
	"github.com/wardenhq/warden/engine/sdk/hookkit"
	"github.com/wardenhq/warden/engine/sdk/protocol"
	"github.com/wardenhq/warden/storage"
)

const permsSubject = "hands:/srv/warden-perms-test"

// testfxDo is the test-only capability method "testfx.do", given only to
// the engines of these tests (setupPerms), never to a production registry.
var testfxDo = map[string]capFunc{"do": func(ctx context.Context, r *activeRun, args []json.RawMessage) (json.RawMessage, *protocol.Error) {
	if len(args) != 1 {
		return nil, &protocol.Error{Code: protocol.CodeBadFrame, Message: "testfx.do: want [content]"}
	}
	if err := r.e.RequestPermission(ctx, r, permsSubject, perms.OpExec, args[0]); err != nil {
		var pe *protocol.Error
		if errors.As(err, &pe) {
			return nil, pe
		}
		return nil, &protocol.Error{Code: protocol.CodeRunEnded, Message: err.Error()}
	}
	return json.RawMessage(`"done"`), nil
}}

// setupPerms is setupRun with testfx.do in the engine's registry.
func setupPerms(t *testing.T, hooks map[string]string) *Engine {
	t.Helper()
	e := setupRun(t, hooks)
	e.capabilities["testfx"] = testfxDo
	return e
}

// permsScenario is the hook side. perms-call calls testfx.do once per
// argument, in order; perms-flood N makes N calls at once. Each call
// prints "CHECK perms-call I CONTENT: ok" or "...: code=C msg=M".
func permsScenario(name string, args []string) int {
	c, err := hookkit.Connect()
	if err != nil {
		say("connect failed: %v", err)
		return 1
	}
	call := func(i int, content string) {
		_, err := c.Call("testfx", "do", content)
		if err != nil {
			say("perms-call %d %s: code=%s msg=%v", i, content, hookkit.Code(err), err)
			return
		}
		say("perms-call %d %s: ok", i, content)
	}
	switch name {
	case "perms-call":
		for i, a := range args {
			call(i, a)
		}
	case "perms-flood":
		n, _ := strconv.Atoi(args[0])
		var wg sync.WaitGroup
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() { defer wg.Done(); call(i, fmt.Sprintf("flood-%d", i)) }()
		}
		wg.Wait()
	}
	return 0
}

// nextPending waits for the next request opened (an undecided one).
func nextPending(t *testing.T, sub *Subscription) Request {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("no request came: %v", err)
		}
		if ev.Kind == EventRequest && ev.Request.Decision == nil {
			return *ev.Request
		}
	}
}

// startPermsRun starts hook with an operator attached and a subscription.
func startPermsRun(t *testing.T, e *Engine, hook string) (*RunHandle, *Subscription) {
	t.Helper()
	detach := e.AttachOperator()
	t.Cleanup(detach)
	sub := e.Subscribe()
	t.Cleanup(sub.Close)
	h, err := e.StartRun(testActor, RunRequest{Module: "testmod", Hook: hook, Jail: JailOff})
	if err != nil {
		t.Fatal(err)
	}
	return h, sub
}

func permsYAML(scenario string, args ...string) string {
	// 3 s idle: short enough that a test can sleep past it, long enough
	// for a race-built child to start on a loaded machine.
	return escapeYAML(scenario, args...) + "    timeout: 2m\n    idle_timeout: 3s\n"
}

func kinds(t *testing.T, e *Engine, kind string) []Receipt {
	t.Helper()
	rs, err := e.Receipts(ReceiptFilter{Kind: kind})
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// TestPermsApproveOnceThenAskedAgain: the call the policy denies becomes a
// request and waits (its idle clock paused); approve-once lets that call
// through; the identical call after it is asked again, and the deny
// reason of that second request reaches the hook.
func TestPermsApproveOnceThenAskedAgain(t *testing.T) {
	e := setupPerms(t, map[string]string{"r": permsYAML("perms-call", "make all", "make all")})
	h, sub := startPermsRun(t, e, "r")

	first := nextPending(t, sub)
	if first.Subject != permsSubject || first.Operation != perms.OpExec || string(first.Content) != `"make all"` ||
		first.Requester.Run != h.ID || first.Requester.Hook != "r" {
		t.Fatalf("request: %+v", first)
	}
	if want := perms.Digest(perms.OpExec, []byte(`"make all"`)); first.Digest != want {
		t.Fatalf("digest %s, want %s", first.Digest, want)
	}
	// 1h by default, but never later than the waiting run's deadline (2m).
	if d := first.Expires.Sub(first.Created); d > 2*time.Minute || d < time.Minute {
		t.Errorf("expires %s after creation, want the run's deadline, 2m after its start", d)
	}
	time.Sleep(4 * time.Second) // past the 3s idle limit: the clock is paused
	if _, err := e.Approve(testActor, first.ID, "looked fine"); err != nil {
		t.Fatal(err)
	}
	second := nextPending(t, sub)
	if second.ID == first.ID || second.Digest != first.Digest {
		t.Fatalf("second request %+v", second)
	}
	if _, err := e.Deny(testActor, second.ID, "not twice in a row"); err != nil {
		t.Fatal(err)
	}
	o := h.Wait()
	if !o.OK() {
		t.Fatalf("run %s: %s", o.Run.Status, o.Run.Error)
	}
	cs := checks(t, e, o.Run.ID)
	wantCheck(t, cs, "perms-call 0 make all:", ": ok")
	wantCheck(t, cs, "perms-call 1 make all:", "code=permission_denied")
	wantCheck(t, cs, "perms-call 1 make all:", "not twice in a row")

	got, err := e.Request(first.ID)
	if err != nil {
		t.Fatal(err)
	}
	if c := got.Claim; c == nil || !c.Used || c.By != h.ID {
		t.Errorf("the approve-once claim was not consumed by the waiting call: %+v", c)
	}
	if n := len(kinds(t, e, "request.open")); n != 2 {
		t.Errorf("%d request.open receipts, want 2", n)
	}
	if n := len(kinds(t, e, "request.decide")); n != 2 {
		t.Errorf("%d request.decide receipts, want 2", n)
	}
	pending, _ := e.Requests(RequestFilter{})
	all, _ := e.Requests(RequestFilter{All: true})
	if len(pending) != 0 || len(all) != 2 {
		t.Errorf("list: %d pending, %d in all", len(pending), len(all))
	}
}

// TestPermsApproveAlways: approve-always adds an exact rule at a new
// revision; later identical calls go through without a request, a
// different one is asked.
func TestPermsApproveAlways(t *testing.T) {
	e := setupPerms(t, map[string]string{
		"r":     permsYAML("perms-call", "ls", "ls", "ls -la"),
		"again": permsYAML("perms-call", "ls"),
	})
	if _, err := e.SetPolicy(testActor, Policy{Subject: permsSubject, Workspace: storage.Workspace{Read: true}}, 0); err != nil {
		t.Fatal(err)
	}
	h, sub := startPermsRun(t, e, "r")
	first := nextPending(t, sub)
	_, rule, p, err := e.ApproveAlways(testActor, first.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	if rule.Operation != perms.OpExec || rule.Digest != first.Digest || p.Revision != 1 || len(p.Rules) != 1 || !p.Workspace.Read {
		t.Fatalf("rule %+v, policy %+v", rule, p)
	}
	other := nextPending(t, sub)
	if string(other.Content) != `"ls -la"` || other.Revision != 1 {
		t.Fatalf("the request after the rule: %+v", other)
	}
	e.Deny(testActor, other.ID, "only ls")
	o := h.Wait()
	cs := checks(t, e, o.Run.ID)
	wantCheck(t, cs, "perms-call 0 ls:", ": ok")
	wantCheck(t, cs, "perms-call 1 ls:", ": ok")
	wantCheck(t, cs, "perms-call 2 ls -la:", "only ls")

	o, err = e.RunHook(testActor, RunRequest{Module: "testmod", Hook: "again", Jail: JailOff})
	if err != nil {
		t.Fatal(err)
	}
	wantCheck(t, checks(t, e, o.Run.ID), "perms-call 0 ls:", ": ok")
	if all, _ := e.Requests(RequestFilter{All: true}); len(all) != 2 {
		t.Errorf("%d requests, want 2 (the rule answers the identical calls)", len(all))
	}
	if n := len(kinds(t, e, "policy.rule")); n != 1 {
		t.Errorf("%d policy.rule receipts", n)
	}
}

// TestPermsPolicyAllowsAndNoOperator: an operation the policy allows
// needs no request; one it does not, with nobody to ask, is denied at once
// and the stream says why.
func TestPermsPolicyAllowsAndNoOperator(t *testing.T) {
	e := setupPerms(t, map[string]string{"r": permsYAML("perms-call", "true")})
	o := run(t, e, "r", nil)
	cs := checks(t, e, o.Run.ID)
	wantCheck(t, cs, "perms-call 0 true:", "code=permission_denied")
	wantCheck(t, cs, "perms-call 0 true:", "no operator attached")
	if !strings.Contains(streamText(t, e, o.Run.ID), "no operator is attached") {
		t.Error("the stream does not say why the call was denied")
	}
	if _, err := e.SetPolicy(testActor, Policy{Subject: permsSubject, Execute: true}, 0); err != nil {
		t.Fatal(err)
	}
	o = run(t, e, "r", nil)
	wantCheck(t, checks(t, e, o.Run.ID), "perms-call 0 true:", ": ok")
	if all, _ := e.Requests(RequestFilter{All: true}); len(all) != 1 {
		t.Errorf("%d requests, want 1", len(all))
	}
}

// TestPermsExpired: a request nobody decides expires; the engine denies
// it ("expired") and the call gets permission_denied.
func TestPermsExpired(t *testing.T) {
	e := setupPerms(t, map[string]string{"r": permsYAML("perms-call", "sleep 1")})
	e.requestTTL = 1500 * time.Millisecond
	h, sub := startPermsRun(t, e, "r")
	req := nextPending(t, sub)
	if d := req.Expires.Sub(req.Created); d != 1500*time.Millisecond {
		t.Errorf("ttl %s", d)
	}
	o := h.Wait()
	wantCheck(t, checks(t, e, o.Run.ID), "perms-call 0 sleep 1:", "code=permission_denied")
	wantCheck(t, checks(t, e, o.Run.ID), "perms-call 0 sleep 1:", "expired")
	got, _ := e.Request(req.ID)
	if d := got.Decision; d == nil || d.Verdict != Deny || d.By != "engine" || d.Reason != "expired" {
		t.Fatalf("decision %+v", got.Decision)
	}
	// One expiry, one receipt: the engine's deny, no refused decision
	// besides it.
	if rs := kinds(t, e, storage.KindRequestRefused); len(rs) != 0 {
		t.Errorf("an expiry left %d request.refused receipts besides its deny: %+v", len(rs), rs)
	}
	if _, err := e.Approve(testActor, req.ID, ""); !errors.Is(err, ErrAlreadyDecided) {
		t.Fatalf("approving an expired request: %v", err)
	}
}

// TestPermsPendingLimit: with 32 requests of one subject pending, the 33rd
// is refused at once, and the refusal is a receipt.
func TestPermsPendingLimit(t *testing.T) {
	e := setupPerms(t, map[string]string{"r": permsYAML("perms-flood", "33")})
	h, _ := startPermsRun(t, e, "r")
	deadline := time.Now().Add(time.Minute)
	for {
		pending, err := e.Requests(RequestFilter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(pending) == MaxPendingRequests && len(kinds(t, e, "request.refused")) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d pending, %d refusals", len(pending), len(kinds(t, e, "request.refused")))
		}
		time.Sleep(50 * time.Millisecond)
	}
	pending, _ := e.Requests(RequestFilter{})
	for _, r := range pending {
		if _, err := e.Deny(testActor, r.ID, "flood"); err != nil {
			t.Fatal(err)
		}
	}
	o := h.Wait()
	var limited, denied int
	for _, c := range checks(t, e, o.Run.ID) {
		switch {
		case strings.Contains(c, "32 pending") && strings.Contains(c, "warden perms list") && strings.Contains(c, "permission_denied"):
			limited++
		case strings.Contains(c, "denied by local:test") && strings.HasSuffix(c, ": flood"):
			denied++
		}
	}
	if limited != 1 || denied != 32 {
		t.Fatalf("%d refused by the limit, %d denied; checks:\n%s", limited, denied, strings.Join(checks(t, e, o.Run.ID), "\n"))
	}
	ref := kinds(t, e, "request.refused")[0]
	if ref.Subject != permsSubject || !strings.Contains(string(ref.Details), `"reason":"limit"`) {
		t.Errorf("refusal receipt %+v %s", ref, ref.Details)
	}
}

// TestPermsStaleRevision: a decision after the policy changed is refused
// ("the policy changed; review again") and receipted; the waiting call
// asks again under the new revision, and that request can be decided.
func TestPermsStaleRevision(t *testing.T) {
	e := setupPerms(t, map[string]string{"r": permsYAML("perms-call", "deploy")})
	h, sub := startPermsRun(t, e, "r")
	first := nextPending(t, sub)
	if first.Revision != 0 {
		t.Fatalf("revision %d", first.Revision)
	}
	p, err := e.SetPolicy(testActor, Policy{Subject: permsSubject, Workspace: storage.Workspace{Read: true}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if p, err = e.SetPolicy(testActor, p, p.Revision); err != nil || p.Revision != 1 {
		t.Fatal(p, err)
	}
	_, _, _, err = e.ApproveAlways(testActor, first.ID, "")
	var ref *Refusal
	if !errors.As(err, &ref) || !strings.Contains(err.Error(), "the policy changed; review again") {
		t.Fatalf("stale decision: %v", err)
	}
	if rs := kinds(t, e, "request.refused"); len(rs) != 1 || !strings.Contains(string(rs[0].Details), `"reason":"stale"`) {
		t.Fatalf("refusal receipts %+v", rs)
	}
	if p, _, _ := e.Policy(permsSubject); len(p.Rules) != 0 || p.Revision != 1 {
		t.Fatalf("the refused approve-always changed the policy: %+v", p)
	}
	again := nextPending(t, sub)
	if again.ID == first.ID || again.Revision != 1 || again.Digest != first.Digest {
		t.Fatalf("asked again: %+v", again)
	}
	if _, err := e.Approve(testActor, again.ID, ""); err != nil {
		t.Fatal(err)
	}
	o := h.Wait()
	wantCheck(t, checks(t, e, o.Run.ID), "perms-call 0 deploy:", ": ok")
}

// TestPermsPolicyCASConflict: two writers with the same expected revision:
// one wins, the other gets a *ConflictError naming both revisions.
func TestPermsPolicyCASConflict(t *testing.T) {
	e := openTestEngine(t)
	base, err := e.SetPolicy(testActor, Policy{Subject: permsSubject}, 0)
	if err != nil {
		t.Fatal(err)
	}
	base, _ = e.SetPolicy(testActor, base, base.Revision) // now at 1
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := base
			p.Execute, p.Network = i == 0, i == 1
			_, errs[i] = e.SetPolicy(Actor(fmt.Sprintf("local:writer%d", i)), p, base.Revision)
		}()
	}
	wg.Wait()
	var wins, conflicts int
	for _, err := range errs {
		var ce *ConflictError
		switch {
		case err == nil:
			wins++
		case errors.As(err, &ce) && ce.Expected == 1 && ce.Actual == 2 && strings.Contains(err.Error(), "revision 1") && strings.Contains(err.Error(), "revision 2"):
			conflicts++
		default:
			t.Errorf("unexpected: %v", err)
		}
	}
	if wins != 1 || conflicts != 1 {
		t.Fatalf("%d wins, %d conflicts", wins, conflicts)
	}
	if p, _, _ := e.Policy(permsSubject); p.Revision != 2 || p.Execute == p.Network {
		t.Fatalf("policy %+v", p)
	}
}

// ---- network: the jail's permission request ----

// startNetRun starts the jailed hook in the background: StartRun waits on
// the network request before it spawns anything.
func startNetRun(e *Engine, req RunRequest) chan *RunHandle {
	ch := make(chan *RunHandle, 1)
	go func() {
		h, err := e.StartRun(testActor, req)
		if err != nil {
			fmt.Fprintln(os.Stderr, "StartRun:", err)
			close(ch)
			return
		}
		ch <- h
	}()
	return ch
}

func waitRun(t *testing.T, ch chan *RunHandle) Outcome {
	t.Helper()
	h, ok := <-ch
	if !ok {
		t.Fatal("StartRun failed")
	}
	return h.Wait()
}

// TestPermsNetworkRequest: a jailed hook that declares network without a
// grant asks before spawn. approve-once gives this run network (the TCP
// connect works), and the next run asks again; deny runs it without
// network and the stream says why; approve-always adds a rule for the
// hook, and later runs get network without asking; the inline prompt of
// `hook run` may answer too.
func TestPermsNetworkRequest(t *testing.T) {
	needJail(t)
	port := loopbackListener(t)
	e := setupRun(t, map[string]string{"tcp": escapeYAML("escape-tcp", port) + "    network: true\n"})
	// detach is replaced below (the inline prompt detaches, then attaches
	// again): the deferred call must end the attachment current then.
	detach := e.AttachOperator()
	defer func() { detach() }()
	sub := e.Subscribe()
	defer sub.Close()
	jailed := RunRequest{Module: "testmod", Hook: "tcp", Jail: JailBwrap}

	// approve-once
	ch := startNetRun(e, jailed)
	req := nextPending(t, sub)
	if req.Operation != perms.OpNetwork || req.Subject != "module:testmod" || string(req.Content) != `{"module":"testmod"}` {
		t.Fatalf("network request %+v", req)
	}
	if _, err := e.Approve(testActor, req.ID, "just this once"); err != nil {
		t.Fatal(err)
	}
	o := waitRun(t, ch)
	wantEscape(t, "approve-once", checks(t, e, o.Run.ID), "escape-tcp", "escape-tcp ok")
	if d := hookStartDetails(t, e, o.Run.ID); d["network"] != true || d["networkRequest"] != float64(req.ID) {
		t.Errorf("hook.start after approve-once: %v", d)
	}
	if got, _ := e.Request(req.ID); got.Requester.Run != o.Run.ID {
		t.Errorf("request names run %s, the run is %s", got.Requester.Run, o.Run.ID)
	}

	// deny: asked again (approve-once was for one run), no network
	ch = startNetRun(e, jailed)
	req2 := nextPending(t, sub)
	if req2.ID == req.ID || req2.Digest != req.Digest {
		t.Fatalf("second network request %+v", req2)
	}
	if _, err := e.Deny(testActor, req2.ID, "no network on Fridays"); err != nil {
		t.Fatal(err)
	}
	o = waitRun(t, ch)
	wantEscape(t, "deny", checks(t, e, o.Run.ID), "escape-tcp", "escape-tcp blocked: EPERM")
	if d := hookStartDetails(t, e, o.Run.ID); d["network"] != false {
		t.Errorf("hook.start after deny: %v", d)
	}
	if s := streamText(t, e, o.Run.ID); !strings.Contains(s, "no network on Fridays") || !strings.Contains(s, "runs without network") ||
		!strings.Contains(s, "warden perms policy set module:testmod --network true") {
		t.Errorf("the stream does not say why the hook runs without network:\n%s", s)
	}

	// the inline prompt answers
	detach()
	var prompt string
	inline := jailed
	inline.Confirm = func(ctx context.Context, msg string) (bool, error) { prompt = msg; return true, nil }
	o = waitRun(t, startNetRun(e, inline))
	if prompt != "Allow network for testmod/tcp?" {
		t.Errorf("prompt %q", prompt)
	}
	if got, _ := e.Request(nextPending(t, sub).ID); got.Decision == nil || got.Decision.Verdict != ApproveOnce || got.Decision.Reason != "answered at the terminal" {
		t.Errorf("the inline answer: %+v", got.Decision)
	}
	if d := hookStartDetails(t, e, o.Run.ID); d["network"] != true {
		t.Errorf("hook.start after the inline yes: %v", d)
	}
	detach = e.AttachOperator()

	// approve-always: a rule for this hook, later runs do not ask
	ch = startNetRun(e, jailed)
	req3 := nextPending(t, sub)
	_, rule, p, err := e.ApproveAlways(testActor, req3.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	if rule.Operation != perms.OpNetwork || p.Subject != "module:testmod" || p.Network {
		t.Fatalf("rule %+v policy %+v", rule, p)
	}
	waitRun(t, ch)
	before, _ := e.Requests(RequestFilter{All: true})
	o, err = e.RunHook(testActor, jailed)
	if err != nil {
		t.Fatal(err)
	}
	wantEscape(t, "rule", checks(t, e, o.Run.ID), "escape-tcp", "escape-tcp ok")
	if d := hookStartDetails(t, e, o.Run.ID); d["network"] != true || !strings.Contains(fmt.Sprint(d["networkVia"]), "rule") {
		t.Errorf("hook.start under the rule: %v", d)
	}
	if after, _ := e.Requests(RequestFilter{All: true}); len(after) != len(before) {
		t.Errorf("a run under the rule still asked (%d requests, then %d)", len(before), len(after))
	}
}

// TestRequestExpiresBeforeTheRunsDeadline: a request the operator does
// not answer, asked by a hook whose timeout is shorter than the request's
// TTL, expires answerMargin before the run's deadline: the hook hears
// "expired" (permission_denied) and ends on its own, instead of being
// killed by its timeout mid-question.
func TestRequestExpiresBeforeTheRunsDeadline(t *testing.T) {
	e := setupPerms(t, map[string]string{"r": escapeYAML("perms-call", "sleep 1") + "    timeout: 6s\n"})
	e.requestTTL = 5 * time.Minute
	h, sub := startPermsRun(t, e, "r")
	req := nextPending(t, sub)
	o := h.Wait()
	deadline := o.Run.Deadline
	if got, want := deadline.Sub(req.Expires), answerMargin(6*time.Second); got != want {
		t.Errorf("the request expires %s before the run's deadline, want %s", got, want)
	}
	if o.Run.Status != "succeeded" && strings.Contains(o.Run.Error, "timeout") {
		t.Fatalf("the run hit its timeout before its request expired: %s %s", o.Run.Status, o.Run.Error)
	}
	wantCheck(t, checks(t, e, o.Run.ID), "perms-call 0 sleep 1:", "expired")
}
