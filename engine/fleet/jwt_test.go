package fleet

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

// jwtTrust is a NATS operator and an account with JetStream, as `nsc`
// makes them, for a server in operator (JWT) mode.
type jwtTrust struct {
	op, sys, acct          nkeys.KeyPair
	opJWT, sysJWT, acctJWT string
}

func newJWTTrust(t *testing.T) *jwtTrust {
	t.Helper()
	tr := &jwtTrust{}
	var err error
	must := func(err error) {
		if err != nil {
			t.Helper()
			t.Fatal(err)
		}
	}
	tr.op, err = nkeys.CreateOperator()
	must(err)
	opPub, _ := tr.op.PublicKey()
	tr.opJWT, err = jwt.NewOperatorClaims(opPub).Encode(tr.op)
	must(err)
	account := func(name string, js bool) (nkeys.KeyPair, string) {
		kp, err := nkeys.CreateAccount()
		must(err)
		pub, _ := kp.PublicKey()
		ac := jwt.NewAccountClaims(pub)
		ac.Name = name
		if js {
			ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
		}
		tok, err := ac.Encode(tr.op)
		must(err)
		return kp, tok
	}
	tr.sys, tr.sysJWT = account("SYS", false)
	tr.acct, tr.acctJWT = account("WARDEN", true)
	return tr
}

// user writes NAME's creds file (JWT and seed, 0600) into dir, signed by
// signer (the account, or another one the server does not know); perms
// adds its subject permissions. It returns the path and the seed.
func (tr *jwtTrust) user(t *testing.T, dir, name string, signer nkeys.KeyPair, exp time.Time, perms func(*jwt.UserClaims)) (string, string) {
	t.Helper()
	kp, _ := nkeys.CreateUser()
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	uc := jwt.NewUserClaims(pub)
	uc.Name = name
	if !exp.IsZero() {
		uc.Expires = exp.Unix()
	}
	if perms != nil {
		perms(uc)
	}
	tok, err := uc.Encode(signer)
	if err != nil {
		t.Fatal(err)
	}
	b, err := jwt.FormatUserConfig(tok, seed)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name+".creds")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p, string(seed)
}

// TestLoadCredsJWT: a creds file that cannot log in is refused before
// any dial, saying why and what to do, and never showing its seed.
func TestLoadCredsJWT(t *testing.T) {
	dir := t.TempDir()
	tr := newJWTTrust(t)
	good, goodSeed := tr.user(t, dir, "alice", tr.acct, time.Now().Add(time.Hour), nil)
	c, err := LoadCreds(good)
	if err != nil || !c.jwt || c.name() != "alice" {
		t.Fatalf("a good creds file: %+v %v", c, err)
	}
	expired, seed := tr.user(t, dir, "old", tr.acct, time.Now().Add(-time.Hour), nil)
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
	_, otherSeed := tr.user(t, dir, "bob", tr.acct, time.Time{}, nil)
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
