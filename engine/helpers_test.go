package engine

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/wardenhq/warden/storage"
)

const testActor Actor = "local:test"

// newDataDir returns a data dir path that does not exist yet.
func newDataDir(t testing.TB) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "data")
}

// openEngine opens an engine on dir and closes it when the test ends.
func openEngine(t testing.TB, opts Options) *Engine {
	t.Helper()
	if opts.DataDir == "" {
		opts.DataDir = newDataDir(t)
	}
	e, err := Open(opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", opts.DataDir, err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func allReceipts(t testing.TB, e *Engine) []Receipt {
	t.Helper()
	rs, err := e.Receipts(ReceiptFilter{})
	if err != nil {
		t.Fatalf("Receipts: %v", err)
	}
	return rs
}

// flipSummaryByte flips the low bit of the first byte of receipt seq's
// summary with plain bbolt (the JSON stays valid; the hash no longer
// matches). The store must be closed.
func flipSummaryByte(t testing.TB, dir string, seq uint64) {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dir, storage.DBFile), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	key := []byte{0, 0, 0, 0, 0, 0, 0, 0}
	for i := 7; i >= 0; i-- {
		key[i] = byte(seq >> (8 * (7 - i)))
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("receipts"))
		raw := append([]byte(nil), b.Get(key)...)
		i := bytes.Index(raw, []byte(`"summary":"`))
		if i < 0 {
			t.Fatalf("receipt %d has no summary: %s", seq, raw)
		}
		c := raw[i+11]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			t.Fatalf("receipt %d summary does not start with a letter: %s", seq, raw)
		}
		raw[i+11] = c ^ 0x01
		return b.Put(key, raw)
	}); err != nil {
		t.Fatal(err)
	}
}
