package storagetest

import (
	"encoding/binary"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/wardenhq/warden/storage"
)

// FillReceipts makes the store in dir (creating it) hold n receipts of
// about 300 bytes, then closes it: a real store to damage.
func FillReceipts(t testing.TB, dir string, n int) string {
	t.Helper()
	s, err := storage.Open(storage.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if _, err := s.AppendReceipt(storage.Draft{Kind: "test.fill", Actor: "local:t", Subject: "s", Summary: strings.Repeat("x", 200)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, storage.DBFile)
}

// ReceiptsLeaf is the page id of the first leaf page of the receipts
// bucket of the closed store at path, and the page size.
func ReceiptsLeaf(t testing.TB, path string) (pgid uint64, pageSize int) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	pageSize = db.Info().PageSize
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	db.View(func(tx *bolt.Tx) error {
		pgid = uint64(tx.Bucket([]byte("receipts")).Root())
		if pgid == 0 {
			t.Fatal("receipts bucket is inline: append more receipts")
		}
		for {
			p, err := tx.Page(int(pgid))
			if err != nil || p == nil {
				t.Fatalf("page %d: %v", pgid, err)
			}
			if p.Type == "leaf" {
				return nil
			}
			// The first branch element (pos, ksize uint32; pgid uint64)
			// follows the 16-byte page header.
			off := int(pgid)*pageSize + 16
			pgid = binary.LittleEndian.Uint64(raw[off+8 : off+16])
		}
	})
	return pgid, pageSize
}

// FlipLeafCount sets the low byte of the element count (the uint16 at 10,
// little-endian) of the first receipts leaf page of the closed store at
// path. 255 sent verify's producer out of bounds (a panic), 20 into
// unmapped memory (a fault).
func FlipLeafCount(t testing.TB, path string, to byte) {
	t.Helper()
	pgid, ps := ReceiptsLeaf(t, path)
	FlipLeafCountAt(t, path, pgid, ps, to)
}

// FlipLeafCountAt is FlipLeafCount on a page found before (with
// ReceiptsLeaf): the store may be open, and then its mapping sees the
// change at once, as it would a disk's damage under a running serve.
func FlipLeafCountAt(t testing.TB, path string, pgid uint64, ps int, to byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte{to}, int64(pgid)*int64(ps)+10); err != nil {
		t.Fatal(err)
	}
}

// LeakPage raises the high water mark of the closed store's newest meta
// page by one (and re-sums it), so one page below it is neither
// reachable nor free: damage only bbolt's consistency check sees, since
// every record still reads. The file must already be one page longer
// than the pages in use, as bbolt leaves it.
func LeakPage(t testing.TB, path string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	ps := int(le.Uint32(raw[16+8:]))
	meta := func(i int) []byte { return raw[i*ps+16 : i*ps+16+64] }
	newest := meta(0)
	if le.Uint64(meta(1)[48:]) > le.Uint64(newest[48:]) {
		newest = meta(1)
	}
	pgid := le.Uint64(newest[40:]) + 1
	if uint64(len(raw)) < pgid*uint64(ps) {
		t.Fatalf("the file has no page to spare above %d", pgid-1)
	}
	le.PutUint64(newest[40:], pgid)
	h := fnv.New64a()
	h.Write(newest[:56])
	le.PutUint64(newest[56:], h.Sum64())
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
}

// LoopBranch points the first element of the receipts bucket's root page
// (a branch: the store must hold enough receipts) of the closed store at
// path back at that page itself, so bbolt's cursor, which trusts the
// tree, would descend through it for ever. It returns the page's id.
func LoopBranch(t testing.TB, path string) uint64 {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ps := db.Info().PageSize
	var root uint64
	db.View(func(tx *bolt.Tx) error {
		root = uint64(tx.Bucket([]byte("receipts")).Root())
		if p, err := tx.Page(int(root)); err != nil || p == nil || p.Type != "branch" {
			t.Fatalf("the receipts root %d is not a branch page (%v): append more receipts", root, err)
		}
		return nil
	})
	db.Close()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], root)
	// The first branch element (pos, ksize uint32; pgid uint64) follows
	// the 16-byte page header.
	if _, err := f.WriteAt(b[:], int64(root)*int64(ps)+16+8); err != nil {
		t.Fatal(err)
	}
	return root
}
