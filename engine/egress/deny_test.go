package egress

import (
	"net/netip"
	"testing"
)

// Addresses a name may resolve to: those that lead back into the host,
// its network or its cloud's metadata are refused (IPv4 inside IPv6
// forms too), public ones pass.
func TestDeniedAddr(t *testing.T) {
	for _, tc := range []struct {
		addr   string
		denied bool
	}{
		{"127.0.0.1", true},
		{"::1", true},
		{"::ffff:127.0.0.1", true},
		{"169.254.169.254", true},
		{"fd00:ec2::254", true},
		{"100.100.100.200", true},
		{"10.1.2.3", true},
		{"172.16.0.1", true},
		{"192.168.1.1", true},
		{"fe80::1", true},
		{"64:ff9b::7f00:1", true},
		{"64:ff9b:1::a9fe:a9fe", true},
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", true},
		{"2002:7f00:1::1", true},
		{"224.0.0.1", true},
		{"0.0.0.0", true},
		{"140.82.121.6", false},
		{"2606:4700::6810:84e5", false},
		{"203.0.113.7", false},
	} {
		why := DeniedAddr(netip.MustParseAddr(tc.addr))
		if (why != "") != tc.denied {
			t.Errorf("%s: denied=%v (%q), want %v", tc.addr, why != "", why, tc.denied)
		}
	}
}
