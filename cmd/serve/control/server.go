// Package control lets other warden processes use an engine this process
// holds. Only one process can open a data dir's store; that process serves
// the engine facade on <data>/control.sock, and every other warden (a CLI
// verb, a second console) attaches to it as a Client, which is an
// engine.Facade too.
//
// The wire is line-JSON, one object per line, read with the hook
// protocol's bounded line reader: calls and replies, plus the events of
// subscriptions, run endings, hands progress and operator.confirm
// questions the server asks the client that started a run.
//
// Security rests on three things: the data dir is 0700, the socket is
// 0600, and every connection's peer credentials (SO_PEERCRED) must be the
// data dir's owner or root; anything else is refused and receipted. The
// actor of every change is the peer as the kernel names it (local:<user>):
// a client cannot claim to be anyone else.
package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/engine/hands"
	"github.com/wardenhq/warden/engine/sdk/protocol"
)

// Options configure Listen.
type Options struct {
	// Logf, when set, is told about connections and refusals.
	Logf func(format string, args ...any)
}

// Server serves one engine on its data dir's control socket.
type Server struct {
	e     engine.Host
	ln    *net.UnixListener
	path  string
	owner int // uid allowed besides root: the data dir's owner
	logf  func(string, ...any)

	mu     sync.Mutex
	conns  map[*conn]struct{} // clients that said hello: at most maxConns
	silent map[*conn]struct{} // connections waiting for hello: at most maxSilent
	closed bool
	wg     sync.WaitGroup
}

// Listen creates <data>/control.sock (0600) and serves e on it until
// Close. The caller holds e's store, so any socket file already there was
// left by a process that died: it is replaced.
func Listen(e engine.Host, opts Options) (*Server, error) {
	dir := e.DataDir()
	path := filepath.Join(dir, engine.ControlSocket)
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	owner := int(fi.Sys().(*syscall.Stat_t).Uid)
	// Bind under a private name, make it 0600, then rename it into place:
	// the socket is never reachable with the umask's mode.
	tmp := filepath.Join(dir, fmt.Sprintf(".%s.%d", engine.ControlSocket, os.Getpid()))
	os.Remove(tmp)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	ln.SetUnlinkOnClose(false)
	if err := os.Chmod(tmp, 0o600); err != nil {
		ln.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("control socket: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		ln.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("control socket: %w", err)
	}
	s := &Server{e: e, ln: ln, path: path, owner: owner, logf: opts.Logf, conns: map[*conn]struct{}{}, silent: map[*conn]struct{}{}}
	if s.logf == nil {
		s.logf = func(string, ...any) {}
	}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Path is the socket's path.
func (s *Server) Path() string { return s.path }

// Close stops accepting, hangs up on every client (the runs they started
// are cancelled and receipted) and removes the socket.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	for c := range s.silent {
		c.nc.Close() // it has been told nothing, so it needs no goodbye
	}
	s.mu.Unlock()
	// Remove the name first, so no client dials a server that is going.
	os.Remove(s.path)
	err := s.ln.Close()
	// Every client is told at once, in parallel: one that does not read
	// costs the others nothing.
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.sayBye()
		}()
	}
	wg.Wait()
	s.wg.Wait()
	return err
}

// Drain waits, while the server goes on serving, until no run that an
// attached process started here is in flight, or ctx ends. Those runs are
// this process's children: closing now would cancel them, though their
// clients are still there to see them end (a `hook run` that attached
// to another's, whose verb ended first). waiting is told their number
// once, when there are any.
func (s *Server) Drain(ctx context.Context, waiting func(n int)) error {
	told := false
	for {
		n := s.runsInFlight()
		if n == 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if !told && waiting != nil {
			waiting(n)
			told = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// runsInFlight counts the runs attached processes started here that have
// not ended.
func (s *Server) runsInFlight() int { return len(s.InFlight()) }

// InFlightRun is a run an attached process started here, not ended yet.
type InFlightRun struct {
	ID  string
	PID int // the process that started it
}

// InFlight lists the runs attached processes started here that have not
// ended: what stopping this server cancels.
func (s *Server) InFlight() []InFlightRun {
	s.mu.Lock()
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	var out []InFlightRun
	for _, c := range conns {
		c.mu.Lock()
		for _, cl := range c.calls {
			if cl.run == nil {
				continue
			}
			select {
			case <-cl.run.Done():
			default:
				out = append(out, InFlightRun{ID: cl.run.ID, PID: c.peer.pid})
			}
		}
		c.mu.Unlock()
	}
	return out
}

// sayBye tells the client this is on purpose, then hangs up: a console
// takes the data dir over at once instead of reporting a crash, and an
// attached command says the engine stopped. Invariant: bye is the last
// line the client reads, and nothing queued can hold it back past
// byeWithin: the relays stop first, so a flood of events being forwarded
// never stands in front of it, and nothing (a relay, a reply racing it)
// can be written after it.
func (c *conn) sayBye() {
	c.leaving.Store(true)
	c.mu.Lock()
	subs := make([]*engine.Subscription, 0, len(c.subs))
	for _, sub := range c.subs {
		subs = append(subs, sub)
	}
	c.mu.Unlock()
	for _, sub := range subs {
		sub.Close()
	}
	c.nc.SetWriteDeadline(time.Now().Add(byeWithin))
	c.w.sendLast(message{Op: opBye})
	c.nc.Close()
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			s.logf("control: accept: %v", err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serve(nc)
		}()
	}
}

// peer is who is on the other end of a connection, from the kernel.
type peer struct {
	uid, pid int
	actor    engine.Actor
}

func peerOf(nc *net.UnixConn) (peer, error) {
	raw, err := nc.SyscallConn()
	if err != nil {
		return peer{}, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return peer{}, err
	}
	if cerr != nil {
		return peer{}, cerr
	}
	p := peer{uid: int(cred.Uid), pid: int(cred.Pid)}
	name := strconv.Itoa(p.uid)
	if u, err := user.LookupId(name); err == nil && u.Username != "" {
		name = u.Username
	}
	p.actor = engine.Actor("local:" + name)
	return p, nil
}

func (s *Server) serve(nc *net.UnixConn) {
	defer nc.Close()
	w := &lineWriter{w: nc}
	refuse := func(msg string) {
		w.send(message{Op: opRefused, Error: &wireError{Code: codeForbidden, Message: msg}})
	}
	p, err := peerOf(nc)
	if err != nil {
		s.logf("control: refused a connection: no peer credentials: %v", err)
		refuse("no peer credentials: " + err.Error())
		return
	}
	if p.uid != 0 && p.uid != s.owner {
		why := fmt.Sprintf("only the data dir's owner (uid %d) or root may attach", s.owner)
		s.logf("control: refused uid %d (pid %d): %s", p.uid, p.pid, why)
		if err := s.e.RecordRefusedAttach(p.uid, p.pid, why); err != nil {
			s.logf("control: recording the refusal: %v", err)
		}
		refuse(fmt.Sprintf("uid %d may not attach to this engine: %s", p.uid, why))
		return
	}
	c := &conn{s: s, nc: nc, w: w, peer: p, calls: map[uint64]*call{}, subs: map[uint64]*engine.Subscription{},
		detach: map[uint64]func(){}, asks: map[uint64]chan bool{}}
	if why := s.admitSilent(c); why != "" {
		refuse(why)
		return
	}
	r, ok := c.hello()
	s.mu.Lock()
	delete(s.silent, c)
	switch {
	case !ok || s.closed:
		s.mu.Unlock()
		return
	case len(s.conns) >= maxConns:
		s.mu.Unlock()
		refuse(fmt.Sprintf("too many clients (%d) attached; close some and try again", maxConns))
		return
	}
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	}()
	c.run(r)
}

// admitSilent counts c among the connections waiting for hello, or says
// why it may not wait: too many wait in all, or from c's process.
func (s *Server) admitSilent(c *conn) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "the engine is stopping"
	}
	if len(s.silent) >= maxSilent {
		return fmt.Sprintf("too many connections (%d) have not said hello yet; try again in a few seconds", maxSilent)
	}
	n := 0
	for o := range s.silent {
		if o.peer.pid == c.peer.pid {
			n++
		}
	}
	if n >= maxSilentPerPID {
		return fmt.Sprintf("pid %d has %d connections that have not said hello yet; say hello on those first", c.peer.pid, n)
	}
	s.silent[c] = struct{}{}
	return ""
}

// conn is one attached client.
type conn struct {
	s    *Server
	nc   *net.UnixConn
	w    *lineWriter
	peer peer

	mu      sync.Mutex
	calls   map[uint64]*call                // in flight, and runs started, by call id
	subs    map[uint64]*engine.Subscription // by subscription id
	detach  map[uint64]func()               // operator attachments by id
	asks    map[uint64]chan bool            // open operator.confirm questions
	nextAsk uint64
	gone    bool // hung up: nothing new is registered
	wg      sync.WaitGroup
	// leaving is set when the server says goodbye: relays send nothing
	// more, so the goodbye is not queued behind events.
	leaving atomic.Bool
}

// call is a call in flight or a run it started.
type call struct {
	cancel context.CancelFunc
	run    *engine.RunHandle
}

// hello reads the client's hello within helloWithin and checks it; a
// bad one is refused here. It returns the reader the session goes on on.
func (c *conn) hello() (*protocol.Reader, bool) {
	r := protocol.NewReader(c.nc)
	c.nc.SetReadDeadline(time.Now().Add(helloWithin))
	line, err := r.ReadLine()
	if err != nil {
		return nil, false
	}
	c.nc.SetReadDeadline(time.Time{})
	hello, err := decodeMessage(line)
	switch {
	case err != nil:
		c.w.send(message{Op: opRefused, Error: &wireError{Code: codeProtocol, Message: err.Error()}})
		return nil, false
	case hello.Op != opHello:
		c.w.send(message{Op: opRefused, Error: &wireError{Code: codeProtocol, Message: fmt.Sprintf("expected hello first, got %q", hello.Op)}})
		return nil, false
	case hello.Version != Version:
		c.w.send(message{Op: opRefused, Error: &wireError{Code: codeProtocol, Message: fmt.Sprintf(
			"this engine (pid %d) speaks control protocol %d, the client %d: use the same warden binary for both", os.Getpid(), Version, hello.Version)}})
		return nil, false
	}
	return r, true
}

// run welcomes a client whose hello was taken and serves it until it
// hangs up.
func (c *conn) run(r *protocol.Reader) {
	ctx, cancel := context.WithCancel(context.Background())
	defer func() {
		cancel()
		c.hangUp()
		c.wg.Wait()
	}()
	if c.w.send(message{Op: opWelcome, Version: Version, PID: os.Getpid(), Actor: string(c.peer.actor), DataDir: c.s.e.DataDir()}) != nil {
		return
	}
	for {
		line, err := r.ReadLine()
		if err != nil {
			var pe *protocol.Error
			if errors.As(err, &pe) && pe.Code != protocol.CodeFrameTooLarge {
				c.w.send(message{Op: opReply, Error: &wireError{Code: codeProtocol, Message: err.Error()}})
				continue
			}
			return
		}
		m, err := decodeMessage(line)
		if err != nil {
			c.w.send(message{Op: opReply, Error: &wireError{Code: codeProtocol, Message: err.Error()}})
			continue
		}
		c.handle(ctx, m)
	}
}

// hangUp undoes what the client set up: its subscriptions and operator
// attachments end, its questions are unanswerable, the calls it has in
// flight are cancelled, and so are the runs it started and was following
// (nobody is left to see them end or answer their questions).
func (c *conn) hangUp() {
	c.mu.Lock()
	c.gone = true
	subs, detach := c.subs, c.detach
	var runs []string
	var cancels []context.CancelFunc
	for _, cl := range c.calls {
		if cl.run != nil {
			runs = append(runs, cl.run.ID)
		}
		cancels = append(cancels, cl.cancel)
	}
	c.subs, c.detach, c.calls = map[uint64]*engine.Subscription{}, map[uint64]func(){}, map[uint64]*call{}
	for _, ch := range c.asks {
		close(ch)
	}
	c.asks = map[uint64]chan bool{}
	c.mu.Unlock()
	for _, s := range subs {
		s.Close()
	}
	for _, d := range detach {
		d()
	}
	for _, id := range runs {
		c.s.e.CancelRun(c.peer.actor, id)
	}
	for _, cancel := range cancels {
		cancel()
	}
}

func (c *conn) reply(id uint64, results []any, err error) {
	if err != nil {
		c.w.send(message{Op: opReply, ID: id, Error: encodeError(err)})
		return
	}
	// The results are encoded once, straight into the line: going through
	// message.Results would validate and copy every byte a second time.
	line := make([]byte, 0, 256)
	line = fmt.Appendf(line, `{"op":"reply","id":%d,"results":[`, id)
	buf := &bytes.Buffer{}
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	for i, r := range results {
		buf.Reset()
		if jerr := enc.Encode(r); jerr != nil {
			c.w.send(message{Op: opReply, ID: id, Error: &wireError{Code: codeError, Message: "encoding the reply: " + jerr.Error()}})
			return
		}
		if i > 0 {
			line = append(line, ',')
		}
		line = append(line, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
	}
	line = append(line, "]}\n"...)
	c.w.write(line)
}

func (c *conn) handle(ctx context.Context, m message) {
	switch m.Op {
	case opCall:
		cctx, cancel := context.WithCancel(ctx)
		c.mu.Lock()
		if _, busy := c.calls[m.ID]; busy || m.ID == 0 {
			c.mu.Unlock()
			cancel()
			c.reply(m.ID, nil, fmt.Errorf("call id %d is zero or already in use", m.ID))
			return
		}
		cl := &call{cancel: cancel}
		c.calls[m.ID] = cl
		c.mu.Unlock()
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			results, err := c.dispatch(cctx, m, cl)
			c.mu.Lock()
			if cl.run == nil || err != nil {
				delete(c.calls, m.ID)
				cancel()
			}
			c.mu.Unlock()
			c.reply(m.ID, results, err)
			if cl.run != nil && err == nil {
				c.follow(m.ID, cl)
			}
		}()
	case opCancel:
		c.mu.Lock()
		var run *engine.RunHandle
		var cancel context.CancelFunc
		if cl := c.calls[m.ID]; cl != nil {
			run, cancel = cl.run, cl.cancel
		}
		c.mu.Unlock()
		switch {
		case run != nil:
			run.CancelFor(m.Message) // bounded there; "" is the operator's
		case cancel != nil:
			cancel()
		}
	case opAnswer:
		c.mu.Lock()
		ch := c.asks[m.Ask]
		delete(c.asks, m.Ask)
		c.mu.Unlock()
		if ch != nil {
			ch <- m.OK
		}
	case opSubscribe:
		sub := c.s.e.Subscribe()
		c.mu.Lock()
		if old := c.subs[m.ID]; old != nil {
			old.Close()
		}
		c.subs[m.ID] = sub
		c.mu.Unlock()
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.relay(m.ID, sub)
		}()
	case opUnsubscribe:
		c.mu.Lock()
		sub := c.subs[m.ID]
		delete(c.subs, m.ID)
		c.mu.Unlock()
		if sub != nil {
			sub.Close()
		}
	case opAttach:
		d := c.s.e.AttachOperator()
		c.mu.Lock()
		if old := c.detach[m.ID]; old != nil {
			old()
		}
		c.detach[m.ID] = d
		c.mu.Unlock()
	case opDetach:
		c.mu.Lock()
		d := c.detach[m.ID]
		delete(c.detach, m.ID)
		c.mu.Unlock()
		if d != nil {
			d()
		}
	default:
		c.w.send(message{Op: opReply, ID: m.ID, Error: &wireError{Code: codeProtocol, Message: fmt.Sprintf("unknown op %q", m.Op)}})
	}
}

// relay forwards a subscription's events. A client that reads slowly
// blocks only this goroutine; the subscription's bounded queue then
// overflows into the usual "missed" marker, which is forwarded too.
func (c *conn) relay(id uint64, sub *engine.Subscription) {
	for {
		ev, err := sub.Next(context.Background())
		if err != nil || c.leaving.Load() {
			return
		}
		if c.w.send(message{Op: opEvent, ID: id, Event: &ev}) != nil {
			sub.Close()
			return
		}
	}
}

// follow tells the client when the run a call started has ended.
func (c *conn) follow(id uint64, cl *call) {
	<-cl.run.Done()
	o := cl.run.Wait()
	c.mu.Lock()
	delete(c.calls, id)
	c.mu.Unlock()
	cl.cancel()
	c.w.send(message{Op: opEnded, ID: id, Outcome: &o})
}

// confirm asks the client's terminal an operator.confirm question.
func (c *conn) confirm(id uint64) func(ctx context.Context, message string) (bool, error) {
	return func(ctx context.Context, text string) (bool, error) {
		ch := make(chan bool, 1)
		c.mu.Lock()
		c.nextAsk++
		ask := c.nextAsk
		c.asks[ask] = ch
		c.mu.Unlock()
		if err := c.w.send(message{Op: opAsk, ID: id, Ask: ask, Message: text}); err != nil {
			return false, fmt.Errorf("the terminal that started the run went away: %w", err)
		}
		select {
		case ok, open := <-ch:
			if !open {
				return false, errors.New("the terminal that started the run went away")
			}
			return ok, nil
		case <-ctx.Done():
			c.mu.Lock()
			delete(c.asks, ask)
			c.mu.Unlock()
			// Decided elsewhere (the console, `warden perms`): the
			// terminal's prompt closes now, not when the run ends.
			c.w.send(message{Op: opUnask, ID: id, Ask: ask})
			return false, ctx.Err()
		}
	}
}

// progress relays hands init/finish steps to the client.
func (c *conn) progress(id uint64) func(step, detail string) {
	return func(step, detail string) {
		c.w.send(message{Op: opProgress, ID: id, Step: step, Detail: detail})
	}
}

// handler serves one facade method called by name: it decodes the wire
// arguments into the method's own parameter types and calls it. The
// table of them, handlers, is generated from engine.Facade
// (facade_gen.go), with the Client's stubs beside it.
type handler func(ctx context.Context, e engine.Facade, actor engine.Actor, args []json.RawMessage) ([]any, error)

//go:generate go test -run ^TestFacadeCodeIsCurrent$ -update .

// local are facade methods a Client answers itself or with an op of its
// own; they are never called by name.
var local = map[string]bool{
	"Close": true, "DataDir": true, "Subscribe": true, "AttachOperator": true,
}

// special are facade methods called by name but served by hand in
// dispatch, because they need the connection (a run's questions go back
// to the client, hands steps are relayed to it) or are paged (stream
// lines, bounded by bytes per reply). Their Client methods are
// hand-written too.
var special = map[string]bool{"StartRun": true, "HandsInit": true, "HandsFinish": true,
	"StreamLines": true, "StreamLinesBefore": true}

// decodeArgs decodes a call's arguments, one JSON value each, into into.
func decodeArgs(method string, raw []json.RawMessage, into ...any) error {
	switch {
	case len(raw) < len(into):
		return fmt.Errorf("%s: too few arguments (%d, it takes %d)", method, len(raw), len(into))
	case len(raw) > len(into):
		return fmt.Errorf("%s: too many arguments (%d, it takes %d)", method, len(raw), len(into))
	}
	for i, a := range raw {
		if err := json.Unmarshal(a, into[i]); err != nil {
			return fmt.Errorf("%s argument %d: %v", method, i+1, err)
		}
	}
	return nil
}

// dispatch calls a facade method: a special one by hand, any other
// through its generated handler. The handler table is the allow-list:
// nothing outside the Facade can be called.
func (c *conn) dispatch(ctx context.Context, m message, cl *call) ([]any, error) {
	e, actor := c.s.e, c.peer.actor
	switch m.Method {
	case "StartRun":
		var req engine.RunRequest
		var ask bool
		if err := decodeArgs(m.Method, m.Args, &req, &ask); err != nil {
			return nil, err
		}
		if ask {
			req.Confirm = c.confirm(m.ID)
		}
		h, err := e.StartRun(actor, req)
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		cl.run = h
		gone := c.gone
		c.mu.Unlock()
		if gone { // hung up while the run was starting
			e.CancelRun(actor, h.ID)
		}
		return []any{h.ID, h.Jail, h.Limits, h.TTY}, nil
	case "StreamLines", "StreamLinesBefore":
		// Paged by bytes as well as lines (see replyLineBytes); the
		// client asks again for the rest.
		var run string
		var at uint64
		var max int
		if err := decodeArgs(m.Method, m.Args, &run, &at, &max); err != nil {
			return nil, err
		}
		var ls []engine.Line
		var err error
		if m.Method == "StreamLines" {
			ls, err = pageForward(func(from uint64, n int) ([]engine.Line, error) { return e.StreamLines(run, from, n) }, at, max)
		} else {
			ls, err = pageBackward(func(before uint64, n int) ([]engine.Line, error) { return e.StreamLinesBefore(run, before, n) }, at, max)
		}
		if err != nil {
			return nil, err
		}
		return []any{ls}, nil
	case "HandsInit":
		var opts hands.InitOptions
		var progress bool
		if err := decodeArgs(m.Method, m.Args, &opts, &progress); err != nil {
			return nil, err
		}
		if progress {
			opts.Progress = c.progress(m.ID)
		}
		r, err := e.HandsInit(ctx, actor, opts)
		return []any{r}, err
	case "HandsFinish":
		var root string
		var progress bool
		if err := decodeArgs(m.Method, m.Args, &root, &progress); err != nil {
			return nil, err
		}
		var p func(string, string)
		if progress {
			p = c.progress(m.ID)
		}
		r, err := e.HandsFinish(ctx, actor, root, p)
		return []any{r}, err
	}
	h, ok := handlers[m.Method]
	if !ok {
		return nil, fmt.Errorf("%q is not a method of the engine facade", m.Method)
	}
	return h(ctx, e, actor, m.Args)
}
