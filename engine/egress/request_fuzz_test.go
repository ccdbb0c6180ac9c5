package egress

import (
	"bufio"
	"bytes"
	"io"
	"math"
	"net"
	"strings"
	"testing"
	"time"
)

// FuzzReadRequest: whatever a hook sends first, the proxy either reads a
// request whose host is a canonical name or an address and whose port is
// not 0, or refuses; it never panics and never reads past the header
// limit.
func FuzzReadRequest(f *testing.F) {
	for _, s := range []string{
		"CONNECT api.github.com:443 HTTP/1.1\r\nHost: api.github.com\r\n\r\n",
		"GET http://pypi.org/simple/ HTTP/1.1\r\nHost: pypi.org\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"CONNECT [::1]:443 HTTP/1.1\r\n\r\n",
		"\x05\x01\x00\x05\x01\x00\x03\x0bexample.com\x01\xbb",
		"\x05\x01\x00\x05\x01\x00\x01\x7f\x00\x00\x01\x00\x50",
		"\x05\x01\x00\x05\x02\x00\x03\x01a\x00\x01",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		client, server := net.Pipe()
		defer client.Close()
		defer server.Close()
		go func() {
			client.Write(data)
			client.Close()
		}()
		go io.Copy(io.Discard, client) // answers the proxy writes
		server.SetDeadline(time.Now().Add(5 * time.Second))
		lr := &io.LimitedReader{R: server, N: maxHeaderBytes}
		br := bufio.NewReaderSize(lr, 16<<10)
		req, _ := readRequest(br, server)
		lr.N = math.MaxInt64
		if req == nil {
			return
		}
		if req.port == 0 || req.host == "" {
			t.Fatalf("request %+v from %q", req, data)
		}
		if !IsAddr(req.host) {
			if c, err := CanonicalName(req.host); err != nil || c != req.host {
				t.Fatalf("host %q is not canonical (%v) from %q", req.host, err, data)
			}
		}
		if strings.ContainsAny(req.host, "\r\n ") || bytes.Contains([]byte(req.proto), []byte{0}) {
			t.Fatalf("bad request %+v", req)
		}
	})
}
