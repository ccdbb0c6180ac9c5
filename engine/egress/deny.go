package egress

import (
	"fmt"
	"net/netip"
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
func DeniedAddr(a netip.Addr) string {
	a = a.Unmap()
	for _, d := range denied {
		if d.prefix.Contains(a) {
			return fmt.Sprintf("%s is %s", a, d.what)
		}
	}
	return ""
}
