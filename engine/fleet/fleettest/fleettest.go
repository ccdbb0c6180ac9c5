// Package fleettest gives the fleet's tests what a real fleet has and a
// test must make: a NATS operator/account trust chain with user creds
// files (JWT and seed) for a nats-server in operator mode, and a host
// store rewritten as root on a host could. Only tests import it.
package fleettest

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
	bolt "go.etcd.io/bbolt"

	"github.com/wardenhq/warden/storage"
)

// Trust is a NATS operator, its system account and a WARDEN account
// with JetStream, as `nsc` makes them.
type Trust struct {
	Operator, System, Account          nkeys.KeyPair
	OperatorJWT, SystemJWT, AccountJWT string
}

// NewTrust makes a fresh trust chain.
func NewTrust(t testing.TB) *Trust {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	tr := &Trust{}
	var err error
	tr.Operator, err = nkeys.CreateOperator()
	must(err)
	opPub, _ := tr.Operator.PublicKey()
	tr.OperatorJWT, err = jwt.NewOperatorClaims(opPub).Encode(tr.Operator)
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
		tok, err := ac.Encode(tr.Operator)
		must(err)
		return kp, tok
	}
	tr.System, tr.SystemJWT = account("SYS", false)
	tr.Account, tr.AccountJWT = account("WARDEN", true)
	return tr
}

// ServerConfig is a nats-server config in operator mode listening on
// addr, trusting the operator JWT in operatorFile (which it writes),
// with both accounts preloaded into a MEMORY resolver, and extra lines
// (the jetstream block).
func (tr *Trust) ServerConfig(t testing.TB, addr, operatorFile, extra string) string {
	t.Helper()
	if err := os.WriteFile(operatorFile, []byte(tr.OperatorJWT), 0o600); err != nil {
		t.Fatal(err)
	}
	sysPub, _ := tr.System.PublicKey()
	acctPub, _ := tr.Account.PublicKey()
	return fmt.Sprintf("listen: %s\noperator: %q\nsystem_account: %s\nresolver: MEMORY\nresolver_preload: {\n  %s: %q\n  %s: %q\n}\n%s\n",
		addr, operatorFile, sysPub, sysPub, tr.SystemJWT, acctPub, tr.AccountJWT, extra)
}

// Creds writes user name's creds file (JWT and seed, 0600) to path,
// signed by signer (the Account, or one the server does not know),
// expiring at exp (zero: never), with perms applied to its claims. It
// returns the seed, for tests that check it is never shown.
func (tr *Trust) Creds(t testing.TB, path, name string, signer nkeys.KeyPair, exp time.Time, perms func(*jwt.UserClaims)) string {
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
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return string(seed)
}

// RewriteReceipt edits receipt seq's summary in a closed store (the
// bbolt file at dbPath) and re-hashes the chain after it, as root on a
// host could: the host's own `receipts verify` then finds nothing, and
// only a witness of its earlier hashes can tell.
func RewriteReceipt(t testing.TB, dbPath string, seq uint64, summary string) {
	t.Helper()
	db, err := bolt.Open(dbPath, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("receipts"))
		if b == nil {
			return fmt.Errorf("no receipts bucket")
		}
		prev := ""
		c := b.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if len(k) != 8 {
				continue
			}
			var rc storage.Receipt
			if err := json.Unmarshal(v, &rc); err != nil {
				return err
			}
			if s := binary.BigEndian.Uint64(k); s < seq {
				prev = rc.Hash
				continue
			} else if s == seq {
				rc.Summary = summary
			} else {
				rc.Prev = prev
			}
			if rc.Hash, err = rc.ComputeHash(); err != nil {
				return err
			}
			prev = rc.Hash
			var nb bytes.Buffer
			enc := json.NewEncoder(&nb)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(rc); err != nil {
				return err
			}
			if err := b.Put(append([]byte(nil), k...), bytes.TrimSuffix(nb.Bytes(), []byte("\n"))); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Serve starts server (the nats-server binary) in operator mode on
// loopback with the config ServerConfig writes into dir, plus extra
// lines, and returns its URL once it accepts connections. The test's
// cleanup stops it.
func (tr *Trust) Serve(t testing.TB, server, dir, extra string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	conf := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(conf, []byte(tr.ServerConfig(t, addr, filepath.Join(dir, "operator.jwt"), extra)), 0o600); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "nats.log"))
	if err != nil {
		t.Fatal(err)
	}
	srv := exec.Command(server, "-c", conf)
	srv.Stdout, srv.Stderr = logf, logf
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait(); logf.Close() })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return "nats://" + addr
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(dir, "nats.log"))
			t.Fatalf("nats-server in operator mode did not come up on %s:\n%s", addr, b)
		}
	}
}
