// Package broker is the engine's end of the hook wire protocol: one broker
// per hook run, listening on a Unix socket in the run's private dir.
//
// The broker owns the protocol mechanics (hello, token, version, framing,
// ordering, run_ended, result-once); the run's Handler owns the meaning
// (what a store op or a capability call does). A bad frame answers a
// throw or refused frame and never crashes the engine or another run.
package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/wardenhq/warden/engine/sdk/protocol"
)

// SocketName is the broker's socket file inside the run dir.
const SocketName = "broker.sock"

// Limits that keep one hook from exhausting the engine.
const (
	helloTimeout = 10 * time.Second
	maxConns     = 64
	maxCalls     = 64 // concurrent capability calls per run
)

// Handler is the run's side of the broker. Its methods are called from
// connection goroutines, concurrently.
type Handler interface {
	// Authorize checks a hello's token. Any error answers "unauthorized";
	// the handler records the token's class for the operator.
	Authorize(token string) error
	// Context is the frame a good hello is answered with.
	Context() *protocol.Context
	// Activity feeds the idle clock: called for every frame received.
	Activity()
	Log(level, message string)
	Store(ctx context.Context, op *protocol.StoreOp) (json.RawMessage, *protocol.Error)
	Call(ctx context.Context, c *protocol.Call) (json.RawMessage, *protocol.Error)
	// Result is called at most once per run.
	Result(outputs map[string]json.RawMessage) *protocol.Error
	HookError(e protocol.ErrorBody)
}

// LogBatcher is a Handler that takes a run of log frames at once. When
// the handler is one, the log frames a connection has already sent (read
// in, not yet handled) go to LogBatch together, in order, and always
// before the next frame of another type: a hook streaming lines (`warden
// hook log --stdin`) then costs the run one stream append per read, not
// one per line.
type LogBatcher interface {
	LogBatch(frames []protocol.Log)
}

// ContextEncoder is a Handler that keeps its context frame encoded. When
// the handler is one, hello is answered with EncodedContext's bytes
// (whole frames as protocol.Encode makes them) instead of Context
// encoded anew on every connection.
type ContextEncoder interface {
	EncodedContext() ([]byte, error)
}

// maxLogBatch bounds one LogBatch.
const maxLogBatch = 512

// Broker serves one run's socket.
type Broker struct {
	path string
	ln   *net.UnixListener
	h    Handler

	ctx    context.Context // cancelled when the run ends: waiting calls give up
	cancel context.CancelFunc
	calls  chan struct{} // semaphore of concurrent calls

	mu        sync.Mutex
	ended     bool
	closed    bool // Close was called: accept no more connections
	resultSet bool
	conns     map[net.Conn]struct{}
	dialers   []*net.UnixConn // the broker's ends of Dialer pairs, closed by Close
	wg        sync.WaitGroup
}

// Start listens on dir/broker.sock (0600; dir must already be private).
func Start(dir string, h Handler) (*Broker, error) {
	path := filepath.Join(dir, SocketName)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("the run's broker socket: %w", err) // it names the path
	}
	// The dir is 0700 and ours, so nobody can reach the socket between
	// its creation and this chmod.
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	ln.SetUnlinkOnClose(true)
	ctx, cancel := context.WithCancel(context.Background())
	b := &Broker{path: path, ln: ln, h: h, ctx: ctx, cancel: cancel, calls: make(chan struct{}, maxCalls), conns: map[net.Conn]struct{}{}}
	b.wg.Add(1)
	go b.accept()
	return b, nil
}

// SocketPath is the socket's host path.
func (b *Broker) SocketPath() string { return b.path }

// End marks the run as ended: from now on every frame and every hello is
// answered run_ended, and waiting calls are cancelled. The socket stays
// open until Close so late callers get that answer, not a missing file.
func (b *Broker) End() {
	b.mu.Lock()
	b.ended = true
	b.mu.Unlock()
	b.cancel()
}

func (b *Broker) isEnded() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ended
}

// Close ends the run if needed, stops listening, closes every connection
// and waits for the connection goroutines.
func (b *Broker) Close() error {
	b.End()
	err := b.ln.Close()
	b.mu.Lock()
	b.closed = true
	for _, d := range b.dialers {
		d.Close()
	}
	for c := range b.conns {
		c.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
	return err
}

func (b *Broker) accept() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return // closed
		}
		if !b.admit(c) {
			return
		}
	}
}

// admit serves c, a new connection from the socket or the dialer, unless
// the run has too many; false when the broker is closed (c is closed).
func (b *Broker) admit(c net.Conn) bool {
	b.mu.Lock()
	if b.closed { // accepted just before Close: nobody will close it later
		b.mu.Unlock()
		c.Close()
		return false
	}
	if len(b.conns) >= maxConns {
		b.mu.Unlock()
		w := protocol.NewWriter(c)
		w.WriteFrame(protocol.Refuse(protocol.CodeBadFrame, fmt.Sprintf("too many connections (limit %d per run)", maxConns)))
		c.Close()
		return true
	}
	b.conns[c] = struct{}{}
	b.wg.Add(1)
	b.mu.Unlock()
	go b.serve(c)
	return true
}

// conn is one hook connection after a good hello.
type conn struct {
	b  *Broker
	c  net.Conn
	w  *protocol.Writer
	wg sync.WaitGroup // calls in flight on this connection
}

func (b *Broker) serve(c net.Conn) {
	defer b.wg.Done()
	defer func() {
		b.mu.Lock()
		delete(b.conns, c)
		b.mu.Unlock()
		c.Close()
	}()
	cn := &conn{b: b, c: c, w: protocol.NewWriter(c)}
	r := protocol.NewReader(c)
	if !cn.hello(r) {
		return
	}
	// The context, hello's answer, is written once the log frames that
	// came with the hello are queued, and before anything else is written
	// or waited for. A one-shot `warden hook log` (hello, its line, then
	// its half-close, in one write) then gets the context and the close
	// one after the other, and exits on one wake-up instead of waiting
	// again for the close. A client that waits for the context before it
	// sends more gets it at once too.
	answered := false
	answer := func() bool {
		if answered {
			return true
		}
		answered = true
		if ce, ok := b.h.(ContextEncoder); ok {
			if frame, err := ce.EncodedContext(); err == nil {
				return cn.w.WriteEncoded(frame) == nil
			}
		}
		return cn.w.WriteFrame(b.h.Context()) == nil
	}
	batcher, _ := b.h.(LogBatcher)
	var logs []protocol.Log
	flush := func() {
		if len(logs) > 0 {
			batcher.LogBatch(logs)
			logs = logs[:0]
		}
	}
	for {
		if !answered && !r.Buffered() {
			flush()
			if !answer() {
				break
			}
		}
		f, err := r.ReadFrame()
		if err != nil {
			flush()
			if !answer() || cn.readFailed(err) {
				break
			}
			continue
		}
		b.h.Activity()
		if l, ok := f.(*protocol.Log); ok && batcher != nil {
			if b.isEnded() {
				flush()
				answer()
				cn.throw(0, errRunEnded)
				continue
			}
			logs = append(logs, *l)
			if len(logs) >= maxLogBatch || !r.Buffered() {
				flush()
			}
			continue
		}
		flush()
		if !answer() {
			break
		}
		cn.dispatch(f)
	}
	flush()
	cn.wg.Wait()
}

// hello reads and checks the first frame; false means the connection is
// refused (the refusal has been sent), true that it is accepted and the
// context is serve's to write.
func (cn *conn) hello(r *protocol.Reader) bool {
	cn.c.SetReadDeadline(time.Now().Add(helloTimeout))
	f, err := r.ReadFrame()
	cn.c.SetReadDeadline(time.Time{})
	refuse := func(code, msg string) bool {
		cn.w.WriteFrame(protocol.Refuse(code, msg))
		return false
	}
	if err != nil {
		switch {
		case protocol.ErrorCode(err) != "":
			var pe *protocol.Error
			errors.As(err, &pe)
			return refuse(pe.Code, pe.Message)
		case errors.Is(err, os.ErrDeadlineExceeded):
			return refuse(protocol.CodeBadFrame, fmt.Sprintf("no hello within %s", helloTimeout))
		}
		return false // EOF or a torn frame: nobody to answer
	}
	h, ok := f.(*protocol.Hello)
	if !ok {
		return refuse(protocol.CodeBadFrame, fmt.Sprintf("the first frame must be hello, got %q", f.FrameType()))
	}
	cn.b.h.Activity()
	if cn.b.isEnded() {
		return refuse(protocol.CodeRunEnded, "the run has ended")
	}
	if h.Protocol != protocol.Version {
		return refuse(protocol.CodeVersionMismatch, fmt.Sprintf("hook speaks protocol %d, this engine speaks protocol %d", h.Protocol, protocol.Version))
	}
	if err := cn.b.h.Authorize(h.Token); err != nil {
		return refuse(protocol.CodeUnauthorized, "unauthorized")
	}
	if cn.b.isEnded() { // the run may have ended while we checked
		return refuse(protocol.CodeRunEnded, "the run has ended")
	}
	return true // serve writes the context
}

// readFailed answers a read error; true means stop reading.
func (cn *conn) readFailed(err error) bool {
	var pe *protocol.Error
	if errors.As(err, &pe) {
		cn.w.WriteFrame(protocol.ThrowErr(0, pe.Code, pe.Message))
		// An oversized frame leaves the stream mid-line: close it.
		return pe.Code == protocol.CodeFrameTooLarge
	}
	// io.EOF, a torn last frame (io.ErrUnexpectedEOF: ignored, so a hook
	// killed mid-frame changes nothing) or a closed connection.
	return true
}

func (cn *conn) throw(id int64, e *protocol.Error) {
	cn.w.WriteFrame(protocol.ThrowErr(id, e.Code, e.Message))
}

func (cn *conn) reply(id int64, v json.RawMessage, e *protocol.Error) {
	if e != nil {
		cn.throw(id, e)
		return
	}
	if v == nil {
		v = json.RawMessage("null")
	}
	cn.w.WriteFrame(&protocol.Return{ID: id, Value: v})
}

var errRunEnded = &protocol.Error{Code: protocol.CodeRunEnded, Message: "the run has ended"}

func (cn *conn) dispatch(f protocol.Frame) {
	b := cn.b
	var id int64
	switch f := f.(type) {
	case *protocol.Call:
		id = f.ID
	case *protocol.StoreOp:
		id = f.ID
	}
	if b.isEnded() {
		cn.throw(id, errRunEnded)
		return
	}
	switch f := f.(type) {
	case *protocol.Hello:
		cn.throw(0, &protocol.Error{Code: protocol.CodeBadFrame, Message: "hello was already said on this connection"})
	case *protocol.Log:
		b.h.Log(f.Level, f.Message)
	case *protocol.StoreOp:
		v, e := b.h.Store(b.ctx, f)
		cn.reply(f.ID, v, e)
	case *protocol.Call:
		select {
		case b.calls <- struct{}{}:
		default:
			cn.throw(f.ID, &protocol.Error{Code: protocol.CodeBadFrame, Message: fmt.Sprintf("too many calls in flight (limit %d per run)", maxCalls)})
			return
		}
		cn.wg.Add(1)
		go func() { // a call may wait on the operator; the connection reads on
			defer cn.wg.Done()
			defer func() { <-b.calls }()
			v, e := b.h.Call(b.ctx, f)
			if e == nil && b.isEnded() {
				e = errRunEnded
			}
			cn.reply(f.ID, v, e)
		}()
	case *protocol.Result:
		b.mu.Lock()
		already := b.resultSet
		b.resultSet = true
		b.mu.Unlock()
		if already {
			cn.throw(0, &protocol.Error{Code: protocol.CodeResultAlreadySet, Message: "the run's result was already set; a run has at most one result"})
			return
		}
		if e := b.h.Result(f.Outputs); e != nil {
			b.mu.Lock()
			b.resultSet = false // a refused result does not count
			b.mu.Unlock()
			cn.throw(0, e)
		}
	case *protocol.HookError:
		b.h.HookError(f.Error)
	default:
		cn.throw(id, &protocol.Error{Code: protocol.CodeBadFrame, Message: fmt.Sprintf("%q frames are sent by the engine, not by hooks", f.FrameType())})
	}
}
