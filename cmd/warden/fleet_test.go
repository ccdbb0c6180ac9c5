package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFleetUsage: a missing or bad fleet setting is a usage error (exit
// 2) naming it, before anything connects or opens.
func TestFleetUsage(t *testing.T) {
	c := newCLI(t)
	t.Setenv("WARDEN_FLEET", "")
	t.Setenv("WARDEN_FLEET_CREDS", "")
	creds := filepath.Join(t.TempDir(), "creds")
	os.WriteFile(creds, []byte("alice:secret\n"), 0o600)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"fleet", "hosts"}, "give --fleet"},
		{[]string{"fleet"}, "needs a terminal"},
		{[]string{"fleet", "hosts", "--fleet", "nats://127.0.0.1:1"}, "--fleet-creds"},
		{[]string{"fleet", "approve", "hostb", "x", "--fleet", "nats://127.0.0.1:1", "--fleet-creds", creds}, "want a positive number"},
		{[]string{"fleet", "approve", "hostb"}, "accepts 2 arg"},
		{[]string{"serve", "--fleet", "nats://127.0.0.1:1"}, "--fleet needs --fleet-creds"},
		{[]string{"serve", "--fleet", "nats://127.0.0.1:1", "--fleet-creds", creds}, "--fleet needs --fleet-host"},
		{[]string{"serve", "--fleet-host", "web1"}, "need --fleet"},
		{[]string{"serve", "--fleet", "nats://127.0.0.1:1", "--fleet-creds", creds, "--fleet-host", "web 1"}, "--fleet-host \"web 1\""},
		{[]string{"serve", "--fleet", "http://127.0.0.1:1", "--fleet-creds", creds, "--fleet-host", "web1"}, "want nats or tls"},
	} {
		r := c.run(tc.args...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("warden %s: want exit 2 saying %q, got %s", strings.Join(tc.args, " "), tc.want, r)
		}
	}
}

// TestFleetCredsRefused: credentials readable by others, or a password
// over plain text off loopback, are refused before any connection.
func TestFleetCredsRefused(t *testing.T) {
	c := newCLI(t)
	dir := t.TempDir()
	open := filepath.Join(dir, "open")
	os.WriteFile(open, []byte("alice:secret\n"), 0o644)
	os.Chmod(open, 0o644)
	if r := c.run("fleet", "hosts", "--fleet", "nats://127.0.0.1:1", "--fleet-creds", open); r.code != 1 || !strings.Contains(r.stderr, "chmod 600") {
		t.Errorf("world-readable creds: %s", r)
	}
	ok := filepath.Join(dir, "ok")
	os.WriteFile(ok, []byte("alice:secret\n"), 0o600)
	if r := c.run("fleet", "hosts", "--fleet", "nats://192.0.2.1:4222", "--fleet-creds", ok); r.code != 1 || !strings.Contains(r.stderr, "in clear") {
		t.Errorf("password over plain text: %s", r)
	}
	if r := c.run("fleet", "hosts", "--fleet", "nats://127.0.0.1:1", "--fleet-creds", ok); r.code != 1 || !strings.Contains(r.stderr, "no fleet server answers") {
		t.Errorf("no server: %s", r)
	}
}

// TestFleetSettings: config.yaml's fleet: mapping, decoded strictly.
func TestFleetSettings(t *testing.T) {
	s, err := parseSettings("/c.yaml", []byte("fleet:\n  url: tls://nats.example:4222\n  creds: /etc/warden/fleet.creds\n  ca: /etc/warden/ca.pem\n  host: web1\n  domain: hub\n"))
	if err != nil || s.Fleet != (fleetJoin{url: "tls://nats.example:4222", creds: "/etc/warden/fleet.creds", host: "web1", ca: "/etc/warden/ca.pem", domain: "hub"}) {
		t.Fatalf("fleet settings: %+v %v", s.Fleet, err)
	}
	for in, want := range map[string]string{
		"fleet: x\n":                           "/c.yaml:1: fleet: want a mapping",
		"fleet:\n  url: http://x:1\n":          "/c.yaml:2: fleet.url:",
		"fleet:\n  creds: rel/creds\n":         "/c.yaml:2: fleet.creds: want an absolute path",
		"fleet:\n  host: a.b\n":                "/c.yaml:2: fleet.host: want 1-64 letters",
		"fleet:\n  domain: hub.x\n":            "/c.yaml:2: fleet.domain: want the JetStream domain",
		"fleet:\n  ca: ca.pem\n":               "/c.yaml:2: fleet.ca: want an absolute path to the CA's PEM file",
		"fleet:\n  hots: a\n":                  "/c.yaml:2: fleet.hots: unknown key",
		"fleet:\n  host: a\n  host: b\n":       "fleet.host: duplicated key",
		"fleet:\n  url: [nats://x:1]\n":        "fleet.url: want a string",
		"fleetx: {}\n":                         "unknown key (the config file knows: theme, bwrap, jail, limits, fleet)",
		"fleet:\n  url: nats://x:1\nfleet: {}": "duplicated key",
	} {
		if _, err := parseSettings("/c.yaml", []byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: want %q, got %v", in, want, err)
		}
	}
	// Flags win over the file, field by field.
	got := fleetJoin{host: "flaghost"}.or(s.Fleet)
	if got.host != "flaghost" || got.url != "tls://nats.example:4222" {
		t.Errorf("or: %+v", got)
	}
}
