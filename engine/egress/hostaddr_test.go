package egress

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A listed name that resolves to this host's own public address would
// reach anything listening on 0.0.0.0 (sshd, `serve --ssh`, published
// container ports), and be receipted "allowed by rule". The test runs
// itself in a network namespace of its own (unshare -rn) with public-
// looking addresses on lo (TEST-NET-2 and -3, on no range of the deny
// list) and a listener on 0.0.0.0: the proxy refuses the host's address
// for a name, sees an address added a moment ago, and lets an explicit
// ip: entry (an operator naming that very address) through.
func TestProxyRefusesThisHostsOwnAddresses(t *testing.T) {
	if os.Getenv("WARDEN_TEST_IN_NETNS") != "1" {
		if _, err := exec.LookPath("ip"); err != nil {
			needOrSkip(t, "no ip (iproute2) to give the namespace its addresses")
		}
		cmd := exec.Command("unshare", "-rn", os.Args[0], "-test.run=^TestProxyRefusesThisHostsOwnAddresses$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), "WARDEN_TEST_IN_NETNS=1")
		out, err := cmd.CombinedOutput()
		if strings.Contains(string(out), "unshare failed") {
			needOrSkip(t, "cannot make a network namespace here: "+strings.TrimSpace(string(out)))
		}
		t.Logf("in a network namespace of its own:\n%s", out)
		if err != nil || !strings.Contains(string(out), "--- PASS") {
			t.Fatalf("the test in its namespace: %v", err)
		}
		return
	}

	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	ip("link", "set", "lo", "up")
	ip("addr", "add", "198.51.100.7/32", "dev", "lo")

	// A service of the host, on every address.
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	reached := make(chan string, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			reached <- c.LocalAddr().String()
			io.WriteString(c, "SSH-2.0-the-host's-own\r\n")
			c.Close()
		}
	}()
	port := uint16(ln.Addr().(*net.TCPAddr).Port)

	socket := filepath.Join(t.TempDir(), "egress.sock")
	p, err := Listen(Config{
		Socket: socket,
		// The policy lists both names (network: true would say the same).
		Decide: func(ctx context.Context, host string, port uint16) Verdict {
			return Verdict{Allow: true, AllowedBy: "rule", Via: "test list", Exempt: host == "198.51.100.7"}
		},
		// A DNS answer the hook's author controls.
		Resolve: func(ctx context.Context, host string) ([]netip.Addr, error) {
			switch host {
			case "listed.example":
				return []netip.Addr{netip.MustParseAddr("198.51.100.7")}, nil
			case "later.example":
				return []netip.Addr{netip.MustParseAddr("203.0.113.9")}, nil
			}
			return nil, fmt.Errorf("no such host")
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	connect := func(host string) string {
		t.Helper()
		c, err := net.Dial("unix", socket)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "CONNECT %s:%d HTTP/1.1\r\n\r\n", host, port)
		line, _ := bufio.NewReader(c).ReadString('\n')
		return strings.TrimSpace(line)
	}

	if s := connect("listed.example"); !strings.HasPrefix(s, "HTTP/1.1 403") || !strings.Contains(s, "198.51.100.7 is an address of this host") {
		t.Errorf("a listed name resolving to this host's address: %q, want 403 naming an address of this host", s)
	}
	// Read afresh: an address added now counts at once.
	if s := connect("later.example"); strings.HasPrefix(s, "HTTP/1.1 200") {
		t.Fatalf("203.0.113.9 reached before it was this host's: %q", s)
	}
	ip("addr", "add", "203.0.113.9/32", "dev", "lo")
	if s := connect("later.example"); !strings.HasPrefix(s, "HTTP/1.1 403") || !strings.Contains(s, "203.0.113.9 is an address of this host") {
		t.Errorf("an address added a moment ago: %q, want 403 naming an address of this host", s)
	}
	select {
	case a := <-reached:
		t.Fatalf("the host's service was reached at %s", a)
	default:
	}
	// An explicit ip: entry names that very address: it passes.
	if s := connect("198.51.100.7"); s != "HTTP/1.1 200 Connection established" {
		t.Errorf("an explicit ip: entry for the host's address: %q", s)
	}
	if a := <-reached; a != fmt.Sprintf("198.51.100.7:%d", port) {
		t.Errorf("reached %s", a)
	}
}

// needOrSkip fails in CI (CI=true) and skips elsewhere, saying why.
func needOrSkip(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal("CI must run this test, but " + why)
	}
	t.Skip(why)
}

// hostAddrs (one netlink dump) finds every address net.InterfaceAddrs
// does on this host.
func TestHostAddrsMatchTheStandardLibrary(t *testing.T) {
	got, err := hostAddrs()
	if err != nil {
		t.Fatal(err)
	}
	std, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	have := map[netip.Addr]bool{}
	for _, a := range got {
		have[a] = true
	}
	for _, a := range std {
		p, err := netip.ParsePrefix(a.String())
		if err != nil {
			continue
		}
		if !have[p.Addr()] {
			t.Errorf("net.InterfaceAddrs has %s, hostAddrs does not (%v)", p.Addr(), got)
		}
	}
	if len(got) == 0 {
		t.Error("no address at all (not even loopback)")
	}
}
