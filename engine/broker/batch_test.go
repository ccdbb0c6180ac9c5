package broker_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/wardenhq/warden/engine/broker"
	"github.com/wardenhq/warden/engine/sdk/protocol"
)

// batcher is the stub with LogBatch: it records the batches.
type batcher struct {
	*stub
	bmu     sync.Mutex
	batches int
}

func (b *batcher) LogBatch(frames []protocol.Log) {
	b.bmu.Lock()
	b.batches++
	b.bmu.Unlock()
	for _, f := range frames {
		b.Log(f.Level, f.Message)
	}
}

// TestLogFramesBatchedInOrder: log frames already sent reach a
// LogBatcher together, in order, and never after a later frame of another
// kind: a store op sent after them sees every one of them handled.
func TestLogFramesBatchedInOrder(t *testing.T) {
	h := &batcher{stub: newStub()}
	b, err := broker.Start(shortDir(t), h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	c := dial(t, b)
	c.hello()
	var burst strings.Builder
	for i := range 2000 {
		burst.Write(protocol.AppendLog(nil, "info", fmt.Sprintf("line %d", i)))
	}
	burst.WriteString(`{"type":"store","id":1,"store":"secrets","method":"get","args":["tok"]}` + "\n")
	burst.Write(protocol.AppendLog(nil, "warn", "after the store op"))
	c.raw(burst.String())
	c.returned(1)
	if logs, _, _, _ := h.snapshot(); len(logs) < 2000 {
		t.Fatalf("the store op was answered with %d of the 2000 lines before it handled", len(logs))
	}
	eventually(t, "all lines", func() bool { logs, _, _, _ := h.snapshot(); return len(logs) == 2001 })
	logs, stores, _, _ := h.snapshot()
	for i := range 2000 {
		if logs[i] != fmt.Sprintf("info line %d", i) {
			t.Fatalf("line %d is %q", i, logs[i])
		}
	}
	if logs[2000] != "warn after the store op" || len(stores) != 1 {
		t.Fatalf("after the burst: %q, %d store ops", logs[2000], len(stores))
	}
	h.bmu.Lock()
	defer h.bmu.Unlock()
	if h.batches >= 2000 {
		t.Errorf("%d batches for 2001 lines sent in one write: not batched", h.batches)
	}
}

// ordered is the batcher that also records when it is asked for the
// context, so a test can tell which came first.
type ordered struct {
	*batcher
	omu    sync.Mutex
	events []string
}

func (o *ordered) Context() *protocol.Context {
	o.omu.Lock()
	o.events = append(o.events, "context")
	o.omu.Unlock()
	return o.batcher.Context()
}

func (o *ordered) LogBatch(frames []protocol.Log) {
	o.omu.Lock()
	o.events = append(o.events, fmt.Sprintf("%d lines", len(frames)))
	o.omu.Unlock()
	o.batcher.LogBatch(frames)
}

func (o *ordered) seen() string {
	o.omu.Lock()
	defer o.omu.Unlock()
	return strings.Join(o.events, ", ")
}

// TestLogsSentWithHelloAreQueuedBeforeTheContext: a one-shot sender's
// hello, lines and half-close, in one write, get the context only once
// the lines are handled, and the close right behind it, so the sender
// knows its lines are in, in order, on its first wake-up; a client that
// waits for the context before sending still gets it at once.
func TestLogsSentWithHelloAreQueuedBeforeTheContext(t *testing.T) {
	h := &ordered{batcher: &batcher{stub: newStub()}}
	b, err := broker.Start(shortDir(t), h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	c := dial(t, b)
	var all []byte
	all = protocol.AppendHello(all, goodToken)
	for i := range 3 {
		all = protocol.AppendLog(all, "info", fmt.Sprintf("line %d", i))
	}
	c.raw(string(all))
	c.c.CloseWrite()
	if f := c.next(); f.FrameType() != "context" {
		t.Fatalf("first frame %s, want context", f.FrameType())
	}
	c.closed()
	if got := h.seen(); got != "3 lines, context" {
		t.Fatalf("the engine did: %s; want the 3 lines handled, then the context", got)
	}

	// A client that waits: the context does not wait for a frame.
	c2 := dial(t, b)
	c2.hello()
	c2.send(&protocol.Log{Level: "warn", Message: "after"})
	eventually(t, "the line after the context", func() bool { logs, _, _, _ := h.snapshot(); return len(logs) == 4 })
	if got := h.seen(); got != "3 lines, context, context, 1 lines" {
		t.Fatalf("the engine did: %s", got)
	}
}
