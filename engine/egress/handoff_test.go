package egress

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// listeners opens two loopback listeners, as the bridge does in the jail.
func listeners(t *testing.T) []*net.TCPListener {
	t.Helper()
	var lns []*net.TCPListener
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		lns = append(lns, ln.(*net.TCPListener))
	}
	return lns
}

// sendRaw sends one message with descriptors and returns the answer.
func sendRaw(t *testing.T, socket string, b []byte, fds ...int) string {
	t.Helper()
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, _, err := c.WriteMsgUnix(b, syscall.UnixRights(fds...), nil); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(c).ReadString('\n')
	return line
}

// A handed-over listener is served like the proxy socket: the same
// decision, the same relay, the same record; a connection to the bridge's
// address reaches the proxy with no process copying in between.
func TestHandOverServesTheListeners(t *testing.T) {
	port := echoServer(t)
	tp := startProxy(t, 8)
	lns := listeners(t)
	if err := HandOver(tp.socket, lns...); err != nil {
		t.Fatal(err)
	}
	addr := lns[0].Addr().String()
	for _, l := range lns { // the bridge's copies go with its exec
		l.Close()
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "CONNECT allowed.test:%d HTTP/1.1\r\n\r\nvia listener\n", port)
	br := bufio.NewReader(c)
	if s := statusLine(t, br); s != "HTTP/1.1 200 Connection established" {
		t.Fatalf("status %q", s)
	}
	br.ReadString('\n')
	if got, _ := br.ReadString('\n'); got != "hello via listener\n" {
		t.Fatalf("relayed %q", got)
	}
	c2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c2.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c2, "CONNECT denied.test:443 HTTP/1.1\r\n\r\n")
	if s := statusLine(t, bufio.NewReader(c2)); s != "HTTP/1.1 403 Forbidden: not on my watch" {
		t.Errorf("denied through a handed-over listener: %q", s)
	}
	c2.Close()
	c.Close()
	tp.Close()
	byHost := map[string]Record{}
	for _, r := range tp.recs {
		byHost[r.Host] = r
	}
	if len(tp.recs) != 2 || !byHost["allowed.test"].Allowed || byHost["allowed.test"].Up != 13 ||
		byHost["denied.test"].Allowed || byHost["denied.test"].Reason != "not on my watch" {
		t.Errorf("records = %+v", tp.recs)
	}
	// Closing the proxy closes the adopted listeners: nothing accepts.
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Error("the adopted listener still accepts after the proxy closed")
	}
}

// Only the first handoff of a run is taken (the bridge's, made before the
// hook runs); a hook handing over its own later is refused.
func TestHandOverOnlyOnce(t *testing.T) {
	tp := startProxy(t, 8)
	if err := HandOver(tp.socket, listeners(t)...); err != nil {
		t.Fatal(err)
	}
	err := HandOver(tp.socket, listeners(t)...)
	if err == nil || !strings.Contains(err.Error(), "already handed over") {
		t.Fatalf("second handoff: %v", err)
	}
}

// Descriptors that are not listening TCP sockets, the wrong count, or
// descriptors on an ordinary request are refused, and nothing is adopted.
func TestHandOverRefusesOtherDescriptors(t *testing.T) {
	tp := startProxy(t, 8)
	lns := listeners(t)
	lf, _ := lns[0].File()
	defer lf.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	conn, err := net.Dial("tcp", lns[1].Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cf, _ := conn.(*net.TCPConn).File()
	defer cf.Close()
	lfd, pfd, cfd := int(lf.Fd()), int(pr.Fd()), int(cf.Fd())
	for _, tc := range []struct {
		name string
		b    []byte
		fds  []int
		want string
	}{
		{"a pipe", []byte{handoffByte}, []int{lfd, pfd}, "not a stream socket"},
		{"a connected socket", []byte{handoffByte}, []int{lfd, cfd}, "not listening"},
		{"one listener", []byte{handoffByte}, []int{lfd}, "carries 2 listeners"},
		{"descriptors on a request", []byte("CONNECT allowed.test:1 HTTP/1.1\r\n\r\n"), []int{lfd, lfd}, "one byte"},
	} {
		if got := sendRaw(t, tp.socket, tc.b, tc.fds...); !strings.Contains(got, tc.want) {
			t.Errorf("%s: answer %q, want %q", tc.name, got, tc.want)
		}
	}
	// None of those counted as the run's handoff.
	if err := HandOver(tp.socket, listeners(t)...); err != nil {
		t.Errorf("the bridge's handoff after refused ones: %v", err)
	}
}
