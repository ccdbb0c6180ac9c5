// The Go SDK (engine/sdk/hookkit) against the real broker: the SDK is a
// module of its own with no dependencies, so its end-to-end tests live
// here, beside the server half.
package broker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/wardenhq/warden/engine/broker"
	"github.com/wardenhq/warden/engine/sdk/hookkit"
	"github.com/wardenhq/warden/engine/sdk/protocol"
)

const token = "cap_" + "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"

// engine is a broker.Handler with an in-memory store that records every
// frame it handles.
type engine struct {
	mu      sync.Mutex
	logs    []string
	ops     []protocol.StoreOp
	calls   []protocol.Call
	outputs map[string]json.RawMessage
	values  map[string]string // "store/name" -> value
}

var declared = map[string][]string{"secrets": {"tok", "visit_token"}, "config": {"greeting_word"}}

func (e *engine) Authorize(tok string) error {
	if tok != token {
		return errors.New("bad token")
	}
	return nil
}

func (e *engine) Context() *protocol.Context {
	return &protocol.Context{Protocol: protocol.Version, Run: "run-1", Module: "hello", Hook: "greet",
		Inputs: map[string]any{"target": "world"}, Config: map[string]string{"greeting_word": "Hi"},
		Declared:     protocol.Declared{Secrets: declared["secrets"], Config: declared["config"]},
		Capabilities: map[string][]string{"operator": {"confirm"}}}
}

func (e *engine) Activity() {}

func (e *engine) Log(level, message string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.logs = append(e.logs, level+": "+message)
}

func (e *engine) Store(_ context.Context, op *protocol.StoreOp) (json.RawMessage, *protocol.Error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ops = append(e.ops, *op)
	check := func(name string) *protocol.Error {
		if !slices.Contains(declared[op.Store], name) {
			return &protocol.Error{Code: protocol.CodeUndeclaredName, Message: fmt.Sprintf("module hello did not declare %q; declared: %v", name, declared[op.Store])}
		}
		return nil
	}
	str := func(i int) string {
		var s string
		json.Unmarshal(op.Args[i], &s)
		return s
	}
	switch op.Method {
	case "get":
		v, ok := e.values[op.Store+"/"+str(0)]
		if !ok {
			return nil, nil
		}
		b, _ := json.Marshal(v)
		return b, nil
	case "set":
		if err := check(str(0)); err != nil {
			return nil, err
		}
		e.values[op.Store+"/"+str(0)] = str(1)
	case "delete":
		if err := check(str(0)); err != nil {
			return nil, err
		}
		delete(e.values, op.Store+"/"+str(0))
	case "transaction":
		var tx []struct {
			Op, Name string
			Value    *string
		}
		if err := json.Unmarshal(op.Args[0], &tx); err != nil || len(tx) == 0 {
			return nil, &protocol.Error{Code: protocol.CodeBadFrame, Message: "bad transaction"}
		}
		for _, o := range tx {
			if err := check(o.Name); err != nil {
				return nil, err
			}
		}
		for _, o := range tx {
			if o.Op == "set" {
				e.values[op.Store+"/"+o.Name] = *o.Value
			} else {
				delete(e.values, op.Store+"/"+o.Name)
			}
		}
	}
	return nil, nil
}

func (e *engine) Call(_ context.Context, c *protocol.Call) (json.RawMessage, *protocol.Error) {
	e.mu.Lock()
	e.calls = append(e.calls, *c)
	e.mu.Unlock()
	switch {
	case c.Capability == "operator" && c.Method == "confirm":
		var msg string
		if len(c.Args) != 1 || json.Unmarshal(c.Args[0], &msg) != nil {
			return nil, &protocol.Error{Code: protocol.CodeBadFrame, Message: `want ["message"]`}
		}
		return json.RawMessage(fmt.Sprint(msg == "yes?")), nil
	case c.Capability == "echo":
		b, _ := json.Marshal(c.Args)
		return b, nil
	}
	return nil, &protocol.Error{Code: protocol.CodeUnknownCapability, Message: "no capability " + c.Capability}
}

func (e *engine) Result(outputs map[string]json.RawMessage) *protocol.Error {
	if _, ok := outputs["answer"]; !ok {
		return &protocol.Error{Code: protocol.CodeBadFrame, Message: "result refused: missing output answer"}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.outputs = outputs
	return nil
}

func (e *engine) HookError(protocol.ErrorBody) {}

// run starts a broker with a fresh engine and points the environment at it.
func run(t *testing.T) (*broker.Broker, *engine) {
	t.Helper()
	dir, err := os.MkdirTemp("", "wk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	e := &engine{values: map[string]string{}}
	b, err := broker.Start(dir, e)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	t.Setenv("WARDEN_SOCKET", b.SocketPath())
	t.Setenv("WARDEN_TOKEN", token)
	return b, e
}

func connect(t *testing.T) *hookkit.Client {
	t.Helper()
	c, err := hookkit.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestContext(t *testing.T) {
	run(t)
	c := connect(t)
	ctx := c.Context()
	if ctx.Run != "run-1" || ctx.Module != "hello" || ctx.Hook != "greet" || ctx.Inputs["target"] != "world" ||
		ctx.Config["greeting_word"] != "Hi" || !slices.Equal(ctx.Declared.Secrets, []string{"tok", "visit_token"}) ||
		!slices.Equal(ctx.Capabilities["operator"], []string{"confirm"}) {
		t.Fatalf("context %+v", ctx)
	}
}

func TestLog(t *testing.T) {
	_, e := run(t)
	c := connect(t)
	if err := c.Log("warn", "careful"); err != nil {
		t.Fatal(err)
	}
	if err := c.Logf("%d apples", 3); err != nil {
		t.Fatal(err)
	}
	if err := c.Log("loud", "x"); protocol.ErrorCode(err) != protocol.CodeBadFrame {
		t.Fatalf("bad level: %v", err)
	}
	if err := c.Close(); err != nil { // Close waits until the engine has read everything
		t.Fatal(err)
	}
	e.mu.Lock() // the socket orders this, but the race detector cannot see it
	defer e.mu.Unlock()
	if want := []string{"warn: careful", "info: 3 apples"}; !slices.Equal(e.logs, want) {
		t.Fatalf("logs %q, want %q", e.logs, want)
	}
}

func TestStores(t *testing.T) {
	_, e := run(t)
	c := connect(t)
	s := c.Secrets()
	if _, ok, err := s.Get("tok"); err != nil || ok {
		t.Fatalf("unset get: ok %v err %v", ok, err)
	}
	if err := s.Set("tok", "s3cret"); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := s.Get("tok"); err != nil || !ok || v != "s3cret" {
		t.Fatalf("get %q %v %v", v, ok, err)
	}
	if err := s.Set("tok", ""); err != nil { // an empty value is a value
		t.Fatal(err)
	}
	if v, ok, err := s.Get("tok"); err != nil || !ok || v != "" {
		t.Fatalf("get empty %q %v %v", v, ok, err)
	}
	if err := s.Delete("tok"); err != nil {
		t.Fatal(err)
	}
	if err := c.Config().Set("greeting_word", "Howdy"); err != nil {
		t.Fatal(err)
	}
	if err := s.Tx().Set("tok", "a").Set("visit_token", "b").Delete("tok").Commit(); err != nil {
		t.Fatal(err)
	}

	want := []struct{ store, method, args string }{
		{"secrets", "get", `["tok"]`},
		{"secrets", "set", `["tok","s3cret"]`},
		{"secrets", "get", `["tok"]`},
		{"secrets", "set", `["tok",""]`},
		{"secrets", "get", `["tok"]`},
		{"secrets", "delete", `["tok"]`},
		{"config", "set", `["greeting_word","Howdy"]`},
		{"secrets", "transaction", `[[{"op":"set","name":"tok","value":"a"},{"op":"set","name":"visit_token","value":"b"},{"op":"delete","name":"tok"}]]`},
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.ops) != len(want) {
		t.Fatalf("%d store ops, want %d", len(e.ops), len(want))
	}
	for i, w := range want {
		op := e.ops[i]
		args, _ := json.Marshal(op.Args)
		if op.Store != w.store || op.Method != w.method || string(args) != w.args || op.ID <= 0 {
			t.Errorf("op %d: %s %s %s (id %d), want %s %s %s", i, op.Store, op.Method, args, op.ID, w.store, w.method, w.args)
		}
	}
	if e.values["secrets/visit_token"] != "b" || e.values["config/greeting_word"] != "Howdy" {
		t.Fatalf("values %v", e.values)
	}
	if _, ok := e.values["secrets/tok"]; ok {
		t.Fatal("tok survived the transaction's delete")
	}
}

func TestTypedErrors(t *testing.T) {
	_, e := run(t)
	c := connect(t)
	err := c.Secrets().Set("nope", "x")
	var he *hookkit.Error
	if !errors.As(err, &he) || he.Code != protocol.CodeUndeclaredName || hookkit.Code(err) != protocol.CodeUndeclaredName {
		t.Fatalf("err %v, want undeclared_name", err)
	}
	if he.Message == "" {
		t.Fatal("no message")
	}
	// A failed transaction applies nothing.
	err = c.Config().Tx().Set("greeting_word", "x").Delete("nope").Commit()
	if hookkit.Code(err) != protocol.CodeUndeclaredName {
		t.Fatalf("tx err %v", err)
	}
	e.mu.Lock()
	_, landed := e.values["config/greeting_word"]
	e.mu.Unlock()
	if landed {
		t.Fatal("half a transaction landed")
	}
	if _, err := c.Call("teleport", "now"); hookkit.Code(err) != protocol.CodeUnknownCapability {
		t.Fatalf("call err %v", err)
	}
	if hookkit.Code(errors.New("plain")) != "" {
		t.Fatal("Code of a plain error")
	}
	// The connection still works after errors.
	if _, _, err := c.Secrets().Get("tok"); err != nil {
		t.Fatal(err)
	}
}

func TestCallAndConfirm(t *testing.T) {
	_, e := run(t)
	c := connect(t)
	v, err := c.Call("echo", "back", "a", 2, map[string]bool{"x": true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(v) != `["a",2,{"x":true},null]` {
		t.Fatalf("echo %s", v)
	}
	if ok, err := c.Confirm("yes?"); err != nil || !ok {
		t.Fatalf("confirm yes: %v %v", ok, err)
	}
	if ok, err := c.Confirm("no?"); err != nil || ok {
		t.Fatalf("confirm no: %v %v", ok, err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if last := e.calls[len(e.calls)-1]; last.Capability != "operator" || last.Method != "confirm" || string(last.Args[0]) != `"no?"` {
		t.Fatalf("confirm frame %+v", last)
	}
}

func TestConcurrentCalls(t *testing.T) {
	run(t)
	c := connect(t)
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			v, err := c.Call("echo", "back", i)
			if err != nil || string(v) != fmt.Sprintf("[%d]", i) {
				t.Errorf("call %d: %s %v", i, v, err)
			}
		})
	}
	wg.Wait()
}

func TestResult(t *testing.T) {
	_, e := run(t)
	c := connect(t)
	err := c.Result(map[string]any{"wrong": 1})
	var he *hookkit.Error
	if !errors.As(err, &he) || he.Code != protocol.CodeBadFrame {
		t.Fatalf("refused result: %v", err)
	}
	// A refused result may be sent again, fixed, on a new connection.
	c2 := connect(t)
	if err := c2.Result(map[string]any{"answer": 42}); err != nil {
		t.Fatalf("result: %v", err)
	}
	e.mu.Lock()
	got := string(e.outputs["answer"])
	e.mu.Unlock()
	if got != "42" {
		t.Fatalf("outputs %v", e.outputs)
	}
	c3 := connect(t)
	if err := c3.Result(map[string]any{"answer": 1}); hookkit.Code(err) != protocol.CodeResultAlreadySet {
		t.Fatalf("second result: %v", err)
	}
	if err := c.Result(map[string]any{"answer": func() {}}); err == nil {
		t.Fatal("an unmarshallable output was sent")
	}
}

func TestHookkitRunEnded(t *testing.T) {
	b, _ := run(t)
	c := connect(t)
	b.End()
	if _, _, err := c.Secrets().Get("tok"); hookkit.Code(err) != protocol.CodeRunEnded {
		t.Fatalf("get after end: %v", err)
	}
	c.Log("info", "late")
	if err := c.Close(); hookkit.Code(err) != protocol.CodeRunEnded {
		t.Fatalf("close after a refused log: %v", err)
	}
	if _, err := hookkit.Connect(); hookkit.Code(err) != protocol.CodeRunEnded {
		t.Fatalf("connect after end: %v", err)
	}
}

func TestConnectionLost(t *testing.T) {
	b, _ := run(t)
	c := connect(t)
	b.Close()
	if _, _, err := c.Secrets().Get("tok"); err == nil || hookkit.Code(err) != "" {
		t.Fatalf("get on a closed broker: %v", err)
	}
}

func TestDialWrongToken(t *testing.T) {
	b, _ := run(t)
	_, err := hookkit.Dial(b.SocketPath(), "cap_wrong")
	var he *hookkit.Error
	if !errors.As(err, &he) || he.Code != protocol.CodeUnauthorized {
		t.Fatalf("err %v, want *Error unauthorized", err)
	}
	if _, err := hookkit.Dial(b.SocketPath()+".missing", token); err == nil || hookkit.Code(err) != "" {
		t.Fatalf("dial a missing socket: %v", err)
	}
}

// TestSendLog: hello and the line in one write, before the engine's
// answer. The line lands after a good hello; a bad token is refused
// before anything else is read (the line is not taken); a bad level is
// refused before anything is sent; after the run's end the line is
// refused as a Log and Close would report it.
func TestSendLog(t *testing.T) {
	b, e := run(t)
	if err := hookkit.SendLog("warn", "one write"); err != nil {
		t.Fatal(err)
	}
	e.mu.Lock()
	got := slices.Clone(e.logs)
	e.mu.Unlock()
	if want := []string{"warn: one write"}; !slices.Equal(got, want) {
		t.Fatalf("logs %q, want %q", got, want)
	}

	t.Setenv("WARDEN_TOKEN", "cap_wrong")
	if err := hookkit.SendLog("info", "not mine"); hookkit.Code(err) != protocol.CodeUnauthorized {
		t.Fatalf("wrong token: %v, want unauthorized", err)
	}
	t.Setenv("WARDEN_TOKEN", token)
	if err := hookkit.SendLog("loud", "x"); protocol.ErrorCode(err) != protocol.CodeBadFrame {
		t.Fatalf("bad level: %v", err)
	}
	e.mu.Lock()
	got = slices.Clone(e.logs)
	e.mu.Unlock()
	if len(got) != 1 {
		t.Fatalf("refused lines were taken: %q", got)
	}

	b.End()
	if err := hookkit.SendLog("info", "late"); hookkit.Code(err) != protocol.CodeRunEnded {
		t.Fatalf("after the end: %v, want run_ended", err)
	}
	t.Setenv("WARDEN_SOCKET", b.SocketPath()+".missing")
	if err := hookkit.SendLog("info", "x"); err == nil || hookkit.Code(err) != "" {
		t.Fatalf("a missing socket: %v", err)
	}
	t.Setenv("WARDEN_SOCKET", "")
	if err := hookkit.SendLog("info", "x"); !errors.Is(err, hookkit.ErrNoEngine) {
		t.Fatalf("no engine: %v", err)
	}
}
