package egress

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
)

// SOCKS5 reply codes (RFC 1928, section 6).
const (
	socksGeneralFailure  = 0x01
	socksNotAllowed      = 0x02 // connection not allowed by ruleset
	socksHostUnreachable = 0x04
	socksConnRefused     = 0x05
	socksCmdUnsupported  = 0x07
	socksAddrUnsupported = 0x08
)

// readSocks reads a SOCKS5 greeting (no authentication is offered: the
// socket is the run's own) and a CONNECT request. A domain name travels to
// the engine unresolved (socks5h): the hook never resolves a name.
func readSocks(br *bufio.Reader, c net.Conn) (*request, *refusal) {
	var hdr [2]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return nil, &refusal{}
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(br, methods); err != nil {
		return nil, &refusal{}
	}
	noAuth := false
	for _, m := range methods {
		noAuth = noAuth || m == 0
	}
	if !noAuth {
		c.Write([]byte{5, 0xff})
		return nil, &refusal{}
	}
	if _, err := c.Write([]byte{5, 0}); err != nil {
		return nil, &refusal{}
	}
	var rh [4]byte
	if _, err := io.ReadFull(br, rh[:]); err != nil || rh[0] != 5 {
		return nil, &refusal{}
	}
	fail := func(code byte) (*request, *refusal) {
		c.Write([]byte{5, code, 0, 1, 0, 0, 0, 0, 0, 0})
		return nil, &refusal{}
	}
	var host string
	switch rh[3] {
	case 1:
		var a [4]byte
		if _, err := io.ReadFull(br, a[:]); err != nil {
			return nil, &refusal{}
		}
		host = netip.AddrFrom4(a).String()
	case 4:
		var a [16]byte
		if _, err := io.ReadFull(br, a[:]); err != nil {
			return nil, &refusal{}
		}
		host = netip.AddrFrom16(a).Unmap().String()
	case 3:
		n, err := br.ReadByte()
		if err != nil {
			return nil, &refusal{}
		}
		name := make([]byte, n)
		if _, err := io.ReadFull(br, name); err != nil {
			return nil, &refusal{}
		}
		host = string(name)
	default:
		return fail(socksAddrUnsupported)
	}
	var pb [2]byte
	if _, err := io.ReadFull(br, pb[:]); err != nil {
		return nil, &refusal{}
	}
	if rh[1] != 1 { // only CONNECT; no BIND, no UDP ASSOCIATE
		return fail(socksCmdUnsupported)
	}
	port := binary.BigEndian.Uint16(pb[:])
	h, p, err := checkHost(host, port)
	if err != nil || p == 0 {
		return fail(socksAddrUnsupported)
	}
	return &request{proto: "socks5", host: h, port: p}, nil
}
