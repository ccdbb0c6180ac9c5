package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wardenhq/warden/engine/broker"
	"github.com/wardenhq/warden/storage"
)

func setupRun(t *testing.T, hooks map[string]string) *Engine {
	t.Helper()
	e := openTestEngine(t)
	if _, err := e.AddModule("local:test", testModule(t, hooks)); err != nil {
		t.Fatal(err)
	}
	return e
}

func run(t *testing.T, e *Engine, hook string, inputs map[string]string) Outcome {
	t.Helper()
	o, err := e.RunHook("local:test", RunRequest{Module: "testmod", Hook: hook, Jail: JailOff, RawInputs: inputs})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func wantCheck(t *testing.T, cs []string, prefix, contains string) {
	t.Helper()
	got := hasCheck(cs, prefix)
	if got == "" {
		t.Errorf("no check line %q; got:\n%s", prefix, strings.Join(cs, "\n"))
		return
	}
	if !strings.Contains(got, contains) {
		t.Errorf("check %q: want it to contain %q", got, contains)
	}
}

func TestRunAllFrames(t *testing.T) {
	e := setupRun(t, map[string]string{"greet": hookYAML("frames", greetingOutput+"    inputs: {target: string}\n")})
	o := run(t, e, "greet", map[string]string{"target": "world"})
	if !o.OK() {
		t.Fatalf("run failed: %s", o.Run.Error)
	}
	cs := checks(t, e, o.Run.ID)
	wantCheck(t, cs, "context", "module=testmod hook=greet target=world")
	wantCheck(t, cs, "secret get", "ok=true match=true err=<nil>")
	wantCheck(t, cs, "undeclared secret", `code=undeclared_name msg=undeclared_name: module testmod did not declare secret "nope"; its declared secret names are: api_key, spare`)
	wantCheck(t, cs, "config set", "err=<nil>")
	wantCheck(t, cs, "next context", "region=eu")
	wantCheck(t, cs, "undeclared config", "code=undeclared_name")
	wantCheck(t, cs, "config get", "eu true")
	wantCheck(t, cs, "tx", "err=<nil>")
	wantCheck(t, cs, "unknown capability", "code=unknown_capability")
	wantCheck(t, cs, "unknown method", "code=unknown_capability")
	// No terminal and no console: the answer is no, and the stream says why.
	wantCheck(t, cs, "confirm", "false err=<nil>")

	lines, _ := e.StreamLines(o.Run.ID, 0, 0)
	levels := map[string]bool{}
	var sawWhy bool
	for _, l := range lines {
		if strings.HasPrefix(l.Text, "level ") {
			levels[l.Level.String()] = strings.TrimPrefix(l.Text, "level ") == l.Level.String()
		}
		sawWhy = sawWhy || strings.Contains(l.Text, "no operator attached")
	}
	for _, lvl := range []string{"debug", "info", "warn", "error", "success"} {
		if !levels[lvl] {
			t.Errorf("log frame at level %s did not become a %s stream line", lvl, lvl)
		}
	}
	if !sawWhy {
		t.Error("the stream does not say why operator.confirm answered no")
	}
	if string(o.Run.Outputs) != `{"greeting":"hi"}` {
		t.Errorf("outputs = %s", o.Run.Outputs)
	}
	e.store.View(func(tx *storage.Tx) error {
		if v, _, _ := tx.SecretGet("testmod", "api_key"); v != "tx-value" {
			t.Errorf("after the transaction api_key = %q, want tx-value", v)
		}
		if v, _, _ := tx.ConfigGet("testmod", "region"); v != "eu" {
			t.Errorf("config region = %q", v)
		}
		return nil
	})
	// Start and end receipts, with the jail mode.
	rs, _ := e.Receipts(ReceiptFilter{Kind: "hook."})
	if len(rs) != 2 || rs[0].Kind != "hook.start" || rs[1].Kind != "hook.end" {
		t.Fatalf("hook receipts: %v", rs)
	}
	var end map[string]any
	json.Unmarshal(rs[1].Details, &end)
	if end["jail"] != "off" || end["verdict"] != "succeeded" || end["exit"] != float64(0) || end["durationMs"] == nil {
		t.Errorf("end receipt details: %s", rs[1].Details)
	}
	if !strings.Contains(rs[0].Summary, "jail OFF") {
		t.Errorf("start receipt does not show jail off: %s", rs[0].Summary)
	}
}

func TestProtocolEdges(t *testing.T) {
	e := setupRun(t, map[string]string{"edges": hookYAML("edges", greetingOutput)})
	o := run(t, e, "edges", nil)
	cs := checks(t, e, o.Run.ID)
	wantCheck(t, cs, "missing hello:", `"type":"refused","error":{"code":"bad_frame"`)
	wantCheck(t, cs, "wrong token:", `{"type":"refused","error":{"code":"unauthorized","message":"unauthorized"}}`)
	wantCheck(t, cs, "protocol 2:", `"code":"version_mismatch","message":"hook speaks protocol 2, this engine speaks protocol 1"`)
	wantCheck(t, cs, "hello:", `{"type":"context"`)
	wantCheck(t, cs, "garbage:", `"type":"throw","id":0,"error":{"code":"bad_frame"`)
	wantCheck(t, cs, "after garbage:", `{"type":"return","id":5,"value":null}`)
	wantCheck(t, cs, "undeclared:", `"id":6,"error":{"code":"undeclared_name"`)
	wantCheck(t, cs, "oversized:", `"code":"frame_too_large"`)
	wantCheck(t, cs, "oversized then:", "EOF")
	wantCheck(t, cs, "other conn after oversized:", `{"type":"return","id":7,"value":null}`)
	wantCheck(t, cs, "second result:", `"code":"result_already_set"`)
	wantCheck(t, cs, "store after result:", `{"type":"return","id":8`)
	wantCheck(t, cs, "engine frame from hook:", `"code":"bad_frame"`)
	if !o.OK() {
		t.Errorf("the run should succeed with its first result: %s", o.Run.Error)
	}

	// After the end: a new connection's hello is refused run_ended.
	sock := filepath.Join(e.DataDir(), "runs", o.Run.ID, broker.SocketName)
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatalf("socket gone right after the run: %v", err)
	}
	defer c.Close()
	c.Write([]byte(`{"type":"hello","protocol":1,"token":"cap_` + strings.Repeat("0", 64) + `"}` + "\n"))
	buf := make([]byte, 512)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, _ := c.Read(buf)
	if !strings.Contains(string(buf[:n]), `"code":"run_ended"`) {
		t.Errorf("hello after the run's end: %s", buf[:n])
	}
	// And the run's token is revoked.
	st, _ := e.TrustStatus()
	if st.Live != 0 {
		t.Errorf("%d tokens still live after the run ended", st.Live)
	}
}

func TestBadResultNamesOutputAndTypes(t *testing.T) {
	e := setupRun(t, map[string]string{"r": hookYAML("bad-result", greetingOutput)})
	o := run(t, e, "r", nil)
	wantCheck(t, checks(t, e, o.Run.ID), "bad result", "code=bad_frame")
	if o.OK() || !strings.Contains(o.Run.Error, `output "greeting": expected string, got number`) {
		t.Fatalf("status %s, error %q", o.Run.Status, o.Run.Error)
	}
}

func TestHookErrorFailsRun(t *testing.T) {
	e := setupRun(t, map[string]string{"r": hookYAML("hook-error", "")})
	o := run(t, e, "r", nil)
	if o.OK() || !strings.Contains(o.Run.Error, "Boom: the widget exploded") {
		t.Fatalf("status %s, error %q", o.Run.Status, o.Run.Error)
	}
}

func TestMissingResultFails(t *testing.T) {
	e := setupRun(t, map[string]string{"r": hookYAML("noop", greetingOutput)})
	o := run(t, e, "r", nil)
	if o.OK() || !strings.Contains(o.Run.Error, "without a result") {
		t.Fatalf("status %s, error %q", o.Run.Status, o.Run.Error)
	}
}

func TestIdleHookIsKilled(t *testing.T) {
	e := setupRun(t, map[string]string{"r": hookYAML("idle", "    idle_timeout: 500ms\n")})
	start := time.Now()
	o := run(t, e, "r", nil)
	if o.OK() || !strings.Contains(o.Run.Error, "idle") || !strings.Contains(o.Run.Error, "500ms") {
		t.Fatalf("status %s, error %q", o.Run.Status, o.Run.Error)
	}
	if time.Since(start) > 20*time.Second {
		t.Fatalf("idle hook lived %s", time.Since(start))
	}
}

func TestActiveHookOutlivesIdleLimit(t *testing.T) {
	// Ticks every 400ms for 4.8s under a 3s idle limit. (The limit is not
	// tighter because a race-enabled child can take a second or two to
	// start on a loaded machine.)
	e := setupRun(t, map[string]string{"r": hookYAML("ticking", greetingOutput+"    idle_timeout: 3s\n")})
	o := run(t, e, "r", nil)
	if !o.OK() {
		t.Fatalf("a hook that keeps logging was killed: %s", o.Run.Error)
	}
}

func TestConfirmPausesIdleClock(t *testing.T) {
	e := setupRun(t, map[string]string{"r": hookYAML("confirm-wait", greetingOutput+"    idle_timeout: 3s\n")})
	detach := e.AttachOperator()
	defer detach()
	sub := e.Subscribe()
	defer sub.Close()
	h, err := e.StartRun("local:test", RunRequest{Module: "testmod", Hook: "r", Jail: JailOff})
	if err != nil {
		t.Fatal(err)
	}
	var id uint64
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for id == 0 {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("no request from the hook (run ended: %q): %v", h.Wait().Run.Error, err)
		}
		if ev.Kind == EventRequest && ev.Request.Decision == nil {
			id = ev.Request.ID
			if ev.Request.Operation != "operator.confirm" || !strings.Contains(string(ev.Request.Content), "Wait for me?") {
				t.Errorf("request: %+v", ev.Request)
			}
		}
	}
	time.Sleep(5 * time.Second) // well past the 3s idle limit
	if _, err := e.decideRequest("local:test", id, ApproveOnce, ""); err != nil {
		t.Fatalf("%v (run: %+v)", err, h.Wait().Run)
	}
	o := h.Wait()
	if !o.OK() {
		t.Fatalf("hook waiting on the operator was killed: %s", o.Run.Error)
	}
	wantCheck(t, checks(t, e, o.Run.ID), "confirm-wait", "true <nil>")
}

func TestOverallTimeoutKillsProcessGroup(t *testing.T) {
	// 3 s: the race-built child must start and name its grandchild
	// first, which can take a second on a loaded machine.
	e := setupRun(t, map[string]string{"r": hookYAML("grandchild", "    timeout: 3s\n    idle_timeout: 1m\n")})
	o := run(t, e, "r", nil)
	if o.OK() || !strings.Contains(o.Run.Error, "timeout") {
		t.Fatalf("status %s, error %q", o.Run.Status, o.Run.Error)
	}
	g := hasCheck(checks(t, e, o.Run.ID), "grandchild")
	pid, err := strconv.Atoi(strings.TrimPrefix(g, "grandchild "))
	if err != nil {
		t.Fatalf("no grandchild pid in %q", g)
	}
	deadline := time.Now().Add(3 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if state, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); strings.Contains(string(state), ") Z ") {
			break // a zombie awaiting its reaper is dead
		}
		if time.Now().After(deadline) {
			t.Fatalf("grandchild %d survived the run's timeout", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestTornTransactionChangesNothing(t *testing.T) {
	e := setupRun(t, map[string]string{"r": hookYAML("torn-tx", "")})
	before, _ := e.Receipts(ReceiptFilter{Kind: "secret.write"})
	o := run(t, e, "r", nil)
	if o.OK() {
		t.Fatal("a hook killed by SIGKILL succeeded")
	}
	e.store.View(func(tx *storage.Tx) error {
		if _, ok, _ := tx.SecretGet("testmod", "api_key"); ok {
			t.Error("a torn transaction frame set a secret")
		}
		return nil
	})
	after, _ := e.Receipts(ReceiptFilter{Kind: "secret.write"})
	if len(after) != len(before) {
		t.Error("a torn transaction frame wrote a receipt")
	}
}

func TestBadTransactionAppliesNothing(t *testing.T) {
	e := setupRun(t, map[string]string{"r": hookYAML("bad-tx", "")})
	o := run(t, e, "r", nil)
	cs := checks(t, e, o.Run.ID)
	wantCheck(t, cs, "bad tx", "code=undeclared_name")
	wantCheck(t, cs, "bad op:", `"code":"bad_frame"`)
	e.store.View(func(tx *storage.Tx) error {
		if v, ok, _ := tx.SecretGet("testmod", "api_key"); ok {
			t.Errorf("a refused transaction applied a write: api_key=%q", v)
		}
		return nil
	})
}

// TestSecretsNeverLeak greps every receipt, stream line, run record and
// error for the secret values a hook wrote.
func TestSecretsNeverLeak(t *testing.T) {
	e := setupRun(t, map[string]string{"greet": hookYAML("frames", greetingOutput+"    inputs: {target: string}\n")})
	o := run(t, e, "greet", map[string]string{"target": "world"})
	var hay strings.Builder
	rs, _ := e.Receipts(ReceiptFilter{})
	for _, r := range rs {
		hay.WriteString(mustJSON(r))
	}
	lines, _ := e.StreamLines(o.Run.ID, 0, 0)
	for _, l := range lines {
		hay.WriteString(l.Text)
	}
	runs, _ := e.Runs(0)
	hay.WriteString(mustJSON(runs))
	hay.WriteString(o.Run.Error)
	for _, secret := range []string{"s3cr3t-VALUE-42", "tx-value"} {
		if strings.Contains(hay.String(), secret) {
			t.Errorf("secret value %q appears in receipts, stream lines or run records", secret)
		}
	}
	if !strings.Contains(hay.String(), "api_key") {
		t.Error("receipts should name the secret that was written")
	}
}

func TestPreflightRefusals(t *testing.T) {
	e := setupRun(t, map[string]string{
		"needs": hookYAML("noop", "    requires: [hands]\n"),
		"typed": hookYAML("noop", "    inputs: {count: number}\n"),
	})
	// Every capability a manifest may name exists in this engine, so a
	// missing one is staged by taking "hands" out of its registry.
	delete(e.capabilities, "hands")
	for name, req := range map[string]RunRequest{
		"unknown module":     {Module: "nope", Hook: "x", Jail: JailOff},
		"unknown hook":       {Module: "testmod", Hook: "x", Jail: JailOff},
		"missing capability": {Module: "testmod", Hook: "needs", Jail: JailOff},
		"bad input type":     {Module: "testmod", Hook: "typed", Jail: JailOff, RawInputs: map[string]string{"count": "many"}},
		"unknown jail":       {Module: "testmod", Hook: "typed", Jail: "chroot", RawInputs: map[string]string{"count": "1"}},
	} {
		if _, err := e.StartRun("local:test", req); err == nil {
			t.Errorf("%s: preflight accepted it", name)
		}
	}
	if runs, _ := e.Runs(0); len(runs) != 0 {
		t.Errorf("refused preflights recorded %d runs", len(runs))
	}
}

// TestRunIDCollisionNeverOverwrites forces the run-id generator to hand
// out the id of a stored run whose run dir is gone (the case where random
// suffixes silently overwrote the earlier run's record): the start is
// refused, and the stored run, its stream and the receipt log are as they
// were.
func TestRunIDCollisionNeverOverwrites(t *testing.T) {
	e := setupScripts(t, Options{},
		map[string]string{"hi.sh": "#!/bin/sh\necho first run\n"},
		map[string]string{"hi": "    run: [./hi.sh]\n"})
	first := runScript(t, e, "hi")
	if err := os.RemoveAll(filepath.Join(e.DataDir(), "runs", first.Run.ID)); err != nil {
		t.Fatal(err)
	}
	before := len(allReceipts(t, e))
	gen := e.newRunID
	e.newRunID = func(time.Time) string { return first.Run.ID }
	_, err := e.StartRun(testActor, RunRequest{Module: "testmod", Hook: "hi", Jail: JailOff})
	if !errors.Is(err, storage.ErrRunExists) {
		t.Fatalf("StartRun with a stored run's id: %v, want storage.ErrRunExists", err)
	}
	e.newRunID = gen
	if got, err := e.Run(first.Run.ID); err != nil || got.Status != storage.RunSucceeded || got.Started != first.Run.Started {
		t.Errorf("stored run after the collision: %+v %v", got, err)
	}
	if lines, _ := e.StreamLines(first.Run.ID, 0, 0); len(lines) != 1 || lines[0].Text != "first run" {
		t.Errorf("stored stream after the collision: %+v", lines)
	}
	if n := len(allReceipts(t, e)); n != before {
		t.Errorf("the refused start wrote %d receipts", n-before)
	}
	if second := runScript(t, e, "hi"); second.Run.ID <= first.Run.ID {
		t.Errorf("next run id %s does not sort after %s", second.Run.ID, first.Run.ID)
	}
}

// decideRequest records a decision (any verdict) and wakes the waiting call. A decision
// the rules refuse (the request expired; the policy changed since it was
// made) is receipted and returned as a *Refusal.
func (e *Engine) decideRequest(actor Actor, id uint64, verdict, reason string) (Request, error) {
	if err := e.authorize(actor, fmt.Sprintf("decide request %d (%s)", id, verdict)); err != nil {
		return Request{}, err
	}
	d, err := e.gate.decide(actor, id, verdict, reason)
	return d.Request, err
}

// RunHook starts a run and waits for its outcome.
func (e *Engine) RunHook(actor Actor, req RunRequest) (Outcome, error) {
	h, err := e.StartRun(actor, req)
	if err != nil {
		return Outcome{}, err
	}
	return h.Wait(), nil
}
