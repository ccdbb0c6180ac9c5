package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// fakeLookup counts questions and answers with addr for ttl.
type fakeLookup struct {
	mu    sync.Mutex
	asked map[string]int
	addr  netip.Addr
	ttl   time.Duration
	err   error
}

func (f *fakeLookup) lookup(ctx context.Context, host string) ([]netip.Addr, time.Duration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.asked == nil {
		f.asked = map[string]int{}
	}
	f.asked[host]++
	if f.err != nil {
		return nil, 0, f.err
	}
	return []netip.Addr{f.addr}, f.ttl, nil
}

func (f *fakeLookup) count(host string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.asked[host]
}

func TestCacheKeepsAnAnswerForItsTTL(t *testing.T) {
	f := &fakeLookup{addr: netip.MustParseAddr("203.0.113.7"), ttl: 30 * time.Second}
	c := NewCache(f.lookup)
	now := time.Unix(1000, 0)
	c.now = func() time.Time { return now }
	for range 3 {
		if got, err := c.Resolve(context.Background(), "api.example"); err != nil || len(got) != 1 || got[0] != f.addr {
			t.Fatalf("resolve: %v %v", got, err)
		}
	}
	if f.asked["api.example"] != 1 {
		t.Fatalf("asked %d times within the TTL, want 1", f.asked["api.example"])
	}
	now = now.Add(31 * time.Second)
	c.Resolve(context.Background(), "api.example")
	if f.asked["api.example"] != 2 {
		t.Fatalf("asked %d times after the TTL, want 2", f.asked["api.example"])
	}
	// A TTL past MaxCacheTTL is cut to it.
	f.ttl = 24 * time.Hour
	c.Resolve(context.Background(), "long.example")
	now = now.Add(MaxCacheTTL + time.Second)
	c.Resolve(context.Background(), "long.example")
	if f.asked["long.example"] != 2 {
		t.Errorf("a day's TTL was kept past MaxCacheTTL (%d questions)", f.asked["long.example"])
	}
}

func TestCacheKeepsNoUntimedAnswerAndNoFailure(t *testing.T) {
	f := &fakeLookup{addr: netip.MustParseAddr("203.0.113.7")} // TTL 0: /etc/hosts, TCP
	c := NewCache(f.lookup)
	c.Resolve(context.Background(), "hosts.example")
	c.Resolve(context.Background(), "hosts.example")
	f.err, f.ttl = errors.New("SERVFAIL"), time.Minute
	c.Resolve(context.Background(), "bad.example")
	if _, err := c.Resolve(context.Background(), "bad.example"); err == nil {
		t.Error("a failure was answered from the cache")
	}
	if f.asked["hosts.example"] != 2 || f.asked["bad.example"] != 2 {
		t.Errorf("questions = %v; want each asked twice", f.asked)
	}
}

// A cached address is judged by the deny list at every connection, like
// a fresh one: the cache saves a question, never a check.
func TestCachedAddressStillMeetsTheDenyList(t *testing.T) {
	f := &fakeLookup{addr: netip.MustParseAddr("169.254.169.254"), ttl: time.Minute}
	cache := NewCache(f.lookup)
	sock := t.TempDir() + "/egress.sock"
	p, err := Listen(Config{
		Socket:  sock,
		Decide:  func(ctx context.Context, host string, port uint16) Verdict { return Verdict{Allow: true} },
		Resolve: cache.Resolve,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := range 2 {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "CONNECT meta.example:80 HTTP/1.1\r\n\r\n")
		line, _ := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if want := "HTTP/1.1 403 Forbidden: meta.example resolves only to refused addresses (169.254.169.254 is link-local"; len(line) < len(want) || line[:len(want)] != want {
			t.Errorf("connection %d: %q", i, line)
		}
	}
	if n := f.count("meta.example"); n != 1 {
		t.Errorf("asked %d times; want 1 (the second answer from the cache)", n)
	}
}

// dnsServerOn answers every A question with 203.0.113.9 for ttl seconds
// and every AAAA question with nothing, on a real UDP socket.
func dnsServerOn(t *testing.T, ttl uint32) (addr string, questions func() int) {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	var mu sync.Mutex
	n := 0
	go func() {
		buf := make([]byte, 1500)
		for {
			k, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var m dnsmessage.Message
			if m.Unpack(buf[:k]) != nil || len(m.Questions) != 1 {
				continue
			}
			mu.Lock()
			n++
			mu.Unlock()
			q := m.Questions[0]
			b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: m.Header.ID, Response: true, Authoritative: true, RecursionAvailable: m.Header.RecursionDesired})
			b.StartQuestions()
			b.Question(q)
			b.StartAnswers()
			if q.Type == dnsmessage.TypeA {
				b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: ttl}, dnsmessage.AResource{A: [4]byte{203, 0, 113, 9}})
			}
			out, err := b.Finish()
			if err == nil {
				pc.WriteTo(out, from)
			}
		}
	}()
	return pc.LocalAddr().String(), func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// LookupTTL reads the TTL from a real DNS exchange with Go's resolver.
func TestLookupTTLReadsTheAnswer(t *testing.T) {
	addr, questions := dnsServerOn(t, 42)
	old := dnsServer
	dnsServer = func(string) string { return addr }
	defer func() { dnsServer = old }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, ttl, err := LookupTTL(ctx, "api.warden-test.example.")
	if err != nil || len(got) != 1 || got[0] != netip.MustParseAddr("203.0.113.9") {
		t.Fatalf("lookup: %v %v", got, err)
	}
	if ttl != 42*time.Second {
		t.Errorf("ttl %v, want 42s", ttl)
	}
	c := NewCache(nil)
	for range 3 {
		if _, err := c.Resolve(ctx, "api.warden-test.example."); err != nil {
			t.Fatal(err)
		}
	}
	if q := questions(); q != 4 { // A and AAAA for the first lookup, and once more for the cache's one
		t.Errorf("%d questions reached the server; want 4", q)
	}
}
