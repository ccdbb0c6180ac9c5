package engine

// Egress by name, with a real jailed hook (this test binary, run as a Go
// hook in the bubblewrap jail) talking through its bridge and the run's
// proxy to real TLS servers on 127.0.0.1. The test names (allowed.test,
// ...) resolve to 127.0.0.1 only through the engine's test-only option,
// which also exempts exactly them from the address deny list.

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wardenhq/warden/engine/perms"
	"github.com/wardenhq/warden/storage"
)

// ---- the hook side ----

func egressClient(ca string) *http.Client {
	pool := x509.NewCertPool()
	b, err := os.ReadFile(ca)
	if err == nil {
		pool.AppendCertsFromPEM(b)
	}
	return &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
		Proxy:           http.ProxyFromEnvironment,
		TLSClientConfig: &tls.Config{RootCAs: pool},
	}}
}

// egressScenario: get URL CA | socks HOST PORT CA | direct PORT |
// udp PORT | many N HOST PORT. Each prints CHECK lines.
func egressScenario(args []string) int {
	arg := func(i int) string {
		if i < len(args) {
			return args[i]
		}
		return ""
	}
	switch arg(0) {
	case "get":
		resp, err := egressClient(arg(2)).Get(arg(1))
		if err != nil {
			say("get error: %v", err)
			return 0
		}
		h := sha256.New()
		n, _ := io.Copy(h, resp.Body)
		resp.Body.Close()
		say("get %d %d %s", resp.StatusCode, n, hex.EncodeToString(h.Sum(nil))[:16])
	case "env":
		for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy", "no_proxy"} {
			v, ok := os.LookupEnv(k)
			say("env %s=%q set=%v", k, v, ok)
		}
	case "socks":
		port, _ := strconv.Atoi(arg(2))
		c, code, err := socksDial(arg(1), uint16(port))
		if err != nil {
			say("socks error: %v (reply %d)", err, code)
			return 0
		}
		pool := x509.NewCertPool()
		b, _ := os.ReadFile(arg(3))
		pool.AppendCertsFromPEM(b)
		tc := tls.Client(c, &tls.Config{RootCAs: pool, ServerName: arg(1)})
		fmt.Fprintf(tc, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", arg(1))
		resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
		if err != nil {
			say("socks error: %v", err)
			return 0
		}
		body, _ := io.ReadAll(resp.Body)
		say("socks %d %s", resp.StatusCode, body)
	case "direct":
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+arg(1), 5*time.Second)
		if err == nil {
			c.Close()
			say("direct ok")
		} else {
			say("direct blocked: %s", errnoName(err))
		}
	case "udp":
		c, err := net.Dial("udp", "127.0.0.1:"+arg(1))
		if err == nil {
			_, err = c.Write([]byte("udp-canary"))
			c.Close()
		}
		say("udp-loopback sent=%v", err == nil)
		// A documentation address: there is no route to it in the jail.
		c, err = net.Dial("udp", "203.0.113.1:9")
		if err == nil {
			_, err = c.Write([]byte("udp-canary"))
			c.Close()
		}
		if err != nil {
			say("udp-world blocked: %s", errnoName(err))
		} else {
			say("udp-world ok")
		}
	case "bench-dl": // URL CA: download, say bytes and milliseconds
		start := time.Now()
		resp, err := egressClient(arg(2)).Get(arg(1))
		if err != nil {
			say("dl error: %v", err)
			return 0
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		say("dl %d %d", n, time.Since(start).Microseconds())
	case "bench-setup": // N HOST PORT proxy|direct: N connections one after another
		// Each connection is timed from the dial to its proof (the first
		// pong through it); the line lists every sample in microseconds.
		n, _ := strconv.Atoi(arg(1))
		target := net.JoinHostPort(arg(2), arg(3))
		samples := make([]string, 0, n)
		for i := 0; i < n; i++ {
			var c net.Conn
			var status string
			start := time.Now()
			if arg(4) == "direct" {
				var err error
				if c, err = net.Dial("tcp", target); err == nil {
					io.WriteString(c, "ping\n")
					line, err := bufio.NewReader(c).ReadString('\n')
					if err != nil || line != "pong\n" {
						c.Close()
						c, status = nil, fmt.Sprint("no pong ", err)
					}
				} else {
					status = err.Error()
				}
			} else {
				c, status = connectTunnel(target)
			}
			took := time.Since(start)
			if c == nil {
				say("setup error: %s", status)
				return 0
			}
			c.Close()
			samples = append(samples, strconv.FormatInt(took.Microseconds(), 10))
		}
		say("setup %d %s", n, strings.Join(samples, " "))
	case "hangup": // HOST PORT: ask, give up after a second
		pu, _ := url.Parse(os.Getenv("HTTPS_PROXY"))
		c, err := net.Dial("tcp", pu.Host)
		if err != nil {
			say("hangup error: %v", err)
			return 0
		}
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\n\r\n", net.JoinHostPort(arg(1), arg(2)))
		time.Sleep(time.Second)
		c.Close()
		say("hangup closed")
		time.Sleep(time.Minute) // the test cancels the run once the close has closed the request
	case "tunnel":
		_, status := connectTunnel(net.JoinHostPort(arg(1), arg(2)))
		say("tunnel %s", status)
	case "names":
		// Name after name the policy does not list, one at a time.
		n, _ := strconv.Atoi(arg(1))
		refused := 0
		for i := range n {
			if c, st := connectTunnel(fmt.Sprintf("n%d.example:443", i)); c != nil {
				c.Close()
			} else if strings.HasPrefix(st, "403") {
				refused++
			}
		}
		say("names refused=%d", refused)
	case "many":
		n, _ := strconv.Atoi(arg(1))
		target := net.JoinHostPort(arg(2), arg(3))
		var mu sync.Mutex
		var wg sync.WaitGroup
		ok, statuses := 0, map[string]int{}
		conns := make([]net.Conn, 0, n)
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, status := connectTunnel(target)
				mu.Lock()
				defer mu.Unlock()
				statuses[status]++
				if c != nil {
					ok++
					conns = append(conns, c)
				}
			}()
		}
		wg.Wait()
		say("many open=%d statuses=%v", ok, statuses)
		// All n are held open: one more is past the limit.
		_, status := connectTunnel(target)
		say("many extra %s", status)
		for _, c := range conns {
			c.Close()
		}
	default:
		say("unknown egress scenario %q", arg(0))
		return 2
	}
	return 0
}

// connectTunnel opens a CONNECT tunnel through HTTPS_PROXY and proves it
// with a TLS-free byte exchange (the server answers a line "pong").
func connectTunnel(target string) (net.Conn, string) {
	pu, err := url.Parse(os.Getenv("HTTPS_PROXY"))
	if err != nil {
		return nil, "bad proxy: " + err.Error()
	}
	c, err := net.DialTimeout("tcp", pu.Host, 10*time.Second)
	if err != nil {
		return nil, "dial: " + err.Error()
	}
	c.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		c.Close()
		return nil, "read: " + err.Error()
	}
	if resp.StatusCode != 200 {
		c.Close()
		return nil, resp.Status
	}
	io.WriteString(c, "ping\n")
	line, err := br.ReadString('\n')
	if err != nil || line != "pong\n" {
		c.Close()
		return nil, fmt.Sprintf("no pong (%q, %v)", line, err)
	}
	c.SetDeadline(time.Time{})
	return c, "200"
}

func socksDial(host string, port uint16) (net.Conn, byte, error) {
	pu, err := url.Parse(os.Getenv("ALL_PROXY"))
	if err != nil || pu.Scheme != "socks5h" {
		return nil, 0, fmt.Errorf("ALL_PROXY=%q", os.Getenv("ALL_PROXY"))
	}
	c, err := net.DialTimeout("tcp", pu.Host, 10*time.Second)
	if err != nil {
		return nil, 0, err
	}
	c.Write([]byte{5, 1, 0})
	var g [2]byte
	if _, err := io.ReadFull(c, g[:]); err != nil {
		return nil, 0, err
	}
	req := append([]byte{5, 1, 0, 3, byte(len(host))}, host...)
	req = binary.BigEndian.AppendUint16(req, port)
	c.Write(req)
	var rep [10]byte
	if _, err := io.ReadFull(c, rep[:]); err != nil {
		return nil, 0, err
	}
	if rep[1] != 0 {
		c.Close()
		return nil, rep[1], errors.New("refused")
	}
	return c, 0, nil
}

// ---- the test side ----

// egressNames are the names the test servers answer for.
var egressNames = []string{"allowed.test", "other.test", "always.test", "denied.test", "expire.test", "socks.test", "bulk.test"}

type tlsWorld struct {
	caPEM []byte
	port  int // the HTTPS server
	plain int // the same handler over plain HTTP
	pong  int // a plain server answering "ping" with "pong"
}

// newTLSWorld starts an HTTPS server on 127.0.0.1 whose certificate names
// every egress test name, signed by a fresh CA; "/" says hello to the
// Host, "/bulk?n=N" sends N bytes.
func newTLSWorld(t testing.TB) *tlsWorld {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "warden egress test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "allowed.test"}, DNSNames: append([]string{"localhost"}, egressNames...),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte(i * 7)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/bulk" {
			n, _ := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
			w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
			for n > 0 {
				k := min(n, int64(len(chunk)))
				if _, err := w.Write(chunk[:k]); err != nil {
					return
				}
				n -= k
			}
			return
		}
		fmt.Fprintf(w, "hello %s", strings.Split(r.Host, ":")[0])
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	pln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	plain := &http.Server{Handler: srv.Handler}
	go plain.Serve(pln)
	t.Cleanup(func() { plain.Close() })

	pong, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pong.Close() })
	go func() {
		for {
			c, err := pong.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					if _, err := br.ReadString('\n'); err != nil {
						return
					}
					io.WriteString(c, "pong\n")
				}
			}()
		}
	}()
	return &tlsWorld{caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		port: ln.Addr().(*net.TCPAddr).Port, plain: pln.Addr().(*net.TCPAddr).Port, pong: pong.Addr().(*net.TCPAddr).Port}
}

// egressEngine opens an engine whose proxy resolves the test names (when
// names) to 127.0.0.1, with a module of egress hooks and the CA at
// /module/ca.pem.
// files are written into the module dir (name, content; 0755) before it
// is added: module add holds each hook's program to existing.
func egressEngine(t testing.TB, w *tlsWorld, names bool, hooks map[string]string, files ...string) *Engine {
	t.Helper()
	opts := Options{DataDir: filepath.Join(t.TempDir(), "data")}
	if names {
		opts.egress.testNames = map[string]bool{}
		for _, n := range egressNames {
			opts.egress.testNames[n] = true
		}
	}
	e, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	dir := testModule(t, hooks)
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), w.caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(files); i += 2 {
		if err := os.WriteFile(filepath.Join(dir, files[i]), []byte(files[i+1]), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.AddModule("local:test", dir); err != nil {
		t.Fatal(err)
	}
	return e
}

// egressHook is a hook in egress mode running the egress scenario.
func egressHook(args ...string) string {
	return escapeYAML("egress", args...) + "    network: [allowed.test:443]\n    timeout: 2m\n"
}

func setNetwork(t *testing.T, e *Engine, list ...string) Policy {
	t.Helper()
	p, _, err := e.Policy("module:testmod")
	if err != nil {
		t.Fatal(err)
	}
	p.NetworkAllow = list
	out, err := e.SetPolicy(testActor, p, p.Revision)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// connectReceipt is a network.connect receipt with its details decoded.
type connectReceipt struct {
	Receipt
	Details map[string]any
}

// connectReceipts are the run's network.connect receipts.
func connectReceipts(t *testing.T, e *Engine, run string) []connectReceipt {
	t.Helper()
	rs, err := e.Receipts(ReceiptFilter{Kind: "network.connect"})
	if err != nil {
		t.Fatal(err)
	}
	var out []connectReceipt
	for _, r := range rs {
		if r.Actor == "run:"+run {
			c := connectReceipt{Receipt: r}
			if err := json.Unmarshal(r.Details, &c.Details); err != nil {
				t.Fatal(err)
			}
			out = append(out, c)
		}
	}
	return out
}

// decideNext waits for the next pending network.connect request and
// decides it with fn; it returns the request.
func decideNext(t *testing.T, e *Engine, fn func(id uint64)) <-chan Request {
	ch := make(chan Request, 1)
	go func() {
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			rs, _ := e.Requests(RequestFilter{})
			for _, r := range rs {
				if r.Operation == "network.connect" && r.Decision == nil {
					fn(r.ID)
					ch <- r
					return
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		close(ch)
	}()
	return ch
}

func runEgress(t *testing.T, e *Engine, hook string) (Outcome, []string) {
	t.Helper()
	return escapeRun(t, e, hook, JailBwrap)
}

func TestEgressAllowedName(t *testing.T) {
	needJail(t)
	w := newTLSWorld(t)
	u := fmt.Sprintf("https://allowed.test:%d/", w.port)
	e := egressEngine(t, w, true, map[string]string{"get": egressHook("get", u, "/module/ca.pem"), "env": egressHook("env"),
		"plain": egressHook("get", fmt.Sprintf("http://allowed.test:%d/", w.plain), "/module/ca.pem")})
	setNetwork(t, e, fmt.Sprintf("allowed.test:%d", w.port), fmt.Sprintf("allowed.test:%d", w.plain))

	o, cs := runEgress(t, e, "get")
	want := sha256.Sum256([]byte("hello allowed.test"))
	wantEscape(t, "bwrap", cs, "get", fmt.Sprintf("get 200 18 %s", hex.EncodeToString(want[:])[:16]))
	rs := connectReceipts(t, e, o.Run.ID)
	if len(rs) != 1 {
		t.Fatalf("%d network.connect receipts, want 1", len(rs))
	}
	d := rs[0].Details
	if d["host"] != "allowed.test" || d["port"] != float64(w.port) || d["address"] != fmt.Sprintf("127.0.0.1:%d", w.port) ||
		d["allowedBy"] != "rule" || d["allowed"] != true || d["bytesUp"].(float64) < 100 || d["bytesDown"].(float64) < 100 || d["protocol"] != "connect" {
		t.Errorf("receipt details = %v", d)
	}
	if _, ok := d["durationMs"]; !ok {
		t.Error("the receipt has no duration")
	}
	text := streamText(t, e, o.Run.ID)
	if strings.Count(text, "egress: reached allowed.test:") != 1 {
		t.Errorf("the stream does not show the destination once:\n%s", text)
	}
	if start := hookStartDetails(t, e, o.Run.ID); start["network"] != "egress" {
		t.Errorf("hook.start network = %v", start["network"])
	}
	if o.Run.Network != "egress" {
		t.Errorf("run record network = %q, want egress", o.Run.Network)
	}

	// An http:// URL goes as an absolute-form request, no CONNECT.
	o, cs = runEgress(t, e, "plain")
	wantEscape(t, "bwrap", cs, "get", fmt.Sprintf("get 200 18 %s", hex.EncodeToString(want[:])[:16]))
	if rs := connectReceipts(t, e, o.Run.ID); len(rs) != 1 || rs[0].Details["protocol"] != "http" || rs[0].Details["allowed"] != true {
		t.Errorf("plain http receipts: %v", rs)
	}

	_, cs = runEgress(t, e, "env")
	for _, want := range []string{`env HTTPS_PROXY="http://127.0.0.1:3128"`, `env https_proxy="http://127.0.0.1:3128"`, `env HTTP_PROXY="http://127.0.0.1:3128"`,
		`env ALL_PROXY="socks5h://127.0.0.1:1080"`, `env all_proxy="socks5h://127.0.0.1:1080"`, `env NO_PROXY="" set=true`, `env no_proxy="" set=true`} {
		if hasCheck(cs, want) == "" {
			t.Errorf("missing %s in %q", want, cs)
		}
	}
}

func TestEgressApproveOnceAsksAgainNextRun(t *testing.T) {
	needJail(t)
	w := newTLSWorld(t)
	u := fmt.Sprintf("https://other.test:%d/", w.port)
	e := egressEngine(t, w, true, map[string]string{"get": egressHook("get", u, "/module/ca.pem")})
	defer e.AttachOperator()()

	for i := 0; i < 2; i++ {
		got := decideNext(t, e, func(id uint64) {
			if _, err := e.Approve(testActor, id, ""); err != nil {
				t.Error(err)
			}
		})
		o, cs := runEgress(t, e, "get")
		req, ok := <-got
		if !ok {
			t.Fatalf("run %d: no request opened", i)
		}
		if !o.OK() || hasCheck(cs, "get 200") == "" {
			all, _ := e.Requests(RequestFilter{All: true})
			for _, r := range all {
				t.Logf("request %d %s %+v claim %+v", r.ID, r.Content, r.Decision, r.Claim)
			}
			t.Logf("stream:\n%s", streamText(t, e, o.Run.ID))
		}
		if req.Requester.Run != o.Run.ID || req.Requester.Hook != "get" || !strings.Contains(string(req.Content), `"host":"other.test"`) {
			t.Errorf("request = %+v %s", req.Requester, req.Content)
		}
		wantEscape(t, "bwrap", cs, "get", "get 200 16 ")
		rs := connectReceipts(t, e, o.Run.ID)
		if len(rs) != 1 || rs[0].Details["allowedBy"] != "approve-once" {
			t.Errorf("run %d receipts: %v", i, rs)
		}
	}
	if p, _, _ := e.Policy("module:testmod"); len(p.NetworkAllow) != 0 {
		t.Errorf("approve-once changed the policy: %v", p.NetworkAllow)
	}
}

func TestEgressApproveAlwaysAddsName(t *testing.T) {
	needJail(t)
	w := newTLSWorld(t)
	u := fmt.Sprintf("https://always.test:%d/", w.port)
	e := egressEngine(t, w, true, map[string]string{"get": egressHook("get", u, "/module/ca.pem")})
	defer e.AttachOperator()()
	before := setNetwork(t, e) // a stored policy, with no names

	got := decideNext(t, e, func(id uint64) {
		if _, _, _, err := e.ApproveAlways(testActor, id, ""); err != nil {
			t.Error(err)
		}
	})
	o, cs := runEgress(t, e, "get")
	if _, ok := <-got; !ok {
		t.Fatal("no request opened")
	}
	wantEscape(t, "bwrap", cs, "get", "get 200 17 ")
	if rs := connectReceipts(t, e, o.Run.ID); len(rs) != 1 || rs[0].Details["allowedBy"] != "approve-always" {
		t.Errorf("receipts: %v", rs)
	}
	p, _, _ := e.Policy("module:testmod")
	if p.Revision != before.Revision+1 || len(p.NetworkAllow) != 1 || p.NetworkAllow[0] != fmt.Sprintf("always.test:%d", w.port) {
		t.Errorf("policy after approve-always: revision %d (was %d), list %v", p.Revision, before.Revision, p.NetworkAllow)
	}

	nreq := func() int {
		rs, _ := e.Requests(RequestFilter{All: true})
		return len(rs)
	}
	n := nreq()
	o, cs = runEgress(t, e, "get")
	wantEscape(t, "bwrap", cs, "get", "get 200 17 ")
	if nreq() != n {
		t.Error("the next run asked again")
	}
	if rs := connectReceipts(t, e, o.Run.ID); len(rs) != 1 || rs[0].Details["allowedBy"] != "rule" {
		t.Errorf("next run receipts: %v", rs)
	}
}

func TestEgressDenyWithReasonAndExpiry(t *testing.T) {
	needJail(t)
	w := newTLSWorld(t)
	e := egressEngine(t, w, true, map[string]string{
		"denied": egressHook("get", fmt.Sprintf("https://denied.test:%d/", w.port), "/module/ca.pem"),
		"expire": egressHook("get", fmt.Sprintf("https://expire.test:%d/", w.port), "/module/ca.pem"),
	})
	defer e.AttachOperator()()

	got := decideNext(t, e, func(id uint64) {
		if _, err := e.Deny(testActor, id, "not from this box"); err != nil {
			t.Error(err)
		}
	})
	o, cs := runEgress(t, e, "denied")
	<-got
	wantEscape(t, "bwrap", cs, "get", "get error:")
	// Go's client shows the status line without its code.
	if c := hasCheck(cs, "get "); !strings.Contains(c, "Forbidden: not from this box") {
		t.Errorf("the hook did not see a 403 carrying the reason: %q", c)
	}
	rs := connectReceipts(t, e, o.Run.ID)
	if len(rs) != 1 || rs[0].Details["allowed"] != false || rs[0].Details["reason"] != "not from this box" {
		t.Errorf("deny receipts: %v", rs)
	}

	e.requestTTL = 300 * time.Millisecond // no run in flight: the next run's requests take it
	o, cs = runEgress(t, e, "expire")
	if c := hasCheck(cs, "get "); !strings.Contains(c, "Forbidden: request") || !strings.Contains(c, "expired without a decision") {
		t.Errorf("expired request: hook saw %q", c)
	}
	if rs := connectReceipts(t, e, o.Run.ID); len(rs) != 1 || !strings.Contains(fmt.Sprint(rs[0].Details["reason"]), "expired") {
		t.Errorf("expiry receipts: %v", rs)
	}
}

// Names the policy allows, but that resolve into the host: refused by
// the deny list. Without the test option a name resolving to loopback
// (localhost, by the host's own resolver) is refused; so is a name
// resolving to the metadata address.
func TestEgressDenyListBeatsPolicy(t *testing.T) {
	needJail(t)
	w := newTLSWorld(t)
	e := egressEngine(t, w, false, map[string]string{
		// Go's client never proxies localhost: a CONNECT by hand.
		"loop": egressHook("tunnel", "localhost", strconv.Itoa(w.pong)),
		"meta": egressHook("get", fmt.Sprintf("https://meta.test:%d/", w.port), "/module/ca.pem"),
		"ip":   egressHook("tunnel", "127.0.0.1", strconv.Itoa(w.pong)),
	})
	old := egressResolve
	egressResolve = func(ctx context.Context, host string) ([]netip.Addr, time.Duration, error) {
		if host == "meta.test" {
			return []netip.Addr{netip.MustParseAddr("169.254.169.254")}, time.Minute, nil
		}
		return old(ctx, host)
	}
	defer func() { egressResolve = old }()
	setNetwork(t, e, fmt.Sprintf("localhost:%d", w.pong), fmt.Sprintf("meta.test:%d", w.port), fmt.Sprintf("ip:127.0.0.1:%d", w.pong))

	_, cs := runEgress(t, e, "loop")
	if c := hasCheck(cs, "tunnel "); !strings.Contains(c, "403 Forbidden") || !strings.Contains(c, "is loopback") {
		t.Errorf("localhost: hook saw %q", c)
	}
	_, cs = runEgress(t, e, "meta")
	if c := hasCheck(cs, "get "); !strings.Contains(c, "Forbidden") || !strings.Contains(c, "169.254.169.254 is link-local") {
		t.Errorf("metadata: hook saw %q", c)
	}
	// The contrast: an explicit ip: entry reaches the very same server.
	_, cs = runEgress(t, e, "ip")
	wantEscape(t, "bwrap", cs, "tunnel", "tunnel 200")
}

// The jail has no route of its own: a direct TCP connect to the host's
// loopback and a UDP send fail, while the same hook unjailed succeeds.
func TestEgressNoDirectRoute(t *testing.T) {
	needJail(t)
	w := newTLSWorld(t)
	uc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer uc.Close()
	uport := strconv.Itoa(uc.LocalAddr().(*net.UDPAddr).Port)
	e := egressEngine(t, w, true, map[string]string{
		"direct": egressHook("direct", strconv.Itoa(w.port)),
		"udp":    egressHook("udp", uport),
	})
	received := func() bool {
		uc.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		buf := make([]byte, 64)
		n, _, err := uc.ReadFrom(buf)
		return err == nil && string(buf[:n]) == "udp-canary"
	}

	_, cs := runEgress(t, e, "direct")
	wantEscape(t, "bwrap", cs, "direct", "direct blocked: ECONNREFUSED")
	_, cs = runEgress(t, e, "udp")
	wantEscape(t, "bwrap", cs, "udp-world", "udp-world blocked: ENETUNREACH")
	if received() {
		t.Error("a UDP datagram from the jailed hook reached the host's loopback")
	}
	_, cs = escapeRun(t, e, "direct", JailOff)
	wantEscape(t, "off", cs, "direct", "direct ok")
	escapeRun(t, e, "udp", JailOff)
	if !received() {
		t.Error("the unjailed contrast: the UDP datagram did not arrive, so the jailed check proves nothing")
	}
}

func TestEgressSocks5RemoteName(t *testing.T) {
	needJail(t)
	w := newTLSWorld(t)
	e := egressEngine(t, w, true, map[string]string{
		"socks":  egressHook("socks", "socks.test", strconv.Itoa(w.port), "/module/ca.pem"),
		"denied": egressHook("socks", "denied.test", strconv.Itoa(w.port), "/module/ca.pem"),
	})
	setNetwork(t, e, fmt.Sprintf("socks.test:%d", w.port))
	o, cs := runEgress(t, e, "socks")
	wantEscape(t, "bwrap", cs, "socks", "socks 200 hello socks.test")
	if rs := connectReceipts(t, e, o.Run.ID); len(rs) != 1 || rs[0].Details["protocol"] != "socks5" || rs[0].Details["host"] != "socks.test" {
		t.Errorf("receipts: %v", rs)
	}
	// No operator attached: denied at once, reply 2 (not allowed by ruleset).
	_, cs = runEgress(t, e, "denied")
	wantEscape(t, "bwrap", cs, "socks", "socks error: refused (reply 2)")
}

func TestEgressConnectionLimit(t *testing.T) {
	needJail(t)
	w := newTLSWorld(t)
	e := egressEngine(t, w, true, map[string]string{"many": egressHook("many", "200", "allowed.test", strconv.Itoa(w.pong))})
	setNetwork(t, e, fmt.Sprintf("allowed.test:%d", w.pong))
	o, cs := runEgress(t, e, "many")
	wantEscape(t, "bwrap", cs, "many", "many open=200 statuses=map[200:200]")
	if c := hasCheck(cs, "many extra"); !strings.Contains(c, "503") || !strings.Contains(c, "connection limit") {
		t.Errorf("one past the limit: %q", c)
	}
	rs := connectReceipts(t, e, o.Run.ID)
	allowed := 0
	for _, r := range rs {
		if r.Details["allowed"] == true {
			allowed++
		}
	}
	if len(rs) != 201 || allowed != 200 {
		t.Errorf("%d receipts, %d allowed; want 201 and 200", len(rs), allowed)
	}
	// The receipts share commits (see receiptDelay), and the run's end
	// flushes them: every one comes before the run's hook.end.
	ends, err := e.Receipts(ReceiptFilter{Kind: "hook.end"})
	if err != nil || len(ends) != 1 {
		t.Fatalf("hook.end receipts: %v %v", ends, err)
	}
	for _, r := range rs {
		if r.Seq > ends[0].Seq {
			t.Fatalf("network.connect receipt %d comes after hook.end %d", r.Seq, ends[0].Seq)
		}
	}
}

// TestEgressAsksAreBounded: a hook trying name after name its policy
// does not list opens at most maxEgressAsks requests (each costs three
// receipts); past that it is refused at once, with no request and no
// receipt, and the run's hook.end counts those refusals.
func TestEgressAsksAreBounded(t *testing.T) {
	needJail(t)
	w := newTLSWorld(t)
	n := maxEgressAsks + 36
	e := egressEngine(t, w, true, map[string]string{"names": egressHook("names", strconv.Itoa(n))})
	o, cs := runEgress(t, e, "names")
	wantEscape(t, "bwrap", cs, "names", fmt.Sprintf("names refused=%d", n))
	if rs := connectReceipts(t, e, o.Run.ID); len(rs) != maxEgressAsks {
		t.Errorf("%d network.connect receipts for %d refused names; want %d", len(rs), n, maxEgressAsks)
	}
	opened, err := e.Receipts(ReceiptFilter{Kind: "request.open"})
	if err != nil {
		t.Fatal(err)
	}
	if len(opened) != maxEgressAsks {
		t.Errorf("%d requests opened; want %d", len(opened), maxEgressAsks)
	}
	ends, err := e.Receipts(ReceiptFilter{Kind: "hook.end"})
	if err != nil || len(ends) != 1 {
		t.Fatalf("hook.end receipts: %v %v", ends, err)
	}
	var det struct {
		Unrecorded int `json:"egressRefusedUnrecorded"`
	}
	if err := json.Unmarshal(ends[0].Details, &det); err != nil || det.Unrecorded != n-maxEgressAsks {
		t.Errorf("hook.end counts %d unrecorded refusals (%v); want %d", det.Unrecorded, err, n-maxEgressAsks)
	}
}

// TestEgressSetupFailureReleasesTheCgroup: a run whose egress proxy cannot
// be handed to the jail fails, and the cgroup its limits made is removed
// with it (the spawner that never ran is released).
func TestEgressSetupFailureReleasesTheCgroup(t *testing.T) {
	needJail(t)
	w := newTLSWorld(t)
	e := egressEngine(t, w, true, map[string]string{"env": egressHook("env")})
	e.opts.egress.failSetup = errors.New("the egress socket could not be handed to the jail (test)")
	if err := e.LimitsReady(); err != nil {
		t.Skipf("no cgroups here, so no cgroup to leak: %v", err)
	}
	o, err := e.RunHook(testActor, RunRequest{Module: "testmod", Hook: "env", Jail: JailBwrap})
	if err != nil {
		t.Fatal(err)
	}
	if o.Run.Status != storage.RunFailed || !strings.Contains(o.Run.Error, "could not be handed") {
		t.Fatalf("run: %s %s", o.Run.Status, o.Run.Error)
	}
	var left []string
	filepath.WalkDir("/sys/fs/cgroup", func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && strings.Contains(d.Name(), o.Run.ID) {
			left = append(left, p)
		}
		return nil
	})
	if len(left) > 0 {
		t.Errorf("the failed run's cgroup is left behind: %v", left)
	}
}

var _ = syscall.ECONNREFUSED
var _ = storage.LevelInfo

// pythonGet is a Python hook: urllib honours HTTPS_PROXY by itself.
const pythonGet = `#!/usr/bin/python3
import ssl, sys, urllib.request, urllib.error
ctx = ssl.create_default_context(cafile="/module/ca.pem")
try:
    with urllib.request.urlopen(sys.argv[1], context=ctx, timeout=60) as r:
        print("CHECK py", r.status, r.read().decode())
except urllib.error.URLError as e:
    print("CHECK py error:", e.reason)
`

func needPython(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("/usr/bin/python3 is missing, and CI must run the urllib egress test (apt-get install python3-minimal): %v", err)
		}
		t.Skipf("/usr/bin/python3 is missing (apt-get install python3-minimal): %v", err)
	}
}

func TestEgressPythonUrllib(t *testing.T) {
	needJail(t)
	needPython(t)
	w := newTLSWorld(t)
	hook := func(u string) string {
		return fmt.Sprintf("    run: [./get.py, %q]\n    network: [allowed.test]\n", u)
	}
	e := egressEngine(t, w, true, map[string]string{
		"ok":     hook(fmt.Sprintf("https://allowed.test:%d/", w.port)),
		"denied": hook(fmt.Sprintf("https://denied.test:%d/", w.port)),
	}, "get.py", pythonGet)
	setNetwork(t, e, fmt.Sprintf("allowed.test:%d", w.port))
	o, cs := runEgress(t, e, "ok")
	wantEscape(t, "bwrap", cs, "py", "py 200 hello allowed.test")
	if rs := connectReceipts(t, e, o.Run.ID); len(rs) != 1 || rs[0].Details["allowed"] != true {
		t.Errorf("receipts: %v", rs)
	}
	// No operator attached: the request is denied at once, and urllib
	// shows the status line with its reason.
	_, cs = runEgress(t, e, "denied")
	if c := hasCheck(cs, "py "); !strings.Contains(c, "403 Forbidden: no operator attached to decide request 1; the policy of module:testmod does not list denied.test:") {
		t.Errorf("denied: urllib saw %q", c)
	}
}

// A hook that gives up on a connection waiting for the operator closes
// its request (the engine denies it, saying so) instead of leaving it
// pending for the next operator to puzzle over.
func TestEgressHangupClosesRequest(t *testing.T) {
	needJail(t)
	w := newTLSWorld(t)
	e := egressEngine(t, w, true, map[string]string{"hangup": egressHook("hangup", "other.test", strconv.Itoa(w.pong))})
	defer e.AttachOperator()()
	h, err := e.StartRun(testActor, RunRequest{Module: "testmod", Hook: "hangup", Jail: JailBwrap})
	if err != nil {
		t.Fatal(err)
	}
	// The hook lives on after its close: only the close can have decided
	// the request (a run's end closes its requests too, for another reason).
	var rs []Request
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if rs, err = e.Requests(RequestFilter{All: true}); err != nil {
			t.Fatal(err)
		}
		if len(rs) == 1 && rs[0].Decision != nil {
			break
		}
		if time.Now().After(deadline) {
			h.Cancel()
			t.Fatalf("the request stayed open after the hook closed its connection: %+v\n%s", rs, streamText(t, e, h.ID))
		}
	}
	h.Cancel()
	o := h.Wait()
	wantEscape(t, "bwrap", checks(t, e, o.Run.ID), "hangup", "hangup closed")
	if rs[0].Decision.Reason != "the hook closed the connection before a decision" {
		t.Fatalf("requests: %+v", rs)
	}
	if c := connectReceipts(t, e, o.Run.ID); len(c) != 1 || c[0].Details["reason"] != "the hook closed the connection before a decision" {
		t.Errorf("receipts: %v", c)
	}
}

// The quick path of a connection's decision reads the policy afresh each
// time: a name removed from the list is refused at the next connection
// (the list's parse is kept, never the policy), and an exact rule still
// allows, read-only, as the whole evaluation would.
func TestEgressQuickCheckFollowsThePolicy(t *testing.T) {
	e := openEngine(t, Options{})
	er := &egressRun{e: e, r: &activeRun{rec: storage.RunRecord{Module: "testmod"}}}
	p := setNetwork(t, e, "api.example.org:443", "*.pkg.example:443")
	if v, ok := er.check("api.example.org", 443); !ok || !v.Allow || v.AllowedBy != "rule" || !strings.Contains(v.Via, "api.example.org:443") {
		t.Fatalf("a listed name: %+v %v", v, ok)
	}
	if v, ok := er.check("cdn.pkg.example", 443); !ok || !v.Allow {
		t.Fatalf("a name under a listed wildcard: %+v %v", v, ok)
	}
	if _, ok := er.check("api.example.org", 80); ok {
		t.Fatal("another port of a listed name was allowed")
	}
	p.NetworkAllow = []string{"*.pkg.example:443"}
	if _, err := e.SetPolicy(testActor, p, p.Revision); err != nil {
		t.Fatal(err)
	}
	if v, ok := er.check("api.example.org", 443); ok {
		t.Fatalf("a name removed from the list still allowed: %+v", v)
	}
	op, err := perms.ConnectOp("module:testmod", "ip.example.net", 8443)
	if err != nil {
		t.Fatal(err)
	}
	p, _, _ = e.Policy("module:testmod")
	p.Rules = append(p.Rules, Rule{Operation: op.Operation, Digest: op.Digest, Summary: "network ip.example.net:8443"})
	if _, err := e.SetPolicy(testActor, p, p.Revision); err != nil {
		t.Fatal(err)
	}
	if v, ok := er.check("ip.example.net", 8443); !ok || !v.Allow || !strings.Contains(v.Via, "rule network.connect") {
		t.Fatalf("an exact rule: %+v %v", v, ok)
	}
}

// A hook asking for an address the deny list refuses for names (here
// cloud metadata, as an IP literal) opens a request that says approving
// it passes the deny list: in the request, and in the run's stream where
// the operator is told a decision is needed.
func TestEgressAskForAnAddressWarns(t *testing.T) {
	needJail(t)
	w := newTLSWorld(t)
	e := egressEngine(t, w, true, map[string]string{"meta": egressHook("get", "http://169.254.169.254:80/latest/meta-data/", "/module/ca.pem")})
	o, cs := runEgress(t, e, "meta")
	req, err := e.Request(1)
	if err != nil || req.Operation != "network.connect" {
		t.Fatalf("request 1 %+v %v, want the one for 169.254.169.254; the hook: %v\n%s", req, err, cs, streamText(t, e, o.Run.ID))
	}
	rs := []Request{req}
	const want = "NOT DECLARED in module.yaml's network list of testmod/meta; approving lets the hook reach ip:169.254.169.254:80 past the address deny list: 169.254.169.254 is link-local (cloud metadata lives at 169.254.169.254)"
	if rs[0].Warning != want {
		t.Errorf("request warning %q, want %q", rs[0].Warning, want)
	}
	if s := streamText(t, e, o.Run.ID); !strings.Contains(s, "needs a decision (`warden perms show 1`); warning: "+want) {
		t.Errorf("the stream does not warn:\n%s", s)
	}
}

// TestEgressMarksUndeclaredHosts: a connection to a host the hook's
// module.yaml does not list opens a request whose warning says so first;
// one it lists (but its policy does not) opens a request with none.
func TestEgressMarksUndeclaredHosts(t *testing.T) {
	needJail(t)
	w := newTLSWorld(t)
	declared := fmt.Sprintf("escape: always.test:%d", w.port)
	hooks := map[string]string{
		"undeclared": egressHook("get", fmt.Sprintf("https://always.test:%d/", w.port), "/module/ca.pem"),
		"declared": escapeYAML("egress", "get", fmt.Sprintf("https://always.test:%d/", w.port), "/module/ca.pem") +
			fmt.Sprintf("    network: [always.test:%d]\n    timeout: 2m\n", w.port),
	}
	e := egressEngine(t, w, true, hooks)
	defer e.AttachOperator()()
	for _, tc := range []struct{ hook, want string }{{"undeclared", "NOT DECLARED in module.yaml's network list of testmod/undeclared"}, {"declared", ""}} {
		var warning string
		got := decideNext(t, e, func(id uint64) {
			r, _ := e.Request(id)
			warning = r.Warning
			e.Deny(testActor, id, "test")
		})
		runEgress(t, e, tc.hook)
		if _, ok := <-got; !ok {
			t.Fatalf("%s: no request opened", tc.hook)
		}
		if warning != tc.want {
			t.Errorf("%s: request warning %q, want %q (%s)", tc.hook, warning, tc.want, declared)
		}
	}
}
