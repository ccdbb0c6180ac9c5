package egress

// A run's name cache. The engine resolves every name a hook connects to;
// a hook opening connection after connection to one name would otherwise
// send the host's resolver a query (a network round trip) for each. The
// cache keeps each answer for the TTL its DNS records carry.
//
// Invariants:
//   - An answer is kept for the smallest TTL among its records, at most
//     MaxCacheTTL, and only when that TTL was seen: an answer from
//     /etc/hosts, or over TCP, is not kept. Failures are not kept.
//   - The cache holds addresses only. Every connection still goes through
//     the policy's decision first and the address deny list after the
//     cache: a cached address is judged like a fresh one.
//   - At most maxCacheNames names per run (a cache full of live answers
//     simply stops adding).

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// MaxCacheTTL bounds how long an answer is kept, whatever its TTL.
const MaxCacheTTL = 5 * time.Minute

const maxCacheNames = 1024

// LookupFunc resolves a name, saying for how long the answer may be
// kept (0: not at all).
type LookupFunc func(ctx context.Context, host string) ([]netip.Addr, time.Duration, error)

// Cache is one run's name cache in front of a LookupFunc.
type Cache struct {
	lookup LookupFunc
	now    func() time.Time

	mu    sync.Mutex
	names map[string]cached
}

type cached struct {
	addrs   []netip.Addr
	expires time.Time
}

// NewCache caches lookup's answers (nil: the host's DNS, see LookupTTL).
func NewCache(lookup LookupFunc) *Cache {
	if lookup == nil {
		lookup = LookupTTL
	}
	return &Cache{lookup: lookup, now: time.Now, names: map[string]cached{}}
}

// Resolve answers from the cache while the answer lives, else asks.
func (c *Cache) Resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	now := c.now()
	c.mu.Lock()
	e, ok := c.names[host]
	c.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.addrs, nil
	}
	addrs, ttl, err := c.lookup(ctx, host)
	if err != nil || len(addrs) == 0 || ttl <= 0 {
		return addrs, err
	}
	ttl = min(ttl, MaxCacheTTL)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.names) >= maxCacheNames {
		for h, e := range c.names {
			if !now.Before(e.expires) {
				delete(c.names, h)
			}
		}
	}
	if len(c.names) < maxCacheNames || ok {
		c.names[host] = cached{addrs: addrs, expires: now.Add(ttl)}
	}
	return addrs, nil
}

// LookupTTL resolves host with Go's resolver (the host's resolv.conf and
// /etc/hosts) and reads the TTLs of the DNS answers it received on the
// way: the smallest of them, or 0 when no DNS answer over UDP was seen.
// A name Go's resolver cannot answer goes to the system's (NSS) with TTL
// 0, so it is resolved as it always was, and never cached.
func LookupTTL(ctx context.Context, host string) ([]netip.Addr, time.Duration, error) {
	var t ttlWatch
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, network, dnsServer(address))
		if err != nil {
			return nil, err
		}
		if pc, ok := c.(*net.UDPConn); ok {
			return &ttlConn{UDPConn: pc, w: &t}, nil
		}
		t.untrusted() // a TCP answer is not parsed: not kept
		return c, nil
	}}
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil && ctx.Err() == nil {
		// A name only the host's NSS knows (mDNS, LDAP, NIS): ask the
		// system's resolver, and cache nothing (its answer has no TTL).
		if sys, serr := net.DefaultResolver.LookupNetIP(ctx, "ip", host); serr == nil {
			return sys, 0, nil
		}
	}
	return addrs, t.ttl(), err
}

// dnsServer is where a resolver's query goes: resolv.conf's server
// (tests point it at their own DNS server).
var dnsServer = func(addr string) string { return addr }

// ttlWatch gathers the smallest TTL of the answers a lookup received.
type ttlWatch struct {
	mu   sync.Mutex
	seen bool
	bad  bool
	min  uint32
}

func (t *ttlWatch) untrusted() {
	t.mu.Lock()
	t.bad = true
	t.mu.Unlock()
}

func (t *ttlWatch) answer(msg []byte) {
	var p dnsmessage.Parser
	if _, err := p.Start(msg); err != nil {
		return
	}
	if err := p.SkipAllQuestions(); err != nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for {
		h, err := p.AnswerHeader()
		if err != nil {
			if err != dnsmessage.ErrSectionDone {
				t.bad = true
			}
			return
		}
		if !t.seen || h.TTL < t.min {
			t.min = h.TTL
		}
		t.seen = true
		if err := p.SkipAnswer(); err != nil {
			t.bad = true
			return
		}
	}
}

func (t *ttlWatch) ttl() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.seen || t.bad {
		return 0
	}
	return time.Duration(t.min) * time.Second
}

// ttlConn passes a resolver's UDP exchange through, reading the TTLs of
// each answer it carries.
type ttlConn struct {
	*net.UDPConn
	w *ttlWatch
}

func (c *ttlConn) Read(b []byte) (int, error) {
	n, err := c.UDPConn.Read(b)
	if n > 0 {
		c.w.answer(b[:n])
	}
	return n, err
}
