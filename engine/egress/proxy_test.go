package egress

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// echoServer answers "hello <line>" to each line, on 127.0.0.1.
func echoServer(t *testing.T) uint16 {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				if strings.HasPrefix(peek(br), "GET ") {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					body := "path " + req.URL.Path + " host " + req.Host + " proxyhdr " + req.Header.Get("Proxy-Connection")
					fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
					return
				}
				for {
					line, err := br.ReadString('\n')
					if err != nil {
						return
					}
					io.WriteString(c, "hello "+line)
				}
			}()
		}
	}()
	return uint16(ln.Addr().(*net.TCPAddr).Port)
}

func peek(br *bufio.Reader) string {
	b, _ := br.Peek(4)
	return string(b)
}

type testProxy struct {
	*Proxy
	socket string
	mu     sync.Mutex
	recs   []Record
}

// startProxy: "allowed.test" and "loop.test" resolve to 127.0.0.1 and
// "meta.test" to 169.254.169.254; only allowed.test is exempt from the
// deny list. Everything named *.test is allowed by the policy except
// "denied.test".
func startProxy(t *testing.T, max int) *testProxy { return startProxyIdle(t, max, 0) }

func startProxyIdle(t *testing.T, max int, idle time.Duration) *testProxy {
	t.Helper()
	tp := &testProxy{socket: filepath.Join(t.TempDir(), "egress.sock")}
	p, err := Listen(Config{
		Socket: tp.socket,
		Decide: func(ctx context.Context, host string, port uint16) Verdict {
			if host == "denied.test" {
				return Verdict{Reason: "not on my watch"}
			}
			return Verdict{Allow: true, Via: "test", Exempt: host == "127.0.0.1"}
		},
		Resolve: func(ctx context.Context, host string) ([]netip.Addr, error) {
			switch host {
			case "allowed.test", "loop.test":
				return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
			case "meta.test":
				return []netip.Addr{netip.MustParseAddr("169.254.169.254")}, nil
			}
			return nil, fmt.Errorf("no such host")
		},
		Exempt:      func(h string) bool { return h == "allowed.test" },
		OnClose:     func(r Record) { tp.mu.Lock(); tp.recs = append(tp.recs, r); tp.mu.Unlock() },
		MaxConns:    max,
		IdleTimeout: idle,
	})
	if err != nil {
		t.Fatal(err)
	}
	tp.Proxy = p
	t.Cleanup(p.Close)
	return tp
}

func (tp *testProxy) dial(t *testing.T) net.Conn {
	c, err := net.Dial("unix", tp.socket)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	t.Cleanup(func() { c.Close() })
	return c
}

func statusLine(t *testing.T, br *bufio.Reader) string {
	line, err := br.ReadString('\n')
	if err != nil {
		t.Fatalf("no status line: %v", err)
	}
	return strings.TrimSpace(line)
}

func TestProxyConnectRelaysAndRecords(t *testing.T) {
	port := echoServer(t)
	tp := startProxy(t, 8)
	c := tp.dial(t)
	fmt.Fprintf(c, "CONNECT allowed.test:%d HTTP/1.1\r\nHost: allowed.test\r\n\r\nearly\n", port)
	br := bufio.NewReader(c)
	if s := statusLine(t, br); s != "HTTP/1.1 200 Connection established" {
		t.Fatalf("status %q", s)
	}
	br.ReadString('\n') // blank line
	if got, _ := br.ReadString('\n'); got != "hello early\n" {
		t.Errorf("bytes sent with the CONNECT were not relayed: %q", got)
	}
	c.Close()
	tp.Close()
	if len(tp.recs) != 1 || !tp.recs[0].Allowed || tp.recs[0].Addr != fmt.Sprintf("127.0.0.1:%d", port) || tp.recs[0].Up != 6 || tp.recs[0].Down != 12 {
		t.Errorf("records = %+v", tp.recs)
	}
}

func TestProxyDenyCarriesReason(t *testing.T) {
	tp := startProxy(t, 8)
	c := tp.dial(t)
	io.WriteString(c, "CONNECT denied.test:443 HTTP/1.1\r\n\r\n")
	if s := statusLine(t, bufio.NewReader(c)); s != "HTTP/1.1 403 Forbidden: not on my watch" {
		t.Errorf("status %q", s)
	}
}

func TestProxyDenyListRefusesLoopbackAndMetadata(t *testing.T) {
	port := echoServer(t)
	tp := startProxy(t, 8)
	for host, want := range map[string]string{"loop.test": "127.0.0.1 is loopback", "meta.test": "169.254.169.254 is link-local", "127.0.0.2": "127.0.0.2 is loopback"} {
		c := tp.dial(t)
		fmt.Fprintf(c, "CONNECT %s:%d HTTP/1.1\r\n\r\n", host, port)
		if s := statusLine(t, bufio.NewReader(c)); !strings.HasPrefix(s, "HTTP/1.1 403") || !strings.Contains(s, want) {
			t.Errorf("%s: status %q, want 403 saying %q", host, s, want)
		}
	}
	// An explicit ip: entry (Exempt in the verdict) reaches loopback.
	c := tp.dial(t)
	fmt.Fprintf(c, "CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n", port)
	if s := statusLine(t, bufio.NewReader(c)); s != "HTTP/1.1 200 Connection established" {
		t.Errorf("ip: entry: status %q", s)
	}
}

func TestProxyAbsoluteHTTP(t *testing.T) {
	port := echoServer(t)
	tp := startProxy(t, 8)
	c := tp.dial(t)
	fmt.Fprintf(c, "GET http://allowed.test:%d/x?y=1 HTTP/1.1\r\nHost: allowed.test:%d\r\nProxy-Connection: keep-alive\r\n\r\n", port, port)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(b) != fmt.Sprintf("path /x host allowed.test:%d proxyhdr ", port) {
		t.Errorf("%d %q", resp.StatusCode, b)
	}
	c2 := tp.dial(t)
	io.WriteString(c2, "GET https://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
	if s := statusLine(t, bufio.NewReader(c2)); !strings.HasPrefix(s, "HTTP/1.1 400") {
		t.Errorf("an https:// URL in absolute form: %q", s)
	}
}

func socksConnect(t *testing.T, c net.Conn, host string, port uint16) byte {
	t.Helper()
	c.Write([]byte{5, 1, 0})
	var g [2]byte
	if _, err := io.ReadFull(c, g[:]); err != nil || g != [2]byte{5, 0} {
		t.Fatalf("greeting: %v %v", g, err)
	}
	req := []byte{5, 1, 0, 3, byte(len(host))}
	req = append(req, host...)
	req = binary.BigEndian.AppendUint16(req, port)
	c.Write(req)
	var rep [10]byte
	if _, err := io.ReadFull(c, rep[:]); err != nil {
		t.Fatalf("reply: %v", err)
	}
	return rep[1]
}

func TestProxySocks5RemoteName(t *testing.T) {
	port := echoServer(t)
	tp := startProxy(t, 8)
	c := tp.dial(t)
	if code := socksConnect(t, c, "allowed.test", port); code != 0 {
		t.Fatalf("reply code %d", code)
	}
	io.WriteString(c, "socks\n")
	if got, _ := bufio.NewReader(c).ReadString('\n'); got != "hello socks\n" {
		t.Errorf("got %q", got)
	}
	if code := socksConnect(t, tp.dial(t), "denied.test", port); code != socksNotAllowed {
		t.Errorf("denied: reply code %d, want %d", code, socksNotAllowed)
	}
	if code := socksConnect(t, tp.dial(t), "meta.test", port); code != socksNotAllowed {
		t.Errorf("metadata: reply code %d, want %d", code, socksNotAllowed)
	}
}

func TestProxyConnectionLimit(t *testing.T) {
	port := echoServer(t)
	tp := startProxy(t, 3)
	for i := 0; i < 3; i++ {
		c := tp.dial(t)
		if code := socksConnect(t, c, "allowed.test", port); code != 0 {
			t.Fatalf("connection %d: code %d", i, code)
		}
	}
	c := tp.dial(t)
	fmt.Fprintf(c, "CONNECT allowed.test:%d HTTP/1.1\r\n\r\n", port)
	if s := statusLine(t, bufio.NewReader(c)); !strings.HasPrefix(s, "HTTP/1.1 503") || !strings.Contains(s, "connection limit") {
		t.Errorf("past the limit: %q", s)
	}
}

func TestReasonPhraseIsOneSafeLine(t *testing.T) {
	got := ReasonPhrase("no\r\nSet-Cookie: x\x1b[31m" + strings.Repeat("a", 300))
	if strings.ContainsAny(got, "\r\n\x1b") || len(got) > 210 {
		t.Errorf("%q", got)
	}
}

// A tunnel with no byte either way for the idle timeout is closed, and
// its record says how much went through.
func TestProxyIdleTimeout(t *testing.T) {
	port := echoServer(t)
	tp := startProxyIdle(t, 8, 300*time.Millisecond)
	c := tp.dial(t)
	fmt.Fprintf(c, "CONNECT allowed.test:%d HTTP/1.1\r\n\r\n", port)
	br := bufio.NewReader(c)
	statusLine(t, br)
	br.ReadString('\n')
	io.WriteString(c, "xyzw\n") // the echo server peeks 4 bytes first
	if got, _ := br.ReadString('\n'); got != "hello xyzw\n" {
		t.Fatalf("echo: %q", got)
	}
	start := time.Now()
	if _, err := br.ReadByte(); err == nil {
		t.Fatal("the idle tunnel sent a byte")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the idle tunnel stayed open %v", d)
	}
	tp.Close()
	if len(tp.recs) != 1 || tp.recs[0].Up != 5 || tp.recs[0].Down != 11 {
		t.Errorf("records %+v", tp.recs)
	}
}

// A client that hangs up while its connection waits for a decision
// abandons the decision: Decide's context ends with ErrHungUp.
func TestProxyHangupAbandonsDecision(t *testing.T) {
	cause := make(chan error, 1)
	p, err := Listen(Config{
		Socket: filepath.Join(t.TempDir(), "egress.sock"),
		Decide: func(ctx context.Context, host string, port uint16) Verdict {
			<-ctx.Done()
			cause <- context.Cause(ctx)
			return Verdict{Reason: "abandoned"}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("unix", filepath.Join(filepath.Dir(p.cfg.Socket), "egress.sock"))
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "CONNECT slow.test:443 HTTP/1.1\r\n\r\n")
	time.Sleep(100 * time.Millisecond)
	c.Close()
	select {
	case err := <-cause:
		if err != ErrHungUp {
			t.Errorf("cause %v, want ErrHungUp", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the decision was not abandoned when the client hung up")
	}
}

// stubbornServer reads what it is sent and never answers or closes: a
// peer that ignores the hook's hang-up.
func stubbornServer(t *testing.T) uint16 {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held []net.Conn
	var mu sync.Mutex
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range held {
			c.Close()
		}
		mu.Unlock()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
			go io.Copy(io.Discard, c)
		}
	}()
	return uint16(ln.Addr().(*net.TCPAddr).Port)
}

// A hook that hangs up gets its slots back although the peer never
// closes its end: otherwise 200 hung-up connections would block every
// new one (503) for the whole 2-minute idle timeout.
func TestProxyHangupFreesSlot(t *testing.T) {
	port := stubbornServer(t)
	tp := startProxy(t, 3) // the default idle timeout, 2 minutes
	for i := 0; i < 3; i++ {
		c := tp.dial(t)
		if code := socksConnect(t, c, "allowed.test", port); code != 0 {
			t.Fatalf("connection %d: code %d", i, code)
		}
		io.WriteString(c, "bye\n")
		c.Close()
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		c := tp.dial(t)
		fmt.Fprintf(c, "CONNECT allowed.test:%d HTTP/1.1\r\n\r\n", port)
		s := statusLine(t, bufio.NewReader(c))
		c.Close()
		if strings.HasPrefix(s, "HTTP/1.1 200") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("30 s after 3 hang-ups the slots are still taken: %q", s)
		}
		time.Sleep(250 * time.Millisecond)
	}
	tp.mu.Lock()
	defer tp.mu.Unlock()
	if len(tp.recs) < 3 {
		t.Errorf("records of the closed tunnels: %+v", tp.recs)
	}
}

// A peer that answers after the hook's half-close still gets its answer
// through: the linger counts from the last byte, not from the close.
func TestProxyHalfCloseStillDrains(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(io.Discard, c) // until the hook's half-close
		for i := 0; i < 3; i++ {
			time.Sleep(time.Second)
			io.WriteString(c, "late\n")
		}
	}()
	tp := startProxy(t, 3)
	c := tp.dial(t)
	if code := socksConnect(t, c, "allowed.test", uint16(ln.Addr().(*net.TCPAddr).Port)); code != 0 {
		t.Fatalf("code %d", code)
	}
	io.WriteString(c, "question\n")
	c.(*net.UnixConn).CloseWrite()
	got, _ := io.ReadAll(c)
	if string(got) != "late\nlate\nlate\n" {
		t.Errorf("after the half-close: %q", got)
	}
}
