package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/engine/hands"
	"github.com/wardenhq/warden/engine/sdk/protocol"
	"github.com/wardenhq/warden/storage"
)

// ErrNoServer means no process serves the data dir: there is no control
// socket, or nothing listens on it (its process died). The caller may
// open the store itself.
var ErrNoServer = errors.New("no warden process serves this data dir")

// Client is an engine another process holds, reached over its control
// socket. It is an engine.Facade; its methods are safe for concurrent use.
type Client struct {
	nc      *net.UnixConn
	w       *lineWriter
	pid     int
	actor   engine.Actor
	dataDir string

	ids atomic.Uint64

	mu      sync.Mutex
	pending map[uint64]*pending
	feeds   map[uint64]engine.Feed
	err     error         // why the connection ended
	done    chan struct{} // closed when it has
	closing bool
	bye     bool // the server said goodbye before hanging up
}

// pending is a call waiting for its reply, and what the server may send
// before it (progress, questions) or after it (the end of a run).
type pending struct {
	reply    chan message
	progress func(step, detail string)
	confirm  func(ctx context.Context, message string) (bool, error)
	ended    func(engine.Outcome)
	askCtx   context.Context
	askStop  context.CancelFunc
	// asks are the questions open at this terminal, by ask id: each
	// one's cancel closes its prompt (opUnask).
	asksMu sync.Mutex
	asks   map[uint64]context.CancelFunc
}

// Dial attaches to the engine serving dataDir. It returns an error
// matching ErrNoServer when none does; any other error (the server
// refused us, say) is final and says why.
func Dial(dataDir string) (*Client, error) {
	path := filepath.Join(dataDir, engine.ControlSocket)
	nc, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		switch {
		case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ECONNREFUSED):
			return nil, fmt.Errorf("%w (%s)", ErrNoServer, path)
		case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.ENOTDIR):
			// The data dir itself is the likelier trouble (another user's,
			// or a file): the policy says which, and what to do.
			if perr := storage.CheckDir(dataDir); perr != nil {
				return nil, perr
			}
			if fi, serr := os.Lstat(path); serr == nil {
				owner := fi.Sys().(*syscall.Stat_t).Uid
				return nil, fmt.Errorf("cannot reach the engine serving %s: %s belongs to uid %d and you are uid %d: run warden as uid %d, the data dir's owner", dataDir, path, owner, os.Geteuid(), owner)
			}
			return nil, fmt.Errorf("cannot reach the engine serving %s: %s refuses you (uid %d): run warden as the data dir's owner", dataDir, path, os.Geteuid())
		}
		return nil, fmt.Errorf("attaching to the engine serving %s: %w", dataDir, err)
	}
	c := &Client{nc: nc, w: &lineWriter{w: nc}, pending: map[uint64]*pending{}, feeds: map[uint64]engine.Feed{}, done: make(chan struct{})}
	r := protocol.NewReaderSize(nc, maxReply)
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	// A server that refuses us says why and hangs up, maybe before our
	// hello is written: read its line whether or not the write worked.
	herr := c.w.send(message{Op: opHello, Version: Version})
	line, err := r.ReadLine()
	if err != nil {
		nc.Close()
		if herr != nil {
			err = herr
		}
		return nil, fmt.Errorf("%w: no welcome on %s: %v", ErrNoServer, path, err)
	}
	nc.SetDeadline(time.Time{})
	m, err := decodeMessage(line)
	switch {
	case err != nil:
		nc.Close()
		return nil, fmt.Errorf("attaching to the engine serving %s: %v", dataDir, err)
	case m.Op == opRefused:
		nc.Close()
		return nil, fmt.Errorf("the engine serving %s refused this process: %w", dataDir, decodeError(m.Error))
	case m.Op == opBye:
		// It is letting go of the data dir as we arrive: nobody will
		// serve it, and the caller may open it once it is free.
		nc.Close()
		return nil, fmt.Errorf("%w: the engine serving %s is stopping", ErrNoServer, dataDir)
	case m.Op != opWelcome:
		nc.Close()
		return nil, fmt.Errorf("attaching to the engine serving %s: expected welcome, got %q", dataDir, m.Op)
	}
	c.pid, c.actor, c.dataDir = m.PID, engine.Actor(m.Actor), m.DataDir
	go c.read(r)
	return c, nil
}

// PID is the serving process.
func (c *Client) PID() int { return c.pid }

// Actor is who the server records this process's changes as.
func (c *Client) Actor() engine.Actor { return c.actor }

// Done is closed when the connection has ended (Close, or the server
// went away); Err then says why.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err is why the connection ended, nil while it is up.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close hangs up. Runs this client started and is still following are
// cancelled by the server.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	err := c.nc.Close()
	<-c.done
	return err
}

// DataDir is the served data dir.
func (c *Client) DataDir() string { return c.dataDir }

func (c *Client) read(r *protocol.Reader) {
	var err error
	for {
		var line []byte
		if line, err = r.ReadLine(); err != nil {
			break
		}
		m, derr := decodeMessage(line)
		if derr != nil {
			err = derr
			break
		}
		c.deliver(m)
	}
	c.mu.Lock()
	if c.closing {
		err = errors.New("the connection to the engine is closed")
	} else {
		err = &engine.EngineGoneError{DataDir: c.dataDir, PID: c.pid, Closed: c.bye}
	}
	c.err = err
	calls, feeds := c.pending, c.feeds
	c.pending, c.feeds = map[uint64]*pending{}, map[uint64]engine.Feed{}
	c.mu.Unlock()
	close(c.done)
	for _, f := range feeds {
		f.End(err)
	}
	for id, p := range calls {
		if p.askStop != nil {
			p.askStop()
		}
		if p.reply != nil {
			p.reply <- message{Op: opReply, ID: id, Error: encodeError(err)}
		}
		if p.ended != nil {
			p.ended(engine.Outcome{Run: engine.RunRecord{Status: storage.RunFailed, Error: err.Error() +
				"; the run's own receipts say how it ended once a warden holds the data dir again"}})
		}
	}
}

func (c *Client) deliver(m message) {
	c.mu.Lock()
	p := c.pending[m.ID]
	feed, isFeed := c.feeds[m.ID]
	if m.Op == opReply && p != nil && p.ended == nil {
		delete(c.pending, m.ID)
	}
	if m.Op == opEnded {
		delete(c.pending, m.ID)
	}
	c.mu.Unlock()
	switch m.Op {
	case opBye:
		c.mu.Lock()
		c.bye = true
		c.mu.Unlock()
	case opEvent:
		if isFeed && m.Event != nil {
			feed.Push(*m.Event)
		}
	case opReply:
		if p != nil && p.reply != nil {
			p.reply <- m
		}
	case opProgress:
		if p != nil && p.progress != nil {
			p.progress(m.Step, m.Detail)
		}
	case opAsk:
		if p == nil || p.confirm == nil {
			c.w.send(message{Op: opAnswer, ID: m.ID, Ask: m.Ask, OK: false})
			return
		}
		ctx, cancel := context.WithCancel(p.askCtx)
		p.asksMu.Lock()
		if p.asks == nil {
			p.asks = map[uint64]context.CancelFunc{}
		}
		p.asks[m.Ask] = cancel
		p.asksMu.Unlock()
		go func() {
			defer func() {
				p.asksMu.Lock()
				delete(p.asks, m.Ask)
				p.asksMu.Unlock()
				cancel()
			}()
			ok, err := p.confirm(ctx, m.Message)
			c.w.send(message{Op: opAnswer, ID: m.ID, Ask: m.Ask, OK: ok && err == nil})
		}()
	case opUnask:
		if p != nil {
			p.asksMu.Lock()
			cancel := p.asks[m.Ask]
			p.asksMu.Unlock()
			if cancel != nil {
				cancel()
			}
		}
	case opEnded:
		if p != nil && p.ended != nil && m.Outcome != nil {
			if p.askStop != nil {
				p.askStop()
			}
			p.ended(*m.Outcome)
		}
	}
}

// do sends a call and waits for its reply, decoding results into out.
// Context and actor arguments are never sent (see message).
func (c *Client) do(ctx context.Context, p *pending, method string, args []any, out ...any) error {
	return c.doID(ctx, c.ids.Add(1), p, method, args, out...)
}

func (c *Client) doID(ctx context.Context, id uint64, p *pending, method string, args []any, out ...any) error {
	m := message{Op: opCall, ID: id, Method: method}
	for _, a := range args {
		b, err := json.Marshal(a)
		if err != nil {
			return fmt.Errorf("%s: encoding an argument: %v", method, err)
		}
		m.Args = append(m.Args, b)
	}
	if p == nil {
		p = &pending{}
	}
	p.reply = make(chan message, 1)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return err
	}
	c.pending[id] = p
	c.mu.Unlock()
	if err := c.w.send(m); err != nil {
		c.forget(id)
		return c.gone(err)
	}
	var reply message
	select {
	case reply = <-p.reply:
	case <-ctx.Done():
		c.w.send(message{Op: opCancel, ID: id})
		reply = <-p.reply // the server answers a cancelled call, or the connection ends
	}
	if reply.Error != nil {
		if p.ended != nil {
			c.forget(id)
		}
		return decodeError(reply.Error)
	}
	if len(reply.Results) != len(out) {
		return fmt.Errorf("%s: the engine sent %d results, expected %d", method, len(reply.Results), len(out))
	}
	for i, r := range reply.Results {
		if err := json.Unmarshal(r, out[i]); err != nil {
			return fmt.Errorf("%s: decoding result %d: %v", method, i+1, err)
		}
	}
	return nil
}

func (c *Client) forget(id uint64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// gone is the error of a call on a connection that broke.
func (c *Client) gone(err error) error {
	<-c.done
	if e := c.Err(); e != nil {
		return e
	}
	return err
}

// Subscribe relays the server's events into a local subscription. When
// the server goes away the subscription ends with an error matching
// engine.ErrEngineGone.
func (c *Client) Subscribe() *engine.Subscription {
	id := c.ids.Add(1)
	sub, feed := engine.NewFeed(engine.DefaultSubscriberBuffer, func() {
		c.mu.Lock()
		delete(c.feeds, id)
		c.mu.Unlock()
		c.w.send(message{Op: opUnsubscribe, ID: id})
	})
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		feed.End(err)
		return sub
	}
	c.feeds[id] = feed
	c.mu.Unlock()
	if err := c.w.send(message{Op: opSubscribe, ID: id}); err != nil {
		feed.End(c.gone(err))
	}
	return sub
}

// AttachOperator attaches this process as an operator of the served
// engine until detach (or until it hangs up).
func (c *Client) AttachOperator() (detach func()) {
	id := c.ids.Add(1)
	c.w.send(message{Op: opAttach, ID: id})
	var once sync.Once
	return func() { once.Do(func() { c.w.send(message{Op: opDetach, ID: id}) }) }
}

// StartRun starts a run in the serving process. Its operator.confirm
// questions come back to req.Confirm here, when set.
func (c *Client) StartRun(_ engine.Actor, req engine.RunRequest) (*engine.RunHandle, error) {
	var h *engine.RunHandle
	var end func(engine.Outcome)
	ready := make(chan struct{})
	p := &pending{confirm: req.Confirm}
	p.askCtx, p.askStop = context.WithCancel(context.Background())
	p.ended = func(o engine.Outcome) {
		<-ready
		if h != nil {
			if o.Run.ID == "" {
				o.Run.ID = h.ID
			}
			end(o)
		}
	}
	var id, jail, limits, tty string
	callID := c.ids.Add(1) // the run's cancel refers to it
	err := c.doID(context.Background(), callID, p, "StartRun", []any{req, req.Confirm != nil}, &id, &jail, &limits, &tty)
	if err != nil {
		p.askStop()
		close(ready)
		return nil, err
	}
	// The reason rides in the message's Message field ("" for the
	// operator's cancel).
	h, end = engine.NewRunHandle(id, func(reason string) { c.w.send(message{Op: opCancel, ID: callID, Message: reason}) })
	h.Jail, h.Limits, h.TTY = jail, limits, tty
	close(ready)
	return h, nil
}

func (c *Client) HandsInit(ctx context.Context, _ engine.Actor, opts hands.InitOptions) (r hands.InitResult, err error) {
	err = c.do(ctx, &pending{progress: opts.Progress}, "HandsInit", []any{opts, opts.Progress != nil}, &r)
	return
}

func (c *Client) HandsFinish(ctx context.Context, _ engine.Actor, root string, progress func(step, detail string)) (r hands.FinishResult, err error) {
	err = c.do(ctx, &pending{progress: progress}, "HandsFinish", []any{root, progress != nil}, &r)
	return
}

var _ engine.Facade = (*Client)(nil)

// StreamLines asks page after page (the server bounds each by bytes, see
// replyLineBytes) until it has max lines (0: every line) or the stream
// has no more.
func (c *Client) StreamLines(run string, from uint64, max int) ([]engine.Line, error) {
	var all []engine.Line
	for {
		want := 0
		if max > 0 {
			want = max - len(all)
		}
		var ls []engine.Line
		if err := c.do(context.Background(), nil, "StreamLines", []any{run, from, want}, &ls); err != nil {
			return all, err
		}
		all = append(all, ls...)
		if len(ls) == 0 || (max > 0 && len(all) >= max) {
			return all, nil
		}
		from = ls[len(ls)-1].N + 1
	}
}

// StreamLinesBefore pages backwards like StreamLines pages forwards; the
// lines come back in stream order. max <= 0 asks for none, as in the
// engine.
func (c *Client) StreamLinesBefore(run string, before uint64, max int) ([]engine.Line, error) {
	if max <= 0 {
		var ls []engine.Line
		err := c.do(context.Background(), nil, "StreamLinesBefore", []any{run, before, max}, &ls)
		return ls, err
	}
	var pages [][]engine.Line // newest first
	got := 0
	all := func() []engine.Line {
		out := make([]engine.Line, 0, got)
		for i := len(pages) - 1; i >= 0; i-- {
			out = append(out, pages[i]...)
		}
		return out
	}
	for {
		var ls []engine.Line
		if err := c.do(context.Background(), nil, "StreamLinesBefore", []any{run, before, max - got}, &ls); err != nil {
			return all(), err
		}
		pages, got = append(pages, ls), got+len(ls)
		if len(ls) == 0 || got >= max || ls[0].N == 0 {
			return all(), nil
		}
		before = ls[0].N
	}
}
