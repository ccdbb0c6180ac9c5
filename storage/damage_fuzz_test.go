package storage_test

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	. "github.com/wardenhq/warden/storage"
	"github.com/wardenhq/warden/storage/storagetest"
)

// seedDir holds a small real store (store.db) and damaged copies of it,
// the seeds of FuzzOpenDamaged. WARDEN_WRITE_STORE_SEEDS=1 remakes them
// (TestWriteStoreSeeds).
const seedDir = "testdata/damaged"

// TestWriteStoreSeeds remakes the seed stores: a real store of 20
// receipts cut to the pages its meta counts (bbolt grows the file ahead
// of them), and copies cut to half, with a leaf count flipped (255 and
// 20), with a page leaked and with both meta pages' magic gone.
func TestWriteStoreSeeds(t *testing.T) {
	if os.Getenv("WARDEN_WRITE_STORE_SEEDS") != "1" {
		t.Skip("set WARDEN_WRITE_STORE_SEEDS=1 to remake " + seedDir)
	}
	dir := filepath.Join(t.TempDir(), "data")
	path := storagetest.FillReceipts(t, dir, 20)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var size int64
	db.View(func(tx *bolt.Tx) error { size = tx.Size(); return nil })
	db.Close()
	if err := os.Truncate(path, size+4096); err != nil { // one spare page, for LeakPage
		t.Fatal(err)
	}
	real, _ := os.ReadFile(path)
	variant := func(name string, damage func(string)) {
		os.WriteFile(path, real, 0o600)
		if damage != nil {
			damage(path)
		}
		b, _ := os.ReadFile(path)
		if err := os.WriteFile(filepath.Join(seedDir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(seedDir, 0o755)
	variant("store.db", nil)
	variant("half.db", func(p string) { os.Truncate(p, int64(len(real)/2)) })
	variant("leafcount255.db", func(p string) { storagetest.FlipLeafCount(t, p, 255) })
	variant("leafcount20.db", func(p string) { storagetest.FlipLeafCount(t, p, 20) })
	variant("leaked.db", func(p string) { storagetest.LeakPage(t, p) })
	variant("nometa.db", func(p string) {
		f, _ := os.OpenFile(p, os.O_RDWR, 0)
		f.WriteAt([]byte{0, 0, 0, 0}, 16)
		f.WriteAt([]byte{0, 0, 0, 0}, 4096+16)
		f.Close()
	})
}

// FuzzOpenDamaged opens damaged copies of a real store: Open returns a
// working store or an error, and reading it (verify, searches, an
// append) and doctor's Check return results or errors, never a panic or
// a fault. Its inputs are whole store files, so the fuzzer's default
// minimizing (60 s an input) stalls it: run it with
//
//	go test -run '^$' -fuzz FuzzOpenDamaged -fuzzminimizetime 1s ./storage/
//
// (about 30 execs a second on one core; 60 s found nothing).
func FuzzOpenDamaged(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join(seedDir, "*.db"))
	if len(seeds) == 0 {
		f.Fatalf("no seeds in %s (WARDEN_WRITE_STORE_SEEDS=1 go test -run TestWriteStoreSeeds)", seedDir)
	}
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	// The 1 MiB reserve every open wants, made once and linked into each
	// iteration's data dir.
	reserve := filepath.Join(f.TempDir(), ReserveFile)
	if err := os.WriteFile(reserve, make([]byte, ReserveSize), 0o600); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := filepath.Join(t.TempDir(), "data")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, DBFile)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(reserve, filepath.Join(dir, ReserveFile)); err != nil {
			t.Fatal(err)
		}
		Check(dir, 50*time.Millisecond)
		s, err := Open(Options{Dir: dir, LockTimeout: 50 * time.Millisecond, NoSync: true})
		if err != nil {
			return
		}
		defer s.Close()
		afterOpen := func(what string, err error) {
			var ce *CorruptError
			if err != nil && !errors.As(err, &ce) && !strings.Contains(err.Error(), "storage corrupt") {
				t.Logf("%s: %v", what, err) // not damage as such (a full page, a closed store): allowed
			}
		}
		_, err = s.VerifyReceipts()
		afterOpen("verify", err)
		for _, f := range []ReceiptFilter{{}, {Limit: 5}, {Kind: "test.", AfterSeq: 3}} {
			afterOpen("receipts", s.View(func(tx *Tx) error { _, err := tx.Receipts(f); return err }))
		}
		_, err = s.AppendReceipt(Draft{Kind: "test.fuzz", Actor: "local:t"})
		afterOpen("append", err)
	})
}

// TestStoreSeedsAreSmall keeps the seed corpus under 64 KiB a file, and
// store.db a store that opens and verifies intact.
func TestStoreSeedsAreSmall(t *testing.T) {
	seeds, _ := filepath.Glob(filepath.Join(seedDir, "*.db"))
	if len(seeds) < 5 {
		t.Fatalf("seeds: %v", seeds)
	}
	for _, p := range seeds {
		fi, _ := os.Stat(p)
		if fi.Size() >= 64<<10 {
			t.Errorf("%s is %d bytes", p, fi.Size())
		}
	}
	raw, _ := os.ReadFile(filepath.Join(seedDir, "store.db"))
	dir := filepath.Join(t.TempDir(), "data")
	os.Mkdir(dir, 0o700)
	os.WriteFile(filepath.Join(dir, DBFile), raw, 0o600)
	s, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v, err := s.VerifyReceipts(); err != nil || !v.Intact || v.Count != 20 {
		t.Errorf("store.db: %+v %v", v, err)
	}
	if binary.LittleEndian.Uint32(raw[16:]) != 0xED0CDAED {
		t.Error("store.db has no bbolt magic")
	}
}
