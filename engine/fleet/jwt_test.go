package fleet

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/wardenhq/warden/engine/fleet/fleettest"
)

// creds writes user name's creds file into dir, signed by signer.
func creds(t *testing.T, tr *fleettest.Trust, dir, name string, signer nkeys.KeyPair, exp time.Time) (string, string) {
	p := filepath.Join(dir, name+".creds")
	return p, tr.Creds(t, p, name, signer, exp, nil)
}

// TestLoadCredsJWT: a creds file that cannot log in is refused before
// any dial, saying why and what to do, and never showing its seed.
func TestLoadCredsJWT(t *testing.T) {
	dir := t.TempDir()
	tr := fleettest.NewTrust(t)
	good, goodSeed := creds(t, tr, dir, "alice", tr.Account, time.Now().Add(time.Hour))
	c, err := LoadCreds(good)
	if err != nil || !c.jwt || c.name() != "alice" {
		t.Fatalf("a good creds file: %+v %v", c, err)
	}
	expired, seed := creds(t, tr, dir, "old", tr.Account, time.Now().Add(-time.Hour))
	_, err = LoadCreds(expired)
	if err == nil || !strings.Contains(err.Error(), "expired at") || !strings.Contains(err.Error(), "ask the fleet's admin") {
		t.Errorf("an expired JWT: %v", err)
	}
	if err != nil && strings.Contains(err.Error(), seed) {
		t.Errorf("the error shows the seed: %v", err)
	}
	b, _ := os.ReadFile(good)
	cut := filepath.Join(dir, "cut.creds")
	os.WriteFile(cut, b[:strings.Index(string(b), "NKEY Seed")], 0o600) // the JWT alone
	if _, err := LoadCreds(cut); err == nil || !strings.Contains(err.Error(), "without its user's nkey seed") {
		t.Errorf("a JWT without its seed: %v", err)
	}
	_, otherSeed := creds(t, tr, dir, "bob", tr.Account, time.Time{})
	mixed := filepath.Join(dir, "mixed.creds")
	os.WriteFile(mixed, []byte(strings.Replace(string(b), goodSeed, otherSeed, 1)), 0o600)
	if _, err := LoadCreds(mixed); err == nil || !strings.Contains(err.Error(), "not the key of the JWT's user alice") || strings.Contains(err.Error(), otherSeed) {
		t.Errorf("alice's JWT with bob's seed: %v", err)
	}
	gj, _ := nkeys.ParseDecoratedJWT(b)
	mangled := filepath.Join(dir, "mangled.creds")
	os.WriteFile(mangled, []byte(strings.Replace(string(b), gj, "not.a-jwt", 1)), 0o600)
	if _, err := LoadCreds(mangled); err == nil || !strings.Contains(err.Error(), "malformed") {
		t.Errorf("a mangled JWT: %v", err)
	}
}
