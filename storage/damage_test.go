package storage_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	. "github.com/wardenhq/warden/storage"
	"github.com/wardenhq/warden/storage/storagetest"
)

// damagedStore makes a real store with n receipts and closes it,
// returning its data dir and the path of warden.db.
func damagedStore(t testing.TB, n int) (string, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	return dir, storagetest.FillReceipts(t, dir, n)
}

// truncations of a store: to half its file size, to half the pages its
// newest meta says it has (bbolt grows the file ahead of them, so half
// the file may still hold every page in use), and to just before the
// receipts bucket's root page (which loadHead reads first).
func truncations(t testing.TB, path string) map[string]int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := map[string]int64{"half the file": fi.Size() / 2}
	db.View(func(tx *bolt.Tx) error {
		out["half the pages"] = tx.Size() / 2
		out["before the receipts root"] = int64(tx.Bucket([]byte("receipts")).Root()) * int64(db.Info().PageSize)
		return nil
	})
	return out
}

func wantDamaged(t *testing.T, err error, path string) *CorruptError {
	t.Helper()
	var ce *CorruptError
	if !errors.As(err, &ce) {
		t.Fatalf("want a *CorruptError, got %T %v", err, err)
	}
	msg := err.Error()
	for _, want := range []string{path, "backup", "mv "} {
		if !strings.Contains(msg, want) {
			t.Errorf("the message does not name %q: %s", want, msg)
		}
	}
	return ce
}

// A store truncated to half its size is refused at open with a
// CorruptError, before bbolt maps it (which faulted in loadHead).
func TestDamageTruncatedOpen(t *testing.T) {
	dir, path := damagedStore(t, 200)
	whole, _ := os.ReadFile(path)
	for name, size := range truncations(t, path) {
		t.Run(name, func(t *testing.T) {
			if err := os.WriteFile(path, whole[:size], 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Open(Options{Dir: dir})
			wantDamaged(t, err, path)
			if after, _ := os.ReadFile(path); string(after) != string(whole[:size]) {
				t.Error("open changed the damaged file")
			}
		})
	}
}

// A file with neither meta page valid is refused the same way.
func TestDamageNoValidMeta(t *testing.T) {
	dir, path := damagedStore(t, 1)
	f, _ := os.OpenFile(path, os.O_RDWR, 0)
	f.WriteAt([]byte{0, 0, 0, 0}, 16)
	f.WriteAt([]byte{0, 0, 0, 0}, 4096+16)
	f.Close()
	_, err := Open(Options{Dir: dir})
	wantDamaged(t, err, path)
}

// One byte at a leaf page's count, a page open never reads: Open answers
// without walking the file, and then every read of that page (verify,
// receipt searches) and every append returns a CorruptError, not
// "intact" and not a panic; so does doctor's Check. The same holds when
// the damage lands under an open store (the mapping sees it at once). 255
// panicked in verify's producer after the caller had printed "intact, 0
// receipts"; 20 faulted (SIGSEGV) there.
func TestDamageLeafCount(t *testing.T) {
	_, first := damagedStore(t, 200)
	whole, _ := os.ReadFile(first)
	pgid, ps := storagetest.ReceiptsLeaf(t, first)
	for _, to := range []byte{255, 20, 40} {
		t.Run(fmt.Sprint(to), func(t *testing.T) {
			// A store that panicked keeps its file (and lock) until the
			// process exits: each store has a data dir of its own.
			fresh := func() (string, string) {
				dir := filepath.Join(t.TempDir(), "data")
				os.Mkdir(dir, 0o700)
				path := filepath.Join(dir, DBFile)
				os.WriteFile(path, whole, 0o600)
				return dir, path
			}
			dir, path := fresh()
			storagetest.FlipLeafCountAt(t, path, pgid, ps, to)
			_, err := Check(dir, time.Second)
			wantDamaged(t, err, path)
			s, err := Open(Options{Dir: dir})
			if err != nil {
				t.Fatalf("open read the damaged page, which only a walk reaches: %v", err)
			}
			defer s.Close()
			wantDamaged(t, s.CheckTree(), path)
			readsFailDamaged(t, s, path)

			dir, path = fresh()
			s2, err := Open(Options{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			defer s2.Close()
			storagetest.FlipLeafCountAt(t, path, pgid, ps, to)
			readsFailDamaged(t, s2, path)
		})
	}
}

// A branch page pointing at itself: unbounded, bbolt's cursor descends
// through it until the stack overflows, a fatal error that kills the
// process (storage/third_party/bbolt/PATCHED.md). Open
// answers (it reads no branch of the receipts), and every read through
// the page is a CorruptError naming the loop.
func TestDamageBranchLoop(t *testing.T) {
	dir, path := damagedStore(t, 200)
	root := storagetest.LoopBranch(t, path)
	_, err := Check(dir, time.Second)
	wantDamaged(t, err, path)
	s, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.View(func(tx *Tx) error {
		_, err := tx.Receipts(ReceiptFilter{Kind: "test.fill"})
		return err
	})
	ce := wantDamaged(t, err, path)
	if !strings.Contains(ce.Error(), fmt.Sprintf("page %d", root)) {
		t.Errorf("the message does not name page %d: %v", root, ce)
	}
	readsFailDamaged(t, s, path)
}

// The walk Open leaves for later finds damage on its own: once it has
// run, writes fail with a CorruptError naming the page, before any read
// reached it.
func TestDamageFoundInBackground(t *testing.T) {
	defer SetTreeWalkDelay(0)()
	dir, path := damagedStore(t, 200)
	storagetest.FlipLeafCount(t, path, 40)
	s, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	<-BackgroundWalkDone(s)
	_, err = s.AppendReceipt(Draft{Kind: "test.after", Actor: "local:t"})
	wantDamaged(t, err, path)
}

// A sound store walks clean, in the background and on demand, and stays
// writable.
func TestCheckTreeSound(t *testing.T) {
	defer SetTreeWalkDelay(0)()
	dir, _ := damagedStore(t, 200)
	s, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	<-BackgroundWalkDone(s)
	if err := s.CheckTree(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendReceipt(Draft{Kind: "test.after", Actor: "local:t"}); err != nil {
		t.Fatal(err)
	}
}

// A store truncated under an open store: reads fault (SIGBUS) in the
// mapping, and come back as a CorruptError.
func TestDamageTruncatedUnderOpenStore(t *testing.T) {
	dir, path := damagedStore(t, 200)
	s, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := os.Truncate(path, 2*4096); err != nil {
		t.Fatal(err)
	}
	readsFailDamaged(t, s, path)
}

func readsFailDamaged(t *testing.T, s *Store, path string) {
	t.Helper()
	for _, verify := range []func() (Verification, error){s.VerifyReceipts, func() (Verification, error) { return s.VerifyReceiptsSince(0) }} {
		v, err := verify()
		if err == nil {
			if v.Intact {
				t.Errorf("verify reports intact on a damaged page: %+v", v)
			}
		} else {
			wantDamaged(t, err, path)
		}
	}
	for _, f := range []ReceiptFilter{{Kind: "test.fill"}, {Limit: 300}, {AfterSeq: 3}} {
		if err := s.View(func(tx *Tx) error {
			_, err := tx.Receipts(f)
			return err
		}); err != nil {
			wantDamaged(t, err, path)
		}
	}
	// Writes on the damaged page fail too, and the committer lives on.
	for i := 0; i < 2; i++ {
		if _, err := s.AppendReceipt(Draft{Kind: "test.after", Actor: "local:t"}); err != nil {
			var ce *CorruptError
			if !errors.As(err, &ce) {
				t.Errorf("append on a damaged store: %T %v", err, err)
			}
		}
	}
}

// A freelist page whose count claims more ids than its pages hold: bbolt
// copies the list at open with that length, and a count of 2^40 asked
// for 8 TiB, which no recover catches. Open refuses it from the page's
// header.
func TestDamageFreelistCount(t *testing.T) {
	dir, path := damagedStore(t, 20)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	ps := int64(le.Uint32(raw[16+8:]))
	newest := raw[16 : 16+64]
	if m1 := raw[ps+16 : ps+16+64]; le.Uint64(m1[48:]) > le.Uint64(newest[48:]) {
		newest = m1
	}
	at := int64(le.Uint64(newest[32:])) * ps
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var b [8]byte
	le.PutUint16(b[:], 0xFFFF)
	f.WriteAt(b[:2], at+10)
	le.PutUint64(b[:], 1<<40)
	f.WriteAt(b[:], at+16)
	f.Close()
	_, err = Open(Options{Dir: dir})
	ce := wantDamaged(t, err, path)
	if !strings.Contains(ce.Error(), "freelist") {
		t.Errorf("the message does not name the freelist: %v", ce)
	}
}
