// Package egress is a jailed hook's way out when its network is a list of
// named destinations (docs/jail.md, "Egress by name"): the destination
// grammar and matching (this file), the per-run filtering proxy the engine
// serves on a Unix socket in the run dir (proxy.go), the address deny list
// (deny.go), and the bridge that runs inside the jail, listening on
// 127.0.0.1 and forwarding each connection to that socket (bridge.go).
//
// The jail itself has no route anywhere: its network namespace is empty but
// for loopback. Whatever leaves it goes through the bridge and the proxy,
// and the proxy, not the hook, resolves every name.
package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Dest is one allowed destination: an exact host name, a wildcard
// (`*.example.com`: every name below example.com, not example.com
// itself), or an explicit address (`ip:203.0.113.7:443`), with the ports
// it allows.
type Dest struct {
	// Host is a lowercase name without the wildcard ("example.com" for
	// "*.example.com"); empty for an ip: entry.
	Host     string
	Wildcard bool
	// Addr is set for an ip: entry only.
	Addr netip.Addr
	// Ports allowed: one port, or 443 and 80 when the entry gave none.
	Ports []uint16
}

// DefaultPorts are what an entry without a port allows.
var DefaultPorts = []uint16{443, 80}

// Limits of the grammar.
const (
	MaxEntries = 256 // destinations in one list
	maxName    = 253 // a DNS name, without the trailing dot
	maxLabel   = 63
)

// String is the canonical spelling, which Parse reads back to the same Dest.
func (d Dest) String() string {
	var host string
	switch {
	case d.Addr.IsValid():
		host = "ip:" + d.Addr.String()
		if d.Addr.Is6() {
			host = "ip:[" + d.Addr.String() + "]"
		}
	case d.Wildcard:
		host = "*." + d.Host
	default:
		host = d.Host
	}
	if len(d.Ports) == 1 {
		return host + ":" + strconv.Itoa(int(d.Ports[0]))
	}
	return host
}

// Parse reads one destination:
//
//	api.github.com:443      an exact name and port
//	*.pythonhosted.org:443  every name below pythonhosted.org, port 443
//	pypi.org                no port: 443 and 80 only
//	ip:203.0.113.7:443      an explicit address (the only way to name one)
//	ip:[2001:db8::7]:443
//
// Names are case-insensitive (kept lowercase) and may end in one dot. A
// bare `*`, a wildcard anywhere but a whole leading label, a wildcard over
// a single label (`*.com`), IP literals and CIDRs without `ip:`, and ports
// outside 1-65535 are refused, each with what to write instead.
func Parse(s string) (Dest, error) {
	if len(s) > maxName+16 {
		return Dest{}, fmt.Errorf("destination too long (%d bytes; a name has at most %d)", len(s), maxName)
	}
	if s == "" {
		return Dest{}, errors.New("empty destination (write a name like api.github.com:443)")
	}
	for _, c := range s {
		if c <= 0x20 || c == 0x7f || c > 0x7e {
			return Dest{}, fmt.Errorf("destination %q has a space, control or non-ASCII character (write a name like api.github.com:443; IDNs in their xn-- form)", s)
		}
	}
	if len(s) >= 3 && strings.EqualFold(s[:3], "ip:") {
		return parseIP(s, s[3:])
	}
	if strings.Contains(s, "/") {
		return Dest{}, fmt.Errorf("destination %q: CIDR ranges are refused (a name is what an operator can review); name the hosts, or one address as ip:A.B.C.D:PORT", s)
	}
	if strings.HasPrefix(s, "[") {
		return Dest{}, fmt.Errorf("destination %q: IP literals are refused in the list; write ip:%s if you mean that address", s, s)
	}
	host, ports := s, DefaultPorts
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		p, err := parsePort(s, s[i+1:])
		if err != nil {
			return Dest{}, err
		}
		host, ports = s[:i], []uint16{p}
	}
	if strings.Contains(host, ":") {
		return Dest{}, fmt.Errorf("destination %q: IP literals are refused in the list; write ip:[ADDR]:PORT if you mean that address", s)
	}
	d := Dest{Ports: ports}
	switch {
	case host == "*" || host == "*.":
		return Dest{}, fmt.Errorf("destination %q: a bare * would allow every host; name the hosts (e.g. *.pythonhosted.org:443)", s)
	case strings.HasPrefix(host, "*."):
		d.Wildcard, host = true, host[2:]
	}
	if strings.Contains(host, "*") {
		return Dest{}, fmt.Errorf("destination %q: a wildcard may only be a whole leading label, as in *.example.com", s)
	}
	name, err := CanonicalName(host)
	if err != nil {
		return Dest{}, fmt.Errorf("destination %q: %v", s, err)
	}
	if _, err := netip.ParseAddr(name); err == nil || looksNumeric(name) {
		return Dest{}, fmt.Errorf("destination %q: IP literals are refused in the list (a name is what an operator can review); write %s if you mean that address", s, ipEntryFor(name, d.Ports))
	}
	if name == "ip" {
		return Dest{}, fmt.Errorf("destination %q: a host named ip would read as an ip: entry; write ip:A.B.C.D:PORT for an address", s)
	}
	if d.Wildcard && !strings.Contains(name, ".") {
		return Dest{}, fmt.Errorf("destination %q: a wildcard over a single label is too broad; name a domain with at least two labels (e.g. *.example.com)", s)
	}
	d.Host = name
	return d, nil
}

func parseIP(s, rest string) (Dest, error) {
	i := strings.LastIndexByte(rest, ':')
	if i < 0 {
		return Dest{}, fmt.Errorf("destination %q: an ip: entry needs a port (ip:203.0.113.7:443)", s)
	}
	p, err := parsePort(s, rest[i+1:])
	if err != nil {
		return Dest{}, err
	}
	host := rest[:i]
	if strings.Contains(host, "/") {
		return Dest{}, fmt.Errorf("destination %q: CIDR ranges are refused; an ip: entry names one address", s)
	}
	v6 := strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]")
	if v6 {
		host = host[1 : len(host)-1]
	}
	a, err := netip.ParseAddr(host)
	if err != nil || a.Zone() != "" {
		return Dest{}, fmt.Errorf("destination %q: %q is not an IP address (ip:203.0.113.7:443 or ip:[2001:db8::7]:443)", s, host)
	}
	if a.Is6() && !a.Is4In6() && !v6 {
		return Dest{}, fmt.Errorf("destination %q: put an IPv6 address in brackets: ip:[%s]:%d", s, host, p)
	}
	a = a.Unmap()
	if a.IsUnspecified() || a.IsMulticast() {
		return Dest{}, fmt.Errorf("destination %q: %s cannot be a destination", s, a)
	}
	return Dest{Addr: a, Ports: []uint16{p}}, nil
}

func parsePort(s, p string) (uint16, error) {
	if p == "" {
		return 0, fmt.Errorf("destination %q: empty port (write name:443, or leave the port out for 443 and 80)", s)
	}
	if p == "*" {
		return 0, fmt.Errorf("destination %q: a port wildcard is refused; name the port (or leave it out for 443 and 80)", s)
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil || n == 0 || p[0] == '0' || p[0] == '+' {
		return 0, fmt.Errorf("destination %q: port %q must be a number from 1 to 65535", s, p)
	}
	return uint16(n), nil
}

// CanonicalName lowercases a host name, drops one trailing dot and checks
// it is a DNS name: labels of letters, digits and inner hyphens (an
// underscore is tolerated, as in real service names), 1-63 bytes each, at
// most 253 in all.
func CanonicalName(host string) (string, error) {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if host == "" {
		return "", errors.New("empty host name")
	}
	if len(host) > maxName {
		return "", fmt.Errorf("host name longer than %d bytes", maxName)
	}
	for _, l := range strings.Split(host, ".") {
		if l == "" {
			return "", errors.New("empty label in host name")
		}
		if len(l) > maxLabel {
			return "", fmt.Errorf("label longer than %d bytes in host name", maxLabel)
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return "", errors.New("a label of the host name starts or ends with a hyphen")
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", fmt.Errorf("host name has the character %q (letters, digits, hyphens and dots only)", c)
			}
		}
	}
	return host, nil
}

// looksNumeric: a last label of digits only is an address in disguise
// ("1.2.3.4", "127.1", "0x7f.1" are all read as IPv4 by some resolver).
// ipEntryFor is the ip: entry that names the address a numeric host
// means, written out in full: 127.1 is 127.0.0.1 to the C library's
// inet_aton, and ip: takes only the full dotted form. Ports are the
// entry's one port, else PORT.
func ipEntryFor(name string, ports []uint16) string {
	port := "PORT"
	if len(ports) == 1 {
		port = strconv.Itoa(int(ports[0]))
	}
	if a, ok := atonAddr(name); ok {
		return "ip:" + a.String() + ":" + port
	}
	return "ip:A.B.C.D:" + port
}

// atonAddr reads name as inet_aton does: one to four parts, each
// decimal, 0x hex or 0-led octal, the last filling the bytes left.
func atonAddr(name string) (netip.Addr, bool) {
	parts := strings.Split(name, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var b [4]byte
	for i, part := range parts {
		if part == "" || strings.HasPrefix(part, "0o") || strings.HasPrefix(part, "0b") || strings.Contains(part, "_") {
			return netip.Addr{}, false
		}
		n, err := strconv.ParseUint(part, 0, 32)
		if err != nil {
			return netip.Addr{}, false
		}
		if i < len(parts)-1 {
			if n > 255 {
				return netip.Addr{}, false
			}
			b[i] = byte(n)
			continue
		}
		left := 4 - i // bytes the last part fills
		if left < 4 && n >= 1<<(8*left) {
			return netip.Addr{}, false
		}
		for j := 3; j >= i; j-- {
			b[j] = byte(n)
			n >>= 8
		}
	}
	return netip.AddrFrom4(b), true
}

func looksNumeric(name string) bool {
	last := name[strings.LastIndexByte(name, '.')+1:]
	if strings.HasPrefix(last, "0x") {
		return true
	}
	for i := 0; i < len(last); i++ {
		if last[i] < '0' || last[i] > '9' {
			return false
		}
	}
	return true
}

// List is a parsed network list.
type List []Dest

// ParseList parses entries; the error names the entry's index. Duplicates
// (by canonical spelling) are refused: a list is reviewed, and a repeated
// line hides nothing but invites doubt.
func ParseList(entries []string) (List, error) {
	if len(entries) > MaxEntries {
		return nil, fmt.Errorf("%d destinations: at most %d", len(entries), MaxEntries)
	}
	out := make(List, 0, len(entries))
	seen := map[string]int{}
	for i, s := range entries {
		d, err := Parse(s)
		if err != nil {
			return nil, &EntryError{Index: i, Err: err}
		}
		if j, dup := seen[d.String()]; dup {
			return nil, &EntryError{Index: i, Err: fmt.Errorf("destination %q repeats entry %d", s, j)}
		}
		seen[d.String()] = i
		out = append(out, d)
	}
	return out, nil
}

// EntryError is a refusal of one entry of a list.
type EntryError struct {
	Index int
	Err   error
}

func (e *EntryError) Error() string { return fmt.Sprintf("entry %d: %v", e.Index, e.Err) }
func (e *EntryError) Unwrap() error { return e.Err }

// Strings is the canonical spelling of every entry.
func (l List) Strings() []string {
	out := make([]string, len(l))
	for i, d := range l {
		out[i] = d.String()
	}
	return out
}

// Match finds the entry that allows host:port. host is what the hook
// asked for: a name (matched case-insensitively against names and
// wildcards) or an address literal (matched against ip: entries only).
// ok is false when none does.
func (l List) Match(host string, port uint16) (d Dest, ok bool) {
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		a = a.Unmap()
		for _, d := range l {
			if d.Addr.IsValid() && d.Addr == a && d.hasPort(port) {
				return d, true
			}
		}
		return Dest{}, false
	}
	name, err := CanonicalName(host)
	if err != nil {
		return Dest{}, false
	}
	for _, d := range l {
		if d.Addr.IsValid() || !d.hasPort(port) {
			continue
		}
		if d.Wildcard {
			if strings.HasSuffix(name, "."+d.Host) {
				return d, true
			}
		} else if name == d.Host {
			return d, true
		}
	}
	return Dest{}, false
}

func (d Dest) hasPort(p uint16) bool {
	for _, q := range d.Ports {
		if q == p {
			return true
		}
	}
	return false
}

// IsAddr reports whether host is an IP address literal (bracketed or not).
func IsAddr(host string) bool {
	_, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil
}

// JoinHostPort is host:port, with an IPv6 address in brackets.
func JoinHostPort(host string, port uint16) string {
	h := strings.Trim(host, "[]")
	if a, err := netip.ParseAddr(h); err == nil && a.Is6() && !a.Is4In6() {
		h = "[" + a.String() + "]"
	}
	return h + ":" + strconv.Itoa(int(port))
}
