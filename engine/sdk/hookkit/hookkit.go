// Package hookkit is the Go SDK for hook authors: the client half of the
// hook wire protocol v1 (docs/protocol.md).
//
//	c, err := hookkit.Connect()        // from WARDEN_SOCKET and WARDEN_TOKEN
//	if err != nil { log.Fatal(err) }
//	defer c.Close()
//	c.Log("info", "hello from "+c.Context().Module)
//	token, ok, err := c.Secrets().Get("bot_token")
//	yes, err := c.Confirm("Reboot now?")
//	err = c.Result(map[string]any{"address": "203.0.113.7"})
//
// A Client is safe for concurrent use: calls are matched to their answers
// by id, so several may be in flight on one connection.
package hookkit

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/wardenhq/warden/engine/sdk/protocol"
)

// Error is a failure the engine reported: a refused hello or a thrown
// call. Code is one of the protocol's error codes (e.g. "undeclared_name").
type Error struct {
	Code    string
	Name    string
	Message string
}

func (e *Error) Error() string {
	if e.Message == "" {
		return e.Code
	}
	return e.Code + ": " + e.Message
}

// Code returns the protocol error code of err, or "" if it has none.
func Code(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// ErrNoEngine means the process is not running as a hook.
var ErrNoEngine = errors.New("hookkit: WARDEN_TOKEN and WARDEN_SOCKET (or WARDEN_DIALER) are not set: this is not running as a warden hook")

// Client is one connection to the run's broker.
type Client struct {
	conn sockConn
	w    *protocol.Writer
	ctx  *protocol.Context

	mu      sync.Mutex
	nextID  int64
	pending map[int64]chan answer
	async   error // a throw with id 0 (e.g. a refused result), reported by Close
	readErr error
	done    chan struct{} // closed when the reader stops
}

type answer struct {
	value json.RawMessage
	err   error
}

// Connect dials the broker named by WARDEN_SOCKET with WARDEN_TOKEN, or,
// in a jail that may not create Unix sockets, through the dialer fd that
// WARDEN_DIALER names.
func Connect() (*Client, error) {
	conn, tok, err := dialEnv()
	if err != nil {
		return nil, err
	}
	return handshake(conn, tok)
}

// Dial connects to a broker socket, says hello and reads the context.
func Dial(socket, token string) (*Client, error) {
	conn, err := dialSocket(socket)
	if err != nil {
		return nil, err
	}
	return handshake(conn, token)
}

// DialFD connects through the broker's dialer at fd (see dialFD), says
// hello and reads the context. fd stays open for the next connection.
func DialFD(fd int, token string) (*Client, error) {
	conn, err := dialFD(fd)
	if err != nil {
		return nil, err
	}
	return handshake(conn, token)
}

// dialEnv connects to the run's broker as the environment says, and
// returns the connection and the run's token.
func dialEnv() (sockConn, string, error) {
	sock, dialer, tok, err := engineEnv()
	if err != nil {
		return sockConn{}, "", err
	}
	fd, err := connectEngine(sock, dialer, nil)
	if err != nil {
		return sockConn{}, "", err
	}
	conn, err := pollable(fd)
	return conn, tok, err
}

// sockConn is a connected stream socket as a pollable *os.File: reads and
// writes park the goroutine, not the thread, and deadlines work as on a
// net.Conn. Not a net.Conn itself: the net package's inits (net/netip's
// unique handles, the DNS tables) would be a share of every in-jail
// helper start, and a hook never needs more than a Unix stream.
type sockConn struct{ *os.File }

// CloseWrite half-closes the socket: the engine reads EOF after the
// frames already sent.
func (c sockConn) CloseWrite() error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = syscall.Shutdown(int(fd), syscall.SHUT_WR) }); err != nil {
		return err
	}
	return os.NewSyscallError("shutdown", serr)
}

// pollable makes fd, a connected blocking stream socket, a sockConn. The
// connect was blocking (a full backlog waits instead of failing with
// EAGAIN); from here on the runtime's poller drives it.
func pollable(fd int) (sockConn, error) {
	if err := syscall.SetNonblock(fd, true); err != nil {
		syscall.Close(fd)
		return sockConn{}, fmt.Errorf("hookkit: connect to the engine: %w", os.NewSyscallError("fcntl", err))
	}
	return sockConn{os.NewFile(uintptr(fd), "warden-broker")}, nil
}

func dialSocket(socket string) (sockConn, error) {
	fd, err := connectEngine(socket, "", nil)
	if err != nil {
		return sockConn{}, err
	}
	return pollable(fd)
}

// dialFD makes a stream socketpair, sends one end to the broker over its
// dialer at fd (SCM_RIGHTS) and returns the other: a connection that
// needs no socket(2) and no path.
func dialFD(fd int) (sockConn, error) {
	pfd, err := socketpairThrough(fd)
	if err != nil {
		return sockConn{}, err
	}
	return pollable(pfd)
}

// handshake says hello on conn and reads the context.
func handshake(conn sockConn, token string) (*Client, error) {
	c := &Client{conn: conn, w: protocol.NewWriter(conn), pending: map[int64]chan answer{}, done: make(chan struct{})}
	werr := c.w.WriteFrame(&protocol.Hello{Protocol: protocol.Version, Token: token})
	r := protocol.NewReader(conn)
	ctx, err := readHello(r, werr, func(d time.Duration) { conn.SetReadDeadline(time.Now().Add(d)) })
	conn.SetReadDeadline(time.Time{})
	if err != nil {
		conn.Close()
		return nil, err
	}
	c.ctx = ctx
	go c.read(r)
	return c, nil
}

// readHello reads the engine's answer to hello: the run's context, or
// the refusal (an *Error). werr is how writing the hello went: even when
// it failed, the engine may already have answered (it refuses a
// connection over its limit without reading), and that refusal says more
// than "broken pipe", so it is read for a second before werr is
// returned. deadline bounds the read from now.
func readHello(r *protocol.Reader, werr error, deadline func(time.Duration)) (*protocol.Context, error) {
	wait := 30 * time.Second
	if werr != nil {
		wait = time.Second
	}
	deadline(wait)
	f, err := r.ReadFrame()
	return helloAnswer(f, err, werr)
}

// helloAnswer is what the engine's answer to hello, f (or the error
// reading it), means, when writing hello failed with werr.
func helloAnswer(f protocol.Frame, err, werr error) (*protocol.Context, error) {
	if ref, ok := f.(*protocol.Refused); err == nil && ok {
		return nil, &Error{Code: ref.Error.Code, Message: ref.Error.Message}
	}
	switch {
	case werr != nil:
		return nil, fmt.Errorf("hookkit: hello: %w", werr)
	case err != nil:
		return nil, fmt.Errorf("hookkit: reading the engine's answer to hello: %w", err)
	}
	ctx, ok := f.(*protocol.Context)
	if !ok {
		return nil, fmt.Errorf("hookkit: the engine answered hello with %q", f.FrameType())
	}
	return ctx, nil
}

// Context is the run's context: run, module, hook, inputs, config,
// declared names and capabilities.
func (c *Client) Context() *protocol.Context { return c.ctx }

func (c *Client) read(r *protocol.Reader) {
	defer close(c.done)
	for {
		f, err := r.ReadFrame()
		if err != nil {
			c.mu.Lock()
			c.readErr = err
			for id, ch := range c.pending {
				ch <- answer{err: fmt.Errorf("hookkit: connection to the engine lost: %w", err)}
				delete(c.pending, id)
			}
			c.mu.Unlock()
			return
		}
		var id int64
		var a answer
		switch f := f.(type) {
		case *protocol.Return:
			id, a = f.ID, answer{value: f.Value}
		case *protocol.Throw:
			id, a = f.ID, answer{err: &Error{Code: f.Error.Code, Name: f.Error.Name, Message: f.Error.Message}}
		default:
			continue
		}
		c.mu.Lock()
		if ch, ok := c.pending[id]; ok {
			delete(c.pending, id)
			ch <- a
		} else if id == 0 && a.err != nil && c.async == nil {
			c.async = a.err
		}
		c.mu.Unlock()
	}
}

// roundTrip sends a frame built for a fresh id and waits for its answer.
func (c *Client) roundTrip(build func(id int64) protocol.Frame) (json.RawMessage, error) {
	ch := make(chan answer, 1)
	c.mu.Lock()
	if c.readErr != nil {
		c.mu.Unlock()
		return nil, fmt.Errorf("hookkit: connection to the engine lost: %w", c.readErr)
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = ch
	c.mu.Unlock()
	if err := c.w.WriteFrame(build(id)); err != nil {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
		return nil, err
	}
	a := <-ch
	return a.value, a.err
}

// Log sends a stream line. Level is debug, info, warn, error or success.
func (c *Client) Log(level, message string) error {
	return c.w.WriteFrame(&protocol.Log{Level: level, Message: message})
}

// Logf formats an info line.
func (c *Client) Logf(format string, args ...any) error {
	return c.Log("info", fmt.Sprintf(format, args...))
}

// Call invokes capability.method with args (each marshalled to JSON).
func (c *Client) Call(capability, method string, args ...any) (json.RawMessage, error) {
	raw, err := marshalArgs(args)
	if err != nil {
		return nil, err
	}
	return c.roundTrip(func(id int64) protocol.Frame {
		return &protocol.Call{ID: id, Capability: capability, Method: method, Args: raw}
	})
}

// Confirm asks the operator a yes/no question (operator.confirm).
func (c *Client) Confirm(message string) (bool, error) {
	v, err := c.Call("operator", "confirm", message)
	if err != nil {
		return false, err
	}
	var ok bool
	if err := json.Unmarshal(v, &ok); err != nil {
		return false, fmt.Errorf("hookkit: operator.confirm returned %s, not a bool", v)
	}
	return ok, nil
}

// Result sets the run's outputs (once per run) and closes this
// connection's sending side, waiting for the engine to accept or refuse
// them; a refusal comes back as an *Error.
func (c *Client) Result(outputs map[string]any) error {
	raw := make(map[string]json.RawMessage, len(outputs))
	for k, v := range outputs {
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("hookkit: output %q: %w", k, err)
		}
		raw[k] = b
	}
	if err := c.w.WriteFrame(&protocol.Result{Outputs: raw}); err != nil {
		return err
	}
	return c.Close()
}

// Fail reports the hook's own failure (an error frame); the run fails.
func (c *Client) Fail(name, message string) error {
	return c.w.WriteFrame(&protocol.HookError{Error: protocol.ErrorBody{Name: name, Message: message}})
}

// Close half-closes the connection, waits for the engine to finish
// answering what was sent, and returns the first failure the engine
// reported outside a call (e.g. a refused result or log frame).
func (c *Client) Close() error {
	c.conn.CloseWrite()
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
	}
	c.conn.Close()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.async
}

func marshalArgs(args []any) ([]json.RawMessage, error) {
	raw := make([]json.RawMessage, len(args))
	for i, a := range args {
		b, err := json.Marshal(a)
		if err != nil {
			return nil, fmt.Errorf("hookkit: argument %d: %w", i, err)
		}
		raw[i] = b
	}
	return raw, nil
}
