package perms

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/wardenhq/warden/engine/egress"
	"github.com/wardenhq/warden/storage"
)

// OpConnect is one connection of a hook whose network is a list, through
// its egress proxy: content {"host": NAME, "port": N}. A policy allows it
// by `network: true` (every name, still behind the address deny list), by
// an entry of its network list, or by an exact rule.
const OpConnect = "network.connect"

// Connect is the content of an OpConnect operation.
type Connect struct {
	Host string `json:"host"`
	Port uint16 `json:"port"`
}

// Dest is host:port as the policy list spells it.
func (c Connect) Dest() string {
	if egress.IsAddr(c.Host) {
		return "ip:" + egress.JoinHostPort(c.Host, c.Port)
	}
	return c.Host + ":" + strconv.Itoa(int(c.Port))
}

// Warning is what approving op would open that its content does not
// say: for a connection to an address (an IP literal) that the deny list
// refuses for names, or that is this host's own, approving it lets the
// hook reach that address past the deny list. "" for anything else.
func Warning(op Op) string {
	if op.Operation != OpConnect {
		return ""
	}
	var c Connect
	if json.Unmarshal(op.Content, &c) != nil {
		return ""
	}
	a, err := netip.ParseAddr(strings.Trim(c.Host, "[]"))
	if err != nil {
		return ""
	}
	why := egress.DeniedAddr(a)
	if why == "" {
		return ""
	}
	return fmt.Sprintf("approving lets the hook reach %s past the address deny list: %s", c.Dest(), why)
}

// ConnectOp is the operation of one connection to host:port.
func ConnectOp(subject, host string, port uint16) (Op, error) {
	return NewOp(subject, OpConnect, Connect{Host: host, Port: port})
}

// CheckNetworkList canonicalizes a policy's network list; the error names
// the entry.
func CheckNetworkList(entries []string) ([]string, error) {
	l, err := egress.ParseList(entries)
	if err != nil {
		return nil, fmt.Errorf("network list: %w", err)
	}
	if len(l) == 0 {
		return nil, nil
	}
	return l.Strings(), nil
}

// evaluateConnect is Evaluate for OpConnect.
func evaluateConnect(p storage.PolicyRecord, op Op) (bool, string) {
	if p.Network {
		return true, fmt.Sprintf("policy %s revision %d: network true (every name)", op.Subject, p.Revision)
	}
	var c Connect
	if err := json.Unmarshal(op.Content, &c); err == nil {
		l, err := egress.ParseList(p.NetworkAllow)
		if err == nil {
			if ok, via := ListAllows(p, op.Subject, l, c.Host, c.Port); ok {
				return true, via
			}
		}
	}
	for _, r := range p.Rules {
		if r.Operation == op.Operation && r.Digest == op.Digest {
			return true, fmt.Sprintf("policy %s revision %d: rule %s %s", op.Subject, p.Revision, r.Operation, r.Digest[:12])
		}
	}
	return false, fmt.Sprintf("policy %s revision %d: no network entry matches", op.Subject, p.Revision)
}

// ListAllows is the part of Evaluate for a connection to host:port that
// needs no operation digest: the policy's network switch, or its list l
// (the caller's parse of p.NetworkAllow, so a proxy can parse it once per
// revision instead of once per connection). false says only that neither
// allows it: an exact rule still may (Evaluate says).
func ListAllows(p storage.PolicyRecord, subject string, l egress.List, host string, port uint16) (bool, string) {
	switch {
	case p.Subject != "" && p.Subject != subject:
		return false, ""
	case p.Network:
		return true, fmt.Sprintf("policy %s revision %d: network true (every name)", subject, p.Revision)
	}
	if d, ok := l.Match(host, port); ok {
		return true, fmt.Sprintf("policy %s revision %d: %s", subject, p.Revision, d.String())
	}
	return false, ""
}

// alwaysConnect is approve-always of a network.connect request: host:port
// joins the policy's network list (so `warden perms policy show` lists
// it by name), instead of an opaque rule.
func alwaysConnect(p storage.PolicyRecord, req storage.RequestRecord) (storage.PolicyRecord, storage.Rule, error) {
	var c Connect
	if err := json.Unmarshal(req.Content, &c); err != nil {
		return p, storage.Rule{}, fmt.Errorf("request %d: bad network.connect content: %w", req.ID, err)
	}
	dest := c.Dest()
	cur, err := egress.ParseList(p.NetworkAllow)
	if err != nil {
		return p, storage.Rule{}, fmt.Errorf("the policy's network list: %w", err)
	}
	if _, listed := cur.Match(c.Host, c.Port); !listed {
		list, err := CheckNetworkList(append(append([]string{}, p.NetworkAllow...), dest))
		if err != nil {
			return p, storage.Rule{}, fmt.Errorf("request %d: %s cannot join the network list: %w", req.ID, dest, err)
		}
		p.NetworkAllow = list
	}
	return p, storage.Rule{Operation: req.Operation, Digest: req.Digest, Summary: "network " + dest}, nil
}

// NetworkSummary is a policy's network in one word or list: "true (the
// host's network)", "false", or the destinations.
func NetworkSummary(p storage.PolicyRecord) string {
	switch {
	case p.Network:
		return "true (the host's network)"
	case len(p.NetworkAllow) > 0:
		return fmt.Sprint(p.NetworkAllow)
	}
	return "false"
}
