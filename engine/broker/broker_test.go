package broker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wardenhq/warden/engine/broker"
	"github.com/wardenhq/warden/engine/sdk/protocol"
)

const goodToken = "cap_" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// stub is a Handler that records what it is asked. Authorize accepts one
// token; the "slow" capability blocks until release is closed (or the run
// ends); result outputs carrying "bad" are refused.
type stub struct {
	release chan struct{}

	mu       sync.Mutex
	activity int
	logs     []string // "level message"
	stores   []protocol.StoreOp
	calls    []protocol.Call
	results  []map[string]json.RawMessage
	hookErrs []protocol.ErrorBody
	entered  chan struct{} // a slow call is in the handler
}

func newStub() *stub {
	return &stub{release: make(chan struct{}), entered: make(chan struct{}, 16)}
}

func (s *stub) Authorize(token string) error {
	if token != goodToken {
		return errors.New("no such token")
	}
	return nil
}

func (s *stub) Context() *protocol.Context {
	return &protocol.Context{Protocol: protocol.Version, Run: "r1", Module: "hello", Hook: "greet",
		Inputs: map[string]any{"target": "world"}, Declared: protocol.Declared{Secrets: []string{"tok"}},
		Capabilities: map[string][]string{"operator": {"confirm"}}}
}

func (s *stub) Activity() {
	s.mu.Lock()
	s.activity++
	s.mu.Unlock()
}

func (s *stub) Log(level, message string) {
	s.mu.Lock()
	s.logs = append(s.logs, level+" "+message)
	s.mu.Unlock()
}

func (s *stub) Store(_ context.Context, op *protocol.StoreOp) (json.RawMessage, *protocol.Error) {
	s.mu.Lock()
	s.stores = append(s.stores, *op)
	s.mu.Unlock()
	if op.Method == "get" {
		return json.RawMessage(`"v"`), nil
	}
	return nil, nil
}

func (s *stub) Call(ctx context.Context, c *protocol.Call) (json.RawMessage, *protocol.Error) {
	s.mu.Lock()
	s.calls = append(s.calls, *c)
	s.mu.Unlock()
	switch c.Capability {
	case "slow":
		s.entered <- struct{}{}
		select {
		case <-s.release:
			return json.RawMessage(`"released"`), nil
		case <-ctx.Done():
			return nil, &protocol.Error{Code: protocol.CodeRunEnded, Message: "gave up"}
		}
	case "echo":
		if len(c.Args) == 0 {
			return nil, nil
		}
		return c.Args[0], nil
	}
	return nil, &protocol.Error{Code: protocol.CodeUnknownCapability, Message: "no capability " + c.Capability}
}

func (s *stub) Result(outputs map[string]json.RawMessage) *protocol.Error {
	if _, bad := outputs["bad"]; bad {
		return &protocol.Error{Code: protocol.CodeBadFrame, Message: "result refused: bad output"}
	}
	s.mu.Lock()
	s.results = append(s.results, outputs)
	s.mu.Unlock()
	return nil
}

func (s *stub) HookError(e protocol.ErrorBody) {
	s.mu.Lock()
	s.hookErrs = append(s.hookErrs, e)
	s.mu.Unlock()
}

func (s *stub) snapshot() (logs []string, stores []protocol.StoreOp, calls []protocol.Call, results int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.logs...), append([]protocol.StoreOp(nil), s.stores...),
		append([]protocol.Call(nil), s.calls...), len(s.results)
}

// shortDir is a private dir with a path short enough for a socket name.
func shortDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "wb")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func start(t *testing.T) (*broker.Broker, *stub) {
	t.Helper()
	h := newStub()
	b, err := broker.Start(shortDir(t), h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		done := make(chan struct{})
		go func() { b.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("Close did not return")
		}
	})
	return b, h
}

// client is a raw protocol connection.
type client struct {
	t *testing.T
	c *net.UnixConn
	r *protocol.Reader
	w *protocol.Writer
}

func dial(t *testing.T, b *broker.Broker) *client {
	t.Helper()
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: b.SocketPath(), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{t: t, c: c, r: protocol.NewReader(c), w: protocol.NewWriter(c)}
}

func (c *client) send(f protocol.Frame) {
	c.t.Helper()
	if err := c.w.WriteFrame(f); err != nil {
		c.t.Fatalf("send %s: %v", f.FrameType(), err)
	}
}

func (c *client) raw(s string) {
	c.t.Helper()
	if _, err := io.WriteString(c.c, s); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

func (c *client) next() protocol.Frame {
	c.t.Helper()
	c.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	f, err := c.r.ReadFrame()
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	return f
}

// closed asserts the engine closed the connection without another frame.
func (c *client) closed() {
	c.t.Helper()
	c.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	f, err := c.r.ReadFrame()
	if err == nil {
		c.t.Fatalf("want the connection closed, got a %s frame", f.FrameType())
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		c.t.Fatal("want the connection closed, it is still open")
	}
}

func (c *client) hello() *protocol.Context {
	c.t.Helper()
	c.send(&protocol.Hello{Protocol: protocol.Version, Token: goodToken})
	f := c.next()
	ctx, ok := f.(*protocol.Context)
	if !ok {
		c.t.Fatalf("hello answered %s, want context", f.FrameType())
	}
	return ctx
}

func (c *client) refused(code string) protocol.ErrorBody {
	c.t.Helper()
	f := c.next()
	r, ok := f.(*protocol.Refused)
	if !ok {
		c.t.Fatalf("got %s, want refused %s", f.FrameType(), code)
	}
	if r.Error.Code != code {
		c.t.Fatalf("refused %s (%s), want %s", r.Error.Code, r.Error.Message, code)
	}
	c.closed()
	return r.Error
}

func (c *client) thrown(id int64, code string) protocol.ErrorBody {
	c.t.Helper()
	f := c.next()
	th, ok := f.(*protocol.Throw)
	if !ok {
		c.t.Fatalf("got %s, want throw %s", f.FrameType(), code)
	}
	if th.ID != id || th.Error.Code != code {
		c.t.Fatalf("throw id %d %s (%s), want id %d %s", th.ID, th.Error.Code, th.Error.Message, id, code)
	}
	return th.Error
}

func (c *client) returned(id int64) json.RawMessage {
	c.t.Helper()
	f := c.next()
	r, ok := f.(*protocol.Return)
	if !ok {
		c.t.Fatalf("got %s (%+v), want return %d", f.FrameType(), f, id)
	}
	if r.ID != id {
		c.t.Fatalf("return id %d, want %d", r.ID, id)
	}
	return r.Value
}

func args(vs ...string) []json.RawMessage {
	out := make([]json.RawMessage, len(vs))
	for i, v := range vs {
		out[i], _ = json.Marshal(v)
	}
	return out
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestSocketIsPrivate(t *testing.T) {
	b, _ := start(t)
	if filepath.Base(b.SocketPath()) != broker.SocketName {
		t.Fatalf("socket %s", b.SocketPath())
	}
	fi, err := os.Stat(b.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("socket mode %v", fi.Mode())
	}
}

func TestGoodHelloGetsContext(t *testing.T) {
	b, h := start(t)
	ctx := dial(t, b).hello()
	if ctx.Run != "r1" || ctx.Module != "hello" || ctx.Hook != "greet" || ctx.Inputs["target"] != "world" {
		t.Fatalf("context %+v", ctx)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.activity == 0 {
		t.Fatal("hello did not count as activity")
	}
}

func TestHelloVersionMismatch(t *testing.T) {
	b, _ := start(t)
	c := dial(t, b)
	c.send(&protocol.Hello{Protocol: 2, Token: goodToken})
	e := c.refused(protocol.CodeVersionMismatch)
	if !strings.Contains(e.Message, "protocol 2") || !strings.Contains(e.Message, "protocol 1") {
		t.Fatalf("message %q does not name both versions", e.Message)
	}
}

func TestHelloWrongToken(t *testing.T) {
	b, h := start(t)
	for _, tok := range []string{"", "cap_nope", goodToken + "0", strings.ToUpper(goodToken)} {
		c := dial(t, b)
		c.send(&protocol.Hello{Protocol: protocol.Version, Token: tok})
		e := c.refused(protocol.CodeUnauthorized)
		if tok != "" && strings.Contains(e.Message, tok) {
			t.Fatalf("refusal echoes the token: %q", e.Message)
		}
	}
	if logs, stores, calls, _ := h.snapshot(); len(logs)+len(stores)+len(calls) != 0 {
		t.Fatal("handler was called for a refused connection")
	}
}

func TestFirstFrameMustBeHello(t *testing.T) {
	b, h := start(t)
	c := dial(t, b)
	c.send(&protocol.Log{Level: "info", Message: "sneaky"})
	c.refused(protocol.CodeBadFrame)

	c = dial(t, b)
	c.raw("not json\n")
	c.refused(protocol.CodeBadFrame)

	if logs, _, _, _ := h.snapshot(); len(logs) != 0 {
		t.Fatalf("a frame before hello reached the handler: %v", logs)
	}
}

func TestGarbageAfterHelloKeepsConnection(t *testing.T) {
	b, h := start(t)
	c := dial(t, b)
	c.hello()
	for _, junk := range []string{"garbage\n", "{}\n", `{"type":"nope"}` + "\n", `{"type":"log","level":"loud","message":"x"}` + "\n", "\xff\xfe\n", "\n"} {
		c.raw(junk)
		c.thrown(0, protocol.CodeBadFrame)
	}
	// Engine frames from a hook, and a second hello, are bad too.
	c.send(&protocol.Hello{Protocol: 1, Token: goodToken})
	c.thrown(0, protocol.CodeBadFrame)
	c.send(&protocol.Return{ID: 3, Value: json.RawMessage("1")})
	c.thrown(0, protocol.CodeBadFrame)

	c.send(&protocol.StoreOp{ID: 1, Store: "secrets", Method: "get", Args: args("tok")})
	if v := c.returned(1); string(v) != `"v"` {
		t.Fatalf("value %s", v)
	}
	c.send(&protocol.Log{Level: "warn", Message: "still here"})
	c.send(&protocol.StoreOp{ID: 2, Store: "config", Method: "delete", Args: args("x")})
	c.returned(2)
	if logs, _, _, _ := h.snapshot(); len(logs) != 1 || logs[0] != "warn still here" {
		t.Fatalf("logs %v", logs)
	}
}

func TestOversizedFrameClosesOnlyThatConnection(t *testing.T) {
	b, h := start(t)
	other := dial(t, b)
	other.hello()

	c := dial(t, b)
	c.hello()
	go func() {
		// The engine stops reading at the limit, so this write fails
		// with a broken pipe once the connection is closed.
		big := bytes.Repeat([]byte("a"), protocol.MaxFrame+100)
		big = append([]byte(`{"type":"log","level":"info","message":"`), big...)
		c.c.Write(append(big, "\"}\n"...))
	}()
	c.thrown(0, protocol.CodeFrameTooLarge)
	c.closed()

	other.send(&protocol.StoreOp{ID: 9, Store: "secrets", Method: "get", Args: args("tok")})
	other.returned(9)
	// And a new connection on the same run works too.
	d := dial(t, b)
	d.hello()
	d.send(&protocol.Call{ID: 1, Capability: "echo", Method: "x", Args: args("hi")})
	if v := d.returned(1); string(v) != `"hi"` {
		t.Fatalf("echo %s", v)
	}
	if logs, _, _, _ := h.snapshot(); len(logs) != 0 {
		t.Fatalf("oversized log reached the handler (%d lines)", len(logs))
	}
}

func TestExactlyMaxFrameIsFine(t *testing.T) {
	b, h := start(t)
	c := dial(t, b)
	c.hello()
	prefix, suffix := `{"type":"log","level":"info","message":"`, "\"}\n"
	msg := strings.Repeat("m", protocol.MaxFrame-len(prefix)-len(suffix))
	c.raw(prefix + msg + suffix) // a log frame has no answer, so this cannot deadlock
	c.send(&protocol.StoreOp{ID: 1, Store: "secrets", Method: "get", Args: args("tok")})
	c.returned(1)
	if logs, _, _, _ := h.snapshot(); len(logs) != 1 || len(logs[0]) != len("info ")+len(msg) {
		t.Fatal("a frame of exactly MaxFrame bytes was not delivered")
	}
}

func TestStoreOpReturns(t *testing.T) {
	b, h := start(t)
	c := dial(t, b)
	c.hello()
	c.send(&protocol.StoreOp{ID: 5, Store: "secrets", Method: "set", Args: args("tok", "s3cret")})
	if v := c.returned(5); string(v) != "null" {
		t.Fatalf("set returned %s, want null", v)
	}
	c.send(&protocol.StoreOp{ID: 6, Store: "config", Method: "get", Args: args("ip")})
	if v := c.returned(6); string(v) != `"v"` {
		t.Fatalf("get returned %s", v)
	}
	_, stores, _, _ := h.snapshot()
	if len(stores) != 2 || stores[0].Store != "secrets" || stores[0].Method != "set" ||
		string(stores[0].Args[1]) != `"s3cret"` || stores[1].Store != "config" || stores[1].Method != "get" {
		t.Fatalf("stores %+v", stores)
	}
}

func TestBlockedCallDoesNotBlockConnection(t *testing.T) {
	b, h := start(t)
	c := dial(t, b)
	c.hello()
	c.send(&protocol.Call{ID: 1, Capability: "slow", Method: "wait"})
	<-h.entered
	c.send(&protocol.Log{Level: "info", Message: "while waiting"})
	eventually(t, "the log line", func() bool {
		logs, _, _, _ := h.snapshot()
		return len(logs) == 1
	})
	c.send(&protocol.StoreOp{ID: 2, Store: "secrets", Method: "get", Args: args("tok")})
	c.returned(2) // answered before the call
	c.send(&protocol.Call{ID: 3, Capability: "echo", Method: "x", Args: args("fast")})
	if v := c.returned(3); string(v) != `"fast"` {
		t.Fatalf("echo %s", v)
	}
	close(h.release)
	if v := c.returned(1); string(v) != `"released"` {
		t.Fatalf("slow call %s", v)
	}
}

func TestCallErrorsAreThrownWithTheirID(t *testing.T) {
	b, _ := start(t)
	c := dial(t, b)
	c.hello()
	c.send(&protocol.Call{ID: 42, Capability: "teleport", Method: "now"})
	c.thrown(42, protocol.CodeUnknownCapability)
}

func TestResultOnce(t *testing.T) {
	b, h := start(t)
	c := dial(t, b)
	c.hello()
	// A refused result does not count.
	c.send(&protocol.Result{Outputs: map[string]json.RawMessage{"bad": json.RawMessage("1")}})
	c.thrown(0, protocol.CodeBadFrame)
	c.send(&protocol.Result{Outputs: map[string]json.RawMessage{"a": json.RawMessage(`"x"`)}})
	// A round trip on c: frames are handled in order, so once this is
	// answered the result above has been taken.
	c.send(&protocol.Call{ID: 9, Capability: "teleport", Method: "now"})
	c.thrown(9, protocol.CodeUnknownCapability)
	// The second result, even from another connection, is refused.
	d := dial(t, b)
	d.hello()
	d.send(&protocol.Result{Outputs: map[string]json.RawMessage{"a": json.RawMessage(`"y"`)}})
	d.thrown(0, protocol.CodeResultAlreadySet)
	c.send(&protocol.Result{})
	c.thrown(0, protocol.CodeResultAlreadySet)
	if _, _, _, n := h.snapshot(); n != 1 {
		t.Fatalf("%d results accepted", n)
	}
}

func TestHookErrorFrame(t *testing.T) {
	b, h := start(t)
	c := dial(t, b)
	c.hello()
	c.send(&protocol.HookError{Error: protocol.ErrorBody{Name: "NoDisk", Message: "disk full"}})
	c.c.CloseWrite()
	c.closed()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.hookErrs) != 1 || h.hookErrs[0].Name != "NoDisk" {
		t.Fatalf("hook errors %+v", h.hookErrs)
	}
}

func TestRunEnded(t *testing.T) {
	b, h := start(t)
	c := dial(t, b)
	c.hello()
	c.send(&protocol.Call{ID: 1, Capability: "slow", Method: "wait"})
	<-h.entered
	b.End()
	// The waiting call gives up, and says the run ended.
	c.thrown(1, protocol.CodeRunEnded)
	c.send(&protocol.Log{Level: "info", Message: "late"})
	c.thrown(0, protocol.CodeRunEnded)
	c.send(&protocol.StoreOp{ID: 2, Store: "secrets", Method: "get", Args: args("tok")})
	c.thrown(2, protocol.CodeRunEnded)
	c.send(&protocol.Call{ID: 3, Capability: "echo", Method: "x"})
	c.thrown(3, protocol.CodeRunEnded)
	c.send(&protocol.Result{})
	c.thrown(0, protocol.CodeRunEnded)

	d := dial(t, b)
	d.send(&protocol.Hello{Protocol: protocol.Version, Token: goodToken})
	d.refused(protocol.CodeRunEnded)

	logs, stores, calls, results := h.snapshot()
	if len(logs) != 0 || len(stores) != 0 || len(calls) != 1 || results != 0 {
		t.Fatalf("handler called after End: logs %v stores %d calls %d results %d", logs, len(stores), len(calls), results)
	}
}

func TestTornFrameThenEOFChangesNothing(t *testing.T) {
	b, h := start(t)
	c := dial(t, b)
	c.hello()
	c.raw(`{"type":"store","id":1,"store":"secrets","method":"set","args":["tok","x"]}`) // no newline
	c.c.CloseWrite()
	c.closed()

	// Torn before the hello, too.
	d := dial(t, b)
	d.raw(`{"type":"hello","protocol":1,"token":"` + goodToken + `"}`)
	d.c.CloseWrite()
	d.closed()

	logs, stores, calls, results := h.snapshot()
	if len(logs)+len(stores)+len(calls)+results != 0 {
		t.Fatal("a torn frame reached the handler")
	}
}

func TestHalfCloseWaitsForAnswers(t *testing.T) {
	b, h := start(t)
	c := dial(t, b)
	c.hello()
	c.send(&protocol.Call{ID: 1, Capability: "slow", Method: "wait"})
	<-h.entered
	c.c.CloseWrite()
	time.Sleep(20 * time.Millisecond)
	close(h.release)
	c.returned(1)
	c.closed()
}

func TestConcurrentConnections(t *testing.T) {
	b, h := start(t)
	const n, per = 16, 20
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			c := dial(t, b)
			c.hello()
			for j := 1; j <= per; j++ {
				id := int64(2 * j)
				c.send(&protocol.Log{Level: "debug", Message: fmt.Sprintf("%d/%d", i, j)})
				c.send(&protocol.StoreOp{ID: id - 1, Store: "secrets", Method: "get", Args: args("tok")})
				c.send(&protocol.Call{ID: id, Capability: "echo", Method: "x", Args: args(fmt.Sprintf("%d-%d", i, j))})
				// Store ops answer in order; calls run concurrently, so
				// collect two answers in any order.
				got := map[int64]json.RawMessage{}
				for range 2 {
					switch f := c.next().(type) {
					case *protocol.Return:
						got[f.ID] = f.Value
					default:
						t.Errorf("conn %d: unexpected %s", i, f.FrameType())
						return
					}
				}
				if string(got[id]) != fmt.Sprintf(`"%d-%d"`, i, j) || string(got[id-1]) != `"v"` {
					t.Errorf("conn %d: answers %v", i, got)
					return
				}
			}
			c.c.CloseWrite()
			c.closed()
		})
	}
	wg.Wait()
	logs, stores, calls, _ := h.snapshot()
	if len(logs) != n*per || len(stores) != n*per || len(calls) != n*per {
		t.Fatalf("logs %d stores %d calls %d, want %d each", len(logs), len(stores), len(calls), n*per)
	}
}

func TestTooManyConnections(t *testing.T) {
	b, _ := start(t)
	var cs []*client
	for range 64 {
		c := dial(t, b)
		c.hello()
		cs = append(cs, c)
	}
	c := dial(t, b)
	c.refused(protocol.CodeBadFrame)
	// Once one goes away there is room again.
	cs[0].c.Close()
	eventually(t, "a free slot", func() bool {
		d := dial(t, b)
		defer d.c.Close()
		d.w.WriteFrame(&protocol.Hello{Protocol: protocol.Version, Token: goodToken}) // may hit a refusal
		f, err := d.r.ReadFrame()
		_, ok := f.(*protocol.Context)
		return err == nil && ok
	})
}

func TestCloseWithSilentConnections(t *testing.T) {
	h := newStub()
	b, err := broker.Start(shortDir(t), h)
	if err != nil {
		t.Fatal(err)
	}
	silent := dial(t, b) // never says hello
	live := dial(t, b)
	live.hello()
	live.send(&protocol.Call{ID: 1, Capability: "slow", Method: "wait"})
	<-h.entered
	start := time.Now()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Close took %s", d)
	}
	silent.closed()
	if _, err := os.Stat(b.SocketPath()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket still there after Close: %v", err)
	}
}
