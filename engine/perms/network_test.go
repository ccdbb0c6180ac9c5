package perms

import (
	"strings"
	"testing"
	"time"

	"github.com/wardenhq/warden/storage"
)

func TestEvaluateConnect(t *testing.T) {
	const subj = "module:m"
	p := storage.PolicyRecord{Subject: subj, Revision: 4, NetworkAllow: []string{"api.github.com:443", "*.pythonhosted.org:443", "ip:203.0.113.7:8443"}}
	for _, c := range []struct {
		host string
		port uint16
		ok   bool
		via  string
	}{
		{"api.github.com", 443, true, "api.github.com:443"},
		{"files.pythonhosted.org", 443, true, "*.pythonhosted.org:443"},
		{"pythonhosted.org", 443, false, "no network entry matches"},
		{"203.0.113.7", 8443, true, "ip:203.0.113.7:8443"},
		{"api.github.com", 80, false, "no network entry matches"},
	} {
		op, err := ConnectOp(subj, c.host, c.port)
		if err != nil {
			t.Fatal(err)
		}
		ok, via := Evaluate(p, op)
		if ok != c.ok || !strings.Contains(via, c.via) {
			t.Errorf("%s:%d: %v %q, want %v %q", c.host, c.port, ok, via, c.ok, c.via)
		}
	}
	p.Network = true
	op, _ := ConnectOp(subj, "anything.example", 22)
	if ok, via := Evaluate(p, op); !ok || !strings.Contains(via, "network true") {
		t.Errorf("network true: %v %q", ok, via)
	}
}

// Approve-always of a connection puts host:port in the policy's network
// list, at a new revision; a bad list in SetPolicy is refused whole.
func TestApproveAlwaysConnectAddsName(t *testing.T) {
	s := openStore(t)
	now := time.Now()
	const subj = "module:m"
	if err := update(t, s, func(tx *storage.Tx) error {
		_, err := SetPolicy(tx, "local:op", storage.PolicyRecord{Subject: subj, NetworkAllow: []string{"pypi.org"}}, 0, now)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	err := update(t, s, func(tx *storage.Tx) error {
		_, err := SetPolicy(tx, "local:op", storage.PolicyRecord{Subject: subj, NetworkAllow: []string{"pypi.org", "10.0.0.0/8"}}, 0, now)
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "entry 1") {
		t.Errorf("a CIDR in the list: %v", err)
	}
	op, _ := ConnectOp(subj, "API.github.com", 443)
	req, err := open(t, s, op, now)
	if err != nil {
		t.Fatal(err)
	}
	d, err := decide(t, s, req.ID, storage.ApproveAlways, now, "")
	if err != nil {
		t.Fatal(err)
	}
	if d.Policy == nil || d.Policy.Revision != 1 || strings.Join(d.Policy.NetworkAllow, ",") != "pypi.org,api.github.com:443" {
		t.Errorf("policy after approve-always: %+v", d.Policy)
	}
}

// An operator asked about a connection to an address the deny list
// refuses for names (cloud metadata, loopback, this host's own) is told,
// in the request itself, that approving it passes the deny list: the
// content alone ({"host":"169.254.169.254","port":80}) does not say so.
func TestConnectRequestWarnsPastTheDenyList(t *testing.T) {
	s := openStore(t)
	now := time.Now()
	for host, want := range map[string]string{
		"169.254.169.254": "approving lets the hook reach ip:169.254.169.254:80 past the address deny list: 169.254.169.254 is link-local (cloud metadata lives at 169.254.169.254)",
		"127.0.0.1":       "approving lets the hook reach ip:127.0.0.1:80 past the address deny list: 127.0.0.1 is loopback",
		"::1":             "approving lets the hook reach ip:[::1]:80 past the address deny list: ::1 is loopback",
		"93.184.215.14":   "",
		"example.com":     "",
	} {
		op, err := ConnectOp("module:m", host, 80)
		if err != nil {
			t.Fatal(err)
		}
		req, err := open(t, s, op, now)
		if err != nil {
			t.Fatal(err)
		}
		if req.Warning != want {
			t.Errorf("%s: warning %q, want %q", host, req.Warning, want)
		}
		var back storage.RequestRecord
		s.View(func(tx *storage.Tx) (err error) { back, err = tx.Request(req.ID); return err })
		if back.Warning != want {
			t.Errorf("%s: stored warning %q, want %q", host, back.Warning, want)
		}
	}
}
