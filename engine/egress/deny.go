package egress

import (
	"fmt"
	"net/netip"
	"syscall"
)

// denied are the address ranges the proxy never connects to for a name,
// whatever the policy allows: they point back into the host, its LAN or
// its cloud's metadata service. A DNS name an operator allowed can be made
// to resolve to any of them, so the check is on the resolved address,
// made by the engine, after resolution. Only an explicit ip: entry (an
// operator naming that very address) passes.
var denied = []struct {
	prefix netip.Prefix
	what   string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "the unspecified/this-network range"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local (cloud metadata lives at 169.254.169.254)"},
	{netip.MustParsePrefix("10.0.0.0/8"), "a private range"},
	{netip.MustParsePrefix("172.16.0.0/12"), "a private range"},
	{netip.MustParsePrefix("192.168.0.0/16"), "a private range"},
	{netip.MustParsePrefix("100.64.0.0/10"), "carrier-grade NAT (some clouds' metadata, e.g. 100.100.100.200)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignments"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved (and broadcast)"},
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("fc00::/7"), "unique-local (private; includes fd00:ec2::254, EC2 metadata)"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
	{netip.MustParsePrefix("64:ff9b::/96"), "NAT64 (may map to any of the above)"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "local-use NAT64 (may map to any of the above)"},
	{netip.MustParsePrefix("2001::/32"), "Teredo (may map to any of the above)"},
	{netip.MustParsePrefix("2002::/16"), "6to4 (may map to any of the above)"},
}

// DeniedAddr says why a resolved address is refused, or "" when it may be
// connected to. IPv4-mapped IPv6 addresses are judged as IPv4.
//
// Besides the ranges above, every address of this host's own interfaces
// is refused ("an address of this host"): a public address on eth0 reaches
// whatever listens on 0.0.0.0 (sshd, `serve --ssh`, published container
// ports) as surely as loopback does. They are read afresh for each
// address judged, so one added a moment ago counts; when they cannot be
// read, nothing public is reached (fail closed).
func DeniedAddr(a netip.Addr) string {
	a = a.Unmap()
	if why := deniedRange(a); why != "" {
		return why
	}
	own, err := hostAddrs()
	if err != nil {
		return fmt.Sprintf("this host's own addresses could not be read (%v), so %s, which may be one, is not reached", err, a)
	}
	for _, h := range own {
		if h.Unmap() == a {
			return fmt.Sprintf("%s is an address of this host", a)
		}
	}
	return ""
}

// deniedRange is DeniedAddr's fixed part: the ranges of denied.
func deniedRange(a netip.Addr) string {
	for _, d := range denied {
		if d.prefix.Contains(a) {
			return fmt.Sprintf("%s is %s", a, d.what)
		}
	}
	return ""
}

// IsHostAddr: a is an address of one of this host's interfaces (read
// afresh), or on one of the fixed ranges that point back into the host
// (loopback, unspecified). An operator asked about such an address is
// told so.
func IsHostAddr(a netip.Addr) bool {
	a = a.Unmap()
	if a.IsLoopback() || a.IsUnspecified() {
		return true
	}
	own, _ := hostAddrs()
	for _, h := range own {
		if h.Unmap() == a {
			return true
		}
	}
	return false
}

// hostAddrs lists the addresses of this host's interfaces, from the
// kernel each time: one netlink dump of the address table (net's
// InterfaceAddrs dumps the link table too). For each address the local
// one (IFA_LOCAL) counts, else IFA_ADDRESS (IPv6 has only that; on a
// point-to-point link IFA_ADDRESS is the peer's).
func hostAddrs() ([]netip.Addr, error) {
	tab, err := syscall.NetlinkRIB(syscall.RTM_GETADDR, syscall.AF_UNSPEC)
	if err != nil {
		return nil, fmt.Errorf("netlink: %w", err)
	}
	msgs, err := syscall.ParseNetlinkMessage(tab)
	if err != nil {
		return nil, fmt.Errorf("netlink: %w", err)
	}
	var out []netip.Addr
	for i := range msgs {
		m := &msgs[i]
		if m.Header.Type == syscall.NLMSG_DONE {
			break
		}
		if m.Header.Type != syscall.RTM_NEWADDR {
			continue
		}
		attrs, err := syscall.ParseNetlinkRouteAttr(m)
		if err != nil {
			return nil, fmt.Errorf("netlink: %w", err)
		}
		var local, addr netip.Addr
		for _, a := range attrs {
			ip, ok := netip.AddrFromSlice(a.Value)
			switch {
			case !ok:
			case a.Attr.Type == syscall.IFA_LOCAL:
				local = ip
			case a.Attr.Type == syscall.IFA_ADDRESS:
				addr = ip
			}
		}
		if local.IsValid() {
			out = append(out, local)
		} else if addr.IsValid() {
			out = append(out, addr)
		}
	}
	return out, nil
}
