package fleethost

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/engine/fleet"
	"github.com/wardenhq/warden/engine/fleet/fleettest"
)

// creds writes user name's creds file into dir, signed by signer.
func creds(t *testing.T, tr *fleettest.Trust, dir, name string, signer nkeys.KeyPair, exp time.Time) (string, string) {
	p := filepath.Join(dir, name+".creds")
	return p, tr.Creds(t, p, name, signer, exp, nil)
}

// TestJWTCredsRenewed: a host whose user JWT expires while it is joined
// is cut off by the server; once a new creds file is in place (same
// path), the host logs in with it and publishes again, without a restart.
func TestJWTCredsRenewed(t *testing.T) {
	testNats(t) // installs nats-server (or fails under CI / skips)
	server, err := exec.LookPath("nats-server")
	if err != nil {
		server = "/usr/sbin/nats-server"
	}
	dir := t.TempDir()
	tr := fleettest.NewTrust(t)
	url := tr.Serve(t, server, dir, fmt.Sprintf("jetstream: { store_dir: %q }", filepath.Join(dir, "js")))
	adminFile, _ := creds(t, tr, dir, "admin", tr.Account, time.Time{})
	ac, _ := fleet.LoadCreds(adminFile)
	admin, err := fleet.Dial(url, ac, "", fleet.RoleOperator)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.Init(t.Context(), fleet.InitOptions{MaxBytes: 64 << 20}); err != nil {
		t.Fatal(err)
	}
	e, err := engine.Open(engine.Options{DataDir: filepath.Join(dir, "data")})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	// JWT expiry has a resolution of a second; leave the join time (a
	// loaded machine can take a few seconds to join).
	hostFile, _ := creds(t, tr, dir, "web1", tr.Account, time.Now().Add(6*time.Second))
	hc, err := fleet.LoadCreds(hostFile)
	if err != nil {
		t.Fatal(err)
	}
	var logMu sync.Mutex
	var logs []string
	h, err := Join(e, HostOptions{URL: url, Creds: hc, Name: "web1", Version: "test", Logf: func(f string, a ...any) {
		logMu.Lock()
		logs = append(logs, fmt.Sprintf(f, a...))
		logMu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	logged := func(s string) bool {
		logMu.Lock()
		defer logMu.Unlock()
		return strings.Contains(strings.Join(logs, "\n"), s)
	}
	waitFor(t, "the server to cut off the expired host", 15*time.Second, func() bool { return logged("credentials expired") })
	time.Sleep(2 * time.Second) // it keeps retrying with the expired file meanwhile
	renewed := time.Now()
	tr.Creds(t, hostFile+".new", "web1", tr.Account, time.Time{}, nil)
	if err := os.Rename(hostFile+".new", hostFile); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a heartbeat with the renewed creds file", 20*time.Second, func() bool {
		hs, err := admin.Hosts(t.Context(), nil)
		for _, h := range hs {
			if h.Host == "web1" && h.Heartbeat != nil && h.Heartbeat.At.After(renewed) {
				return err == nil
			}
		}
		return false
	})
	logMu.Lock()
	t.Logf("the host's log:\n%s", strings.Join(logs, "\n"))
	// An nkey seed: "S", its kind, then base32 (upper case and 2-7), 58
	// characters in all. (Not any "SU": a base64 fleet key can hold one.)
	seed := regexp.MustCompile(`S[UANOC][A-Z2-7]{56}`)
	if kp, err := nkeys.CreateUser(); err == nil {
		if s, _ := kp.Seed(); !seed.Match(s) {
			t.Fatalf("the seed pattern misses a real seed")
		}
	}
	for _, l := range logs {
		if seed.MatchString(l) {
			t.Errorf("a log line shows what looks like a seed: %s", l)
		}
	}
	logMu.Unlock()
}
