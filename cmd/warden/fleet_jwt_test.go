package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/wardenhq/warden/engine/fleet/fleettest"
)

// natsOperatorMode is a nats-server in operator (JWT) mode: an operator,
// a system account and a WARDEN account with JetStream, preloaded into a
// MEMORY resolver, as `nsc` and a decentralised deployment set it up.
type natsOperatorMode struct {
	dir, url string
	trust    *fleettest.Trust
}

// startNatsOperatorMode writes the trust chain and the config (plus
// extra lines) into dir and starts nats-server -js on loopback.
func startNatsOperatorMode(t *testing.T, dir, extra string) *natsOperatorMode {
	t.Helper()
	server, err := exec.LookPath("nats-server")
	if err != nil {
		server = "/usr/sbin/nats-server"
	}
	if _, err := os.Stat(server); err != nil {
		natsServer(t, filepath.Join(dir, "install")) // installs it (or fails under CI, skips elsewhere)
		stopPIDFile(filepath.Join(dir, "install", "nats.pid"))
	}
	tr := fleettest.NewTrust(t)
	return &natsOperatorMode{dir: dir, url: tr.Serve(t, server, dir, extra), trust: tr}
}

func stopPIDFile(path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	var pid int
	fmt.Sscan(string(b), &pid)
	if pid > 1 {
		stopPID(pid)
	}
}

// jsAPIs are the JetStream API prefixes a member's permissions name:
// $JS.API, and with a JetStream domain $JS.<domain>.API too (what the
// member sends; a server of that domain maps it to $JS.API before it
// checks the permissions, a leaf node of another domain checks it as
// sent).
func jsAPIs(domain string) []string {
	if domain == "" {
		return []string{"$JS.API"}
	}
	return []string{"$JS.API", "$JS." + domain + ".API"}
}

// hostPerms and memberPerms are the README's minimal permission sets
// ("Many hosts"), as user JWT claims (`nsc add user --allow-pub ...`).
func hostPerms(host, domain string) func(*jwt.UserClaims) {
	return func(uc *jwt.UserClaims) {
		uc.Pub.Allow.Add("warden.host."+host+".>", "$KV.warden_hosts."+host, "$KV.warden_keys."+host)
		for _, api := range jsAPIs(domain) {
			uc.Pub.Allow.Add(api + ".DIRECT.GET.KV_warden_keys.$KV.warden_keys." + host)
		}
		uc.Sub.Allow.Add("warden.host."+host+".decide.>", "warden.host."+host+".verify", "_INBOX.>")
		uc.Resp = &jwt.ResponsePermission{MaxMsgs: 1, Expires: time.Minute}
	}
}

func memberPerms(name, role, domain string) func(*jwt.UserClaims) {
	return func(uc *jwt.UserClaims) {
		uc.Pub.Allow.Add("warden.host.*.decide."+role+"."+name, "warden.host.*.verify", "$JS.FC.>")
		for _, api := range jsAPIs(domain) {
			uc.Pub.Allow.Add(api+".INFO", api+".STREAM.INFO.>", api+".STREAM.NAMES", api+".STREAM.LIST", api+".CONSUMER.CREATE.>",
				api+".CONSUMER.DELETE.>", api+".CONSUMER.INFO.>", api+".CONSUMER.MSG.NEXT.>", api+".DIRECT.GET.>",
				api+".STREAM.MSG.GET.>")
		}
		uc.Sub.Allow.Add("_INBOX.>", "warden.host.*.evt.>")
	}
}

// creds writes NAME's creds file (user JWT + seed, 0600) into the rig's
// creds dir, signed by signer; it returns the seed.
func (n *natsOperatorMode) creds(t *testing.T, name string, signer nkeys.KeyPair, exp time.Time, perms func(*jwt.UserClaims)) string {
	t.Helper()
	os.MkdirAll(filepath.Join(n.dir, "creds"), 0o700)
	return n.trust.Creds(t, filepath.Join(n.dir, "creds", name), name, signer, exp, perms)
}

// newJWTFleetRig is a fleet rig over a server in operator mode: admin,
// operator alice and host hosta have creds files (JWT + seed) with the
// README's permissions; the fleet is initialised.
func newJWTFleetRig(t *testing.T, domain string) (*fleetRig, *natsOperatorMode) {
	base := privateDir(t, "warden-fleet-jwt-")
	natsDir := filepath.Join(base, "nats")
	os.MkdirAll(natsDir, 0o700)
	js := fmt.Sprintf("jetstream: { store_dir: %q }", filepath.Join(natsDir, "js"))
	if domain != "" {
		js = fmt.Sprintf("jetstream: { store_dir: %q, domain: %s }", filepath.Join(natsDir, "js"), domain)
	}
	n := startNatsOperatorMode(t, natsDir, js)
	r := &fleetRig{t: t, base: base, natsDir: natsDir, url: n.url, bin: filepath.Join(base, "bin", "warden"), hosts: map[string]*fleetHost{}}
	if domain != "" {
		r.extra = []string{"--fleet-domain", domain}
	}
	n.creds(t, "admin", n.trust.Account, time.Time{}, nil)
	n.creds(t, "alice", n.trust.Account, time.Time{}, memberPerms("alice", "operator", domain))
	n.creds(t, "hosta", n.trust.Account, time.Time{}, hostPerms("hosta", domain))
	r.setUp()
	return r, n
}

// jwtJoinDecide: hosta joins with its creds file, the fleet sees it up
// and its request, alice's approval (her creds file's name is her fleet
// name) reaches hosta's engine and the hook proceeds.
func jwtJoinDecide(t *testing.T, r *fleetRig) {
	t.Helper()
	r.start("hosta")
	waitUntil(t, "hosta up in the fleet", 20*time.Second, func() bool {
		return strings.Contains(r.fleet("alice", "hosts", "--json").stdout, `"up": true`)
	}, r.logs)
	run := r.ask("hosta", "over-jwt")
	id := r.waitRequest("hosta", "over-jwt", false)
	if res := r.fleet("alice", "approve", "hosta", fmt.Sprint(id)); res.code != 0 || !strings.Contains(res.stdout+res.stderr, "fleet:alice") {
		t.Fatalf("alice approves over JWT auth: %s\n%s", res, r.logs())
	}
	select {
	case res := <-run:
		if res.code != 0 || !strings.Contains(res.stdout, "Hello, over-jwt!") {
			t.Errorf("hosta's hook after the approval: %s", res)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("hosta's hook did not proceed after the approval")
	}
	if !hasReceipt(r.receipts("hosta"), "request.decide", "fleet:alice") {
		t.Errorf("hosta's receipts do not name fleet:alice: %+v", r.receipts("hosta"))
	}
	r.waitRequest("hosta", "over-jwt", true)
}

// TestFleetJWTCreds: `warden serve --fleet-creds user.creds` against a
// nats-server in operator (JWT) mode joins, publishes and gets
// decisions; an expired creds file, or one from an account the server
// does not trust, stops serve with an error that says what to do and
// never shows the seed.
func TestFleetJWTCreds(t *testing.T) {
	r, n := newJWTFleetRig(t, "")
	jwtJoinDecide(t, r)

	bad := filepath.Join(r.base, "bad")
	expiredSeed := n.creds(t, "expired", n.trust.Account, time.Now().Add(-time.Minute), hostPerms("hosta", ""))
	res := r.cmd("--data-dir", bad, "serve", "--fleet", r.url, "--fleet-creds", r.creds("expired"), "--fleet-host", "hosta")
	if res.code != 1 || !strings.Contains(res.stderr, "expired at") || !strings.Contains(res.stderr, "ask the fleet's admin for a new creds file") {
		t.Errorf("serve with an expired creds file: %s", res)
	}
	stranger, _ := nkeys.CreateAccount()
	strangerSeed := n.creds(t, "stranger", stranger, time.Time{}, hostPerms("hosta", ""))
	res2 := r.cmd("--data-dir", bad, "serve", "--fleet", r.url, "--fleet-creds", r.creds("stranger"), "--fleet-host", "hosta")
	if res2.code != 1 || !strings.Contains(res2.stderr, "not one this server trusts") || !strings.Contains(res2.stderr, "ask the fleet's admin") {
		t.Errorf("serve with a creds file of an account the server does not know: %s", res2)
	}
	res3 := r.cmd("fleet", "--fleet", r.url, "--fleet-creds", r.creds("expired"), "hosts")
	if res3.code != 1 || !strings.Contains(res3.stderr, "expired at") {
		t.Errorf("fleet hosts with an expired creds file: %s", res3)
	}
	t.Logf("expired: %s\nstranger: %s", res.stderr, res2.stderr)
	for _, x := range []result{res, res2, res3} {
		for _, seed := range []string{expiredSeed, strangerSeed} {
			if strings.Contains(x.stdout+x.stderr, seed) || strings.Contains(x.stdout+x.stderr, seed[:20]) {
				t.Errorf("the output shows a seed: %s", x)
			}
		}
	}
}

// TestFleetDomain: a fleet whose stream lives in a JetStream domain (the
// hub of a leaf-node setup: `jetstream { domain: hub }`), with the
// permissions' API subjects in that domain: with --fleet-domain hub,
// init, join, publish and decide work as without one; a wrong domain is
// refused saying to check it.
func TestFleetDomain(t *testing.T) {
	r, _ := newJWTFleetRig(t, "hub")
	jwtJoinDecide(t, r)
	var res result
	// verify reads the pinned key and the checkpoints in the domain.
	var last result
	waitUntil(t, "hosta verified in the domain", 30*time.Second, func() bool {
		last = r.fleet("alice", "verify", "hosta")
		return last.code == 0 && strings.Contains(last.stdout, "checkpoints match")
	}, func() string { return last.String() })
	// forget deletes the pinned key in the domain's bucket.
	if res := r.fleet("alice", "hosts", "--json"); !strings.Contains(res.stdout, `"key"`) {
		t.Errorf("hosta's pinned key does not show: %s", res)
	}
	if res := r.fleet("admin", "forget", "hosta"); res.code != 0 {
		t.Errorf("forget in the domain: %s", res)
	}
	if res := r.fleet("alice", "hosts", "--json"); res.code != 0 || strings.Contains(res.stdout, `"key"`) {
		t.Errorf("hosta's key is still pinned after forget: %s", res)
	}
	t0 := time.Now()
	res = r.cmd("fleet", "--fleet", r.url, "--fleet-creds", r.creds("alice"), "--fleet-domain", "elsewhere", "hosts")
	t.Logf("hosts in a wrong domain: %s: %s", time.Since(t0), res.stderr)
	t0 = time.Now()
	if res.code != 1 || !strings.Contains(res.stderr, "domain elsewhere") || !strings.Contains(res.stderr, "--fleet-domain") {
		t.Errorf("fleet hosts in a domain that does not exist: %s", res)
	}
	res = r.cmd("--data-dir", filepath.Join(r.base, "bad"), "serve", "--fleet", r.url, "--fleet-creds", r.creds("hosta"), "--fleet-host", "hosta", "--fleet-domain", "elsewhere")
	t.Logf("serve in a wrong domain: %s: %s", time.Since(t0), res.stderr)
	if res.code != 1 || !strings.Contains(res.stderr, "domain elsewhere") {
		t.Errorf("serve in a domain that does not exist: %s", res)
	}
	if res := r.cmd("fleet", "--fleet", r.url, "--fleet-creds", r.creds("alice"), "--fleet-domain", "a.b", "hosts"); res.code != 2 {
		t.Errorf("a domain that is not one subject token: %s", res)
	}
}
