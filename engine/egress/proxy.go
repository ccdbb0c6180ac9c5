package egress

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wardenhq/warden/engine/egress/bridge"
)

// Verdict is the policy's answer for one connection, made by the engine
// (which may ask the operator, so Decide may block).
type Verdict struct {
	Allow bool
	// AllowedBy is the kind of grant: "rule" (the policy's list, or its
	// network: true), "approve-once" or "approve-always".
	AllowedBy string
	// Via says what allowed it ("policy module:x revision 3:
	// api.github.com:443", "approve-once by local:root (request 7)", ...).
	Via string
	// Reason is why it was denied (the operator's words, or the engine's).
	Reason string
	// Exempt skips the address deny list: the destination is an explicit
	// ip: entry, which names that very address.
	Exempt bool
}

// Record is one connection as it ended: what the network.connect receipt
// says.
type Record struct {
	Host      string        `json:"host"`
	Port      uint16        `json:"port"`
	Protocol  string        `json:"protocol"` // connect, http or socks5
	Addr      string        `json:"address,omitempty"`
	Allowed   bool          `json:"allowed"`
	AllowedBy string        `json:"allowedBy,omitempty"`
	Via       string        `json:"via,omitempty"`
	Reason    string        `json:"reason,omitempty"`
	Up        int64         `json:"bytesUp"`
	Down      int64         `json:"bytesDown"`
	Start     time.Time     `json:"-"`
	Duration  time.Duration `json:"-"`
}

// Config is one run's proxy.
type Config struct {
	// Socket is the Unix socket path (in the run dir) to listen on.
	Socket string
	// Decide is asked once per connection that names a valid host.
	Decide func(ctx context.Context, host string, port uint16) Verdict
	// Check, when set, is asked before Decide and must never wait: a
	// quick yes (the policy lists the name) is the verdict, and Decide is
	// not asked. Anything else (decided false) goes to Decide, with the
	// client watched for a hang-up while it may wait on the operator.
	Check func(host string, port uint16) (v Verdict, decided bool)
	// Resolve turns a name into addresses; nil means the host's resolver.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// Exempt, when set, names hosts that skip the deny list (tests only:
	// the engine sets it from an option no CLI or config reaches).
	Exempt func(host string) bool
	// Reached is told, once per connection, the address it connected to
	// (before any byte is relayed); OnClose gets the record at its end.
	Reached func(r Record)
	OnClose func(r Record)
	// MaxConns bounds the connections open at once (default
	// DefaultMaxConns); IdleTimeout closes a connection with no byte either
	// way for that long (default DefaultIdle).
	MaxConns    int
	IdleTimeout time.Duration
	DialTimeout time.Duration
}

// Defaults.
const (
	DefaultMaxConns = 200
	DefaultIdle     = 2 * time.Minute
	defaultDial     = 10 * time.Second
	headerTimeout   = 30 * time.Second
	maxHeaderBytes  = 64 << 10
	relayBuffer     = 256 << 10
)

// Proxy is a running per-run proxy.
type Proxy struct {
	cfg    Config
	ln     net.Listener
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	open   atomic.Int64

	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	adopted bool           // the bridge's listeners were handed over
	lns     []net.Listener // those listeners (see handoff.go)
}

// Listen starts the proxy on cfg.Socket (0600).
func Listen(cfg Config) (*Proxy, error) {
	if cfg.Decide == nil {
		return nil, errors.New("egress: no Decide")
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdle
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = defaultDial
	}
	if cfg.Resolve == nil {
		cfg.Resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	ln, err := net.Listen("unix", cfg.Socket)
	if err != nil {
		return nil, fmt.Errorf("egress proxy: %w", err)
	}
	if err := os.Chmod(cfg.Socket, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{cfg: cfg, ln: ln, ctx: ctx, cancel: cancel, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve(ln)
	return p, nil
}

// Close stops accepting, ends every connection (a decision still pending
// is abandoned) and waits until each has been recorded.
func (p *Proxy) Close() {
	p.cancel()
	p.ln.Close()
	p.mu.Lock()
	for _, ln := range p.lns {
		ln.Close()
	}
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// serve accepts on the proxy socket, or on a listener the bridge handed
// over; a connection from either takes the same path.
func (p *Proxy) serve(ln net.Listener) {
	defer p.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			if p.ctx.Err() != nil {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		n := p.open.Add(1)
		// Past twice the limit a connection is not even read: the hook is
		// flooding, and each answer costs a goroutine.
		if n > int64(2*p.cfg.MaxConns) {
			p.open.Add(-1)
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer func() {
				p.mu.Lock()
				delete(p.conns, c)
				p.mu.Unlock()
				p.open.Add(-1)
			}()
			p.handle(c, n > int64(p.cfg.MaxConns))
		}()
	}
}

// request is what a client asked for, before any decision.
type request struct {
	proto string // connect, http, socks5
	host  string
	port  uint16
	http  *http.Request // absolute-form request (proto http)
}

// refusal is how a client is told no, in its own protocol.
type refusal struct {
	status int    // HTTP status
	socks  byte   // SOCKS5 reply code
	reason string // one line
}

func (p *Proxy) handle(c net.Conn, overLimit bool) {
	defer c.Close()
	rec := Record{Start: time.Now()}
	c.SetReadDeadline(time.Now().Add(headerTimeout))
	// On the proxy socket the first message may be the bridge's handoff
	// (descriptors travel only with it); its bytes are otherwise the
	// start of a request.
	var src io.Reader = c
	if uc, ok := c.(*net.UnixConn); ok {
		first, fds, err := firstMessage(uc)
		switch {
		case len(fds) > 0 || (len(first) > 0 && first[0] == handoffByte):
			if err == nil && len(first) == 1 {
				err = p.adopt(fds)
			} else {
				closeFDs(fds)
				if err == nil {
					err = errors.New("a handoff is one byte with the listeners")
				}
			}
			answer := "ok\n"
			if err != nil {
				answer = err.Error() + "\n"
			}
			c.SetWriteDeadline(time.Now().Add(5 * time.Second))
			io.WriteString(c, answer)
			return
		case err != nil:
			return
		}
		src = io.MultiReader(bytes.NewReader(first), c)
	}
	// The header is read through a limit (a hostile hook cannot make the
	// engine buffer an endless line); the limit is lifted for the relay.
	lr := &io.LimitedReader{R: src, N: maxHeaderBytes}
	br := bufio.NewReaderSize(lr, 16<<10)
	req, ref := readRequest(br, c)
	lr.N = math.MaxInt64
	if req != nil {
		rec.Host, rec.Port, rec.Protocol = req.host, req.port, req.proto
	}
	finish := func() {
		rec.Duration = time.Since(rec.Start)
		if p.cfg.OnClose != nil && rec.Host != "" {
			p.cfg.OnClose(rec)
		}
	}
	if ref != nil {
		if req != nil {
			reply(c, req.proto, *ref)
			rec.Reason = ref.reason
			finish()
		}
		return
	}
	if overLimit {
		ref := refusal{status: http.StatusServiceUnavailable, socks: socksGeneralFailure,
			reason: fmt.Sprintf("connection limit reached: this run may have %d connections open at once", p.cfg.MaxConns)}
		reply(c, req.proto, ref)
		rec.Reason = ref.reason
		finish()
		return
	}
	c.SetReadDeadline(time.Time{})

	// The decision may wait on the operator; a client that hangs up
	// meanwhile abandons it (its request is closed, not left pending).
	ctx, cancel := context.WithCancelCause(p.ctx)
	defer cancel(nil)
	var v Verdict
	decided := false
	if p.cfg.Check != nil {
		v, decided = p.cfg.Check(req.host, req.port)
	}
	if !decided {
		stopWatch := watchHangup(c, br, cancel)
		v = p.cfg.Decide(ctx, req.host, req.port)
		stopWatch()
	}
	rec.Via, rec.AllowedBy = v.Via, v.AllowedBy
	if !v.Allow {
		rec.Reason = v.Reason
		reply(c, req.proto, refusal{status: http.StatusForbidden, socks: socksNotAllowed, reason: v.Reason})
		finish()
		return
	}
	up, addr, ref := p.dial(ctx, req.host, req.port, v.Exempt)
	rec.Addr = addr
	if ref != nil {
		rec.Reason = ref.reason
		reply(c, req.proto, *ref)
		finish()
		return
	}
	defer up.Close()
	rec.Allowed = true
	if p.cfg.Reached != nil {
		p.cfg.Reached(rec)
	}
	switch req.proto {
	case "connect":
		io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
	case "socks5":
		c.Write([]byte{5, 0, 0, 1, 0, 0, 0, 0, 0, 0})
	case "http":
		// One request per connection: the upstream is the one name the
		// policy allowed, so the client cannot reuse it for another host.
		r := req.http
		r.Header.Del("Proxy-Connection")
		r.Header.Del("Proxy-Authorization")
		r.Close = true
		r.RequestURI = ""
		cw := &counter{w: up}
		err := r.Write(cw)
		rec.Up += cw.n
		if err != nil {
			rec.Reason = "forwarding the request: " + err.Error()
			finish()
			return
		}
	}
	up2, down := p.relay(c, br, up)
	rec.Up += up2
	rec.Down = down
	finish()
}

// ErrHungUp is the cause of a decision abandoned by its client.
var ErrHungUp = errors.New("the hook closed the connection before a decision")

// watchHangup cancels with ErrHungUp when the client closes while its
// connection waits for a decision. Bytes the client sends early stay in
// br for the relay. stop ends the watch before br is read again.
func watchHangup(c net.Conn, br *bufio.Reader, cancel context.CancelCauseFunc) (stop func()) {
	done := make(chan struct{})
	var stopping atomic.Bool
	go func() {
		defer close(done)
		_, err := br.Peek(1)
		if err != nil && !stopping.Load() {
			var ne net.Error
			if !(errors.As(err, &ne) && ne.Timeout()) {
				cancel(ErrHungUp)
			}
		}
	}()
	return func() {
		stopping.Store(true)
		c.SetReadDeadline(time.Now())
		<-done
		c.SetReadDeadline(time.Time{})
	}
}

// dial resolves host (by the engine: the hook never resolves), refuses
// addresses on the deny list unless exempt, and connects to the first
// address left.
func (p *Proxy) dial(ctx context.Context, host string, port uint16, exempt bool) (net.Conn, string, *refusal) {
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		addrs = []netip.Addr{a.Unmap()}
	} else {
		rctx, cancel := context.WithTimeout(ctx, p.cfg.DialTimeout)
		got, err := p.cfg.Resolve(rctx, host)
		cancel()
		if err != nil || len(got) == 0 {
			why := "no address"
			if err != nil {
				why = err.Error()
			}
			return nil, "", &refusal{status: http.StatusBadGateway, socks: socksHostUnreachable, reason: "cannot resolve " + host + ": " + why}
		}
		addrs = got
		if p.cfg.Exempt != nil && p.cfg.Exempt(host) {
			exempt = true
		}
	}
	var why []string
	var lastErr error
	tried := ""
	for _, a := range addrs {
		a = a.Unmap()
		if !exempt {
			if d := DeniedAddr(a); d != "" {
				why = append(why, d)
				continue
			}
		}
		tried = netip.AddrPortFrom(a, port).String()
		d := net.Dialer{Timeout: p.cfg.DialTimeout}
		c, err := d.DialContext(ctx, "tcp", tried)
		if err == nil {
			return c, tried, nil
		}
		lastErr = err
	}
	if lastErr != nil {
		code := byte(socksHostUnreachable)
		if errors.Is(lastErr, errConnRefused) || strings.Contains(lastErr.Error(), "refused") {
			code = socksConnRefused
		}
		return nil, tried, &refusal{status: http.StatusBadGateway, socks: code, reason: "cannot connect to " + tried + ": " + lastErr.Error()}
	}
	return nil, "", &refusal{status: http.StatusForbidden, socks: socksNotAllowed,
		reason: fmt.Sprintf("%s resolves only to refused addresses (%s); only an explicit ip: entry may reach such an address", host, strings.Join(why, "; "))}
}

var errConnRefused = errors.New("connection refused")

// relay copies both ways until both sides are done or nothing moves for
// the idle timeout. It returns the bytes sent up (hook to world) and down.
//
// Once one direction ends (its reader saw EOF or an error), the other
// gets only drainLinger without a byte before both sides close: a peer
// that never closes its end after the hook hung up would otherwise keep
// the connection, and its slot, for the whole idle timeout. A peer still
// answering (a response after the hook's half-close) keeps it open, each
// read giving it drainLinger more.
func (p *Proxy) relay(c net.Conn, br *bufio.Reader, up net.Conn) (int64, int64) {
	var last atomic.Int64
	last.Store(time.Now().UnixNano())
	var ended atomic.Int32 // directions done
	var upN, downN int64
	var wg sync.WaitGroup
	wg.Add(2)
	idle := p.cfg.IdleTimeout
	linger := min(drainLinger, idle)
	limit := func() time.Duration {
		if ended.Load() > 0 {
			return linger
		}
		return idle
	}
	copyDir := func(dst net.Conn, src net.Conn, r io.Reader, n *int64, other net.Conn) {
		defer wg.Done()
		bp := relayBufs.Get().(*[]byte)
		defer relayBufs.Put(bp)
		buf := *bp
		for {
			src.SetReadDeadline(time.Now().Add(limit()))
			k, err := r.Read(buf)
			if k > 0 {
				last.Store(time.Now().UnixNano())
				if _, werr := dst.Write(buf[:k]); werr != nil {
					break
				}
				*n += int64(k)
			}
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() && time.Since(time.Unix(0, last.Load())) < limit() {
					continue // the other direction is busy
				}
				break
			}
		}
		quiet := time.Since(time.Unix(0, last.Load())) >= limit()
		// Half-close so the peer sees EOF; the other direction may drain.
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		} else {
			dst.Close()
		}
		if ended.Add(1) == 1 {
			// Wake the other direction's read: from now on it waits
			// only drainLinger for a byte.
			other.SetReadDeadline(time.Now().Add(linger))
		}
		if quiet {
			c.Close()
			up.Close()
		}
	}
	go copyDir(up, c, br, &upN, up)
	go copyDir(c, up, up, &downN, c)
	wg.Wait()
	return upN, downN
}

// drainLinger is how long a connection stays open without a byte once
// one side is done.
const drainLinger = 5 * time.Second

// relayBufs recycles relay buffers: a hook opening many short
// connections would otherwise allocate two per connection.
var relayBufs = sync.Pool{New: func() any { b := make([]byte, relayBuffer); return &b }}

type counter struct {
	w io.Writer
	n int64
}

func (c *counter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

// readRequest reads a client's first words: SOCKS5 (first byte 5) or an
// HTTP proxy request (CONNECT host:port, or an absolute-form http://
// request). A nil request with a refusal means the client spoke nonsense
// and is just closed.
func readRequest(br *bufio.Reader, c net.Conn) (*request, *refusal) {
	first, err := br.Peek(1)
	if err != nil {
		return nil, &refusal{}
	}
	if first[0] == 5 {
		return readSocks(br, c)
	}
	hr, err := http.ReadRequest(br)
	if err != nil {
		io.WriteString(c, "HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
		return nil, &refusal{}
	}
	if hr.Method == http.MethodConnect {
		host, port, err := splitHostPort(hr.RequestURI, 0)
		if err != nil {
			io.WriteString(c, "HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
			return nil, &refusal{}
		}
		return &request{proto: "connect", host: host, port: port}, nil
	}
	if hr.URL == nil || !hr.URL.IsAbs() || hr.URL.Scheme != "http" {
		msg := "this is an egress proxy: send CONNECT host:port, or an absolute http:// URL"
		fmt.Fprintf(c, "HTTP/1.1 400 %s\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", msg)
		return nil, &refusal{}
	}
	host, port, err := splitHostPort(hr.URL.Host, 80)
	if err != nil {
		io.WriteString(c, "HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
		return nil, &refusal{}
	}
	return &request{proto: "http", host: host, port: port, http: hr}, nil
}

// splitHostPort reads host:port (with def for a missing port; def 0
// means the port is required) and checks the host is a valid name or an
// address.
func splitHostPort(hp string, def uint16) (string, uint16, error) {
	host, ps, err := net.SplitHostPort(hp)
	if err != nil {
		if def == 0 {
			return "", 0, err
		}
		host, ps = hp, strconv.Itoa(int(def))
	}
	n, err := strconv.ParseUint(ps, 10, 16)
	if err != nil || n == 0 {
		return "", 0, fmt.Errorf("bad port %q", ps)
	}
	return checkHost(host, uint16(n))
}

func checkHost(host string, port uint16) (string, uint16, error) {
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		if a.Zone() != "" {
			return "", 0, errors.New("zoned address")
		}
		return a.Unmap().String(), port, nil
	}
	name, err := CanonicalName(host)
	if err != nil {
		return "", 0, err
	}
	return name, port, nil
}

// reply tells a client no, in its protocol. For HTTP the reason phrase of
// the status line carries the reason (a client that shows only the status
// line still learns why), and the body repeats it.
func reply(c net.Conn, proto string, r refusal) {
	c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if proto == "socks5" {
		code := r.socks
		if code == 0 {
			code = socksGeneralFailure
		}
		c.Write([]byte{5, code, 0, 1, 0, 0, 0, 0, 0, 0})
		return
	}
	status := r.status
	if status == 0 {
		status = http.StatusBadGateway
	}
	phrase := http.StatusText(status)
	if r.reason != "" {
		phrase += ": " + ReasonPhrase(r.reason)
	}
	body := "warden egress: " + phrase + "\n"
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", status, phrase, len(body), body)
}

// ReasonPhrase makes an operator's reason safe for a status line: printable
// ASCII only, one line, at most 200 bytes.
func ReasonPhrase(s string) string { return bridge.ReasonPhrase(s) }
