package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"runtime/debug"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// bbolt's on-disk meta page (go.etcd.io/bbolt/internal/common): a 16-byte
// page header (id, flags, count, overflow), then magic, version,
// pageSize, flags (uint32 each), the root bucket (root pgid, sequence),
// the freelist pgid, pgid (the high water mark: pages [0, pgid) exist),
// txid and an FNV-64a checksum of the meta before the checksum field.
const (
	boltMagic      = 0xED0CDAED
	boltVersion    = 2
	pageHeaderSize = 16
	metaSize       = 64
	metaSumOffset  = 56
	noFreelist     = ^uint64(0)
)

type diskMeta struct {
	pageSize         uint32
	root, freelist   uint64
	pgid, txid       uint64
	valid            bool
	invalidBecause   string
	offset, fileSize int64
}

func parseMeta(b []byte) diskMeta {
	m := b[pageHeaderSize:]
	le := binary.LittleEndian
	d := diskMeta{pageSize: le.Uint32(m[8:]), root: le.Uint64(m[16:]), freelist: le.Uint64(m[32:]),
		pgid: le.Uint64(m[40:]), txid: le.Uint64(m[48:])}
	h := fnv.New64a()
	h.Write(m[:metaSumOffset])
	switch {
	case le.Uint32(m[0:]) != boltMagic:
		d.invalidBecause = "no bbolt magic"
	case le.Uint32(m[4:]) != boltVersion:
		d.invalidBecause = fmt.Sprintf("bbolt format version %d, not %d", le.Uint32(m[4:]), boltVersion)
	case le.Uint64(m[metaSumOffset:]) != h.Sum64():
		d.invalidBecause = "checksum mismatch"
	case d.pageSize < 512 || d.pageSize&(d.pageSize-1) != 0:
		d.invalidBecause = fmt.Sprintf("page size %d", d.pageSize)
	default:
		d.valid = true
	}
	return d
}

// checkFile holds warden.db to what its own meta pages say, before bbolt
// maps it: a file shorter than its pages, or with no valid meta page,
// would fault inside bbolt, and a fault kills the process. An empty file
// is a new store (bbolt writes its first pages).
func checkFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	if size == 0 {
		return nil
	}
	read := func(off int64) (diskMeta, bool) {
		buf := make([]byte, pageHeaderSize+metaSize)
		if n, _ := f.ReadAt(buf, off); n != len(buf) {
			return diskMeta{}, false
		}
		d := parseMeta(buf)
		d.offset = off
		return d, true
	}
	var metas []diskMeta
	m0, ok0 := read(0)
	if ok0 {
		metas = append(metas, m0)
	}
	// The second meta page sits one page in: at meta 0's page size, or,
	// with meta 0 unreadable, at whichever size bbolt would try.
	if ok0 && m0.valid {
		if m1, ok := read(int64(m0.pageSize)); ok {
			metas = append(metas, m1)
		}
	} else {
		for ps := int64(1024); ps <= 16<<20 && ps < size; ps <<= 1 {
			if m1, ok := read(ps); ok && m1.valid && int64(m1.pageSize) == ps {
				metas = append(metas, m1)
				break
			}
		}
	}
	var newest *diskMeta
	var why []string
	for i := range metas {
		m := &metas[i]
		if !m.valid {
			why = append(why, fmt.Sprintf("meta page at offset %d: %s", m.offset, m.invalidBecause))
			continue
		}
		if newest == nil || m.txid > newest.txid {
			newest = m
		}
	}
	if newest == nil {
		if len(why) == 0 {
			why = append(why, fmt.Sprintf("the file is %d bytes, too short for a meta page", size))
		}
		return &CorruptError{Path: path, Err: fmt.Errorf("no valid bbolt meta page (%s)", strings.Join(why, "; "))}
	}
	ps := uint64(newest.pageSize)
	if newest.pgid < 2 || newest.pgid > uint64(1)<<48/ps {
		return &CorruptError{Path: path, Err: fmt.Errorf("its newest meta page (txid %d) counts %d pages", newest.txid, newest.pgid)}
	}
	if need := newest.pgid * ps; uint64(size) < need {
		return &CorruptError{Path: path, Err: fmt.Errorf("the file is %d bytes but its newest meta page (txid %d) counts %d pages of %d bytes (%d bytes): it was truncated", size, newest.txid, newest.pgid, ps, need)}
	}
	if newest.root < 2 || newest.root >= newest.pgid || newest.freelist != noFreelist && (newest.freelist < 2 || newest.freelist >= newest.pgid) {
		return &CorruptError{Path: path, Err: fmt.Errorf("its newest meta page (txid %d) points past its %d pages (root %d, freelist %d)", newest.txid, newest.pgid, newest.root, newest.freelist)}
	}
	return nil
}

// guarded runs fn, which reads the mapped store, and turns a panic or a
// memory fault (bbolt follows offsets read from the file, so a damaged
// page sends it out of bounds) into a *CorruptError naming path. Faults
// become panics only on this goroutine, and only while fn runs.
func guarded(path string, fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = damaged(path, r)
		}
	}()
	return fn()
}

func damaged(path string, r any) error {
	return &CorruptError{Path: path, Err: fmt.Errorf("reading it failed: %v", r)}
}

// CheckResult is what Check did: how long it took, how many records it
// walked, and bbolt's first findings.
type CheckResult struct {
	Took     time.Duration
	Keys     int // records walked
	Problems []string
}

// maxCheckProblems bounds how many of bbolt's findings Check keeps.
const maxCheckProblems = 5

// Check is doctor's look at warden.db in dir while no process holds it:
// the file against its meta pages, a walk of every record (guarded), then
// bbolt's consistency check (tx.Check: every page reachable or free,
// none twice, keys in order), in a read-only open that changes nothing.
// A missing or empty file passes (the next open creates it). It returns
// a *LockedError when another process holds the file, and a
// *CorruptError naming what is wrong.
func Check(dir string, lockTimeout time.Duration) (CheckResult, error) {
	start := time.Now()
	var res CheckResult
	path := dir + string(os.PathSeparator) + DBFile
	if fi, err := os.Stat(path); errors.Is(err, os.ErrNotExist) || err == nil && fi.Size() == 0 {
		return res, nil
	}
	if err := checkFile(path); err != nil {
		return res, err
	}
	var db *bolt.DB
	err := guarded(path, func() (err error) {
		db, err = bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: lockTimeout})
		return err
	})
	if err != nil {
		if errors.Is(err, bolterrors.ErrTimeout) {
			return res, &LockedError{Dir: dir, PID: readPID(dir)}
		}
		var ce *CorruptError
		if errors.As(err, &ce) {
			return res, err
		}
		return res, &CorruptError{Path: path, Err: err}
	}
	defer db.Close()
	err = guarded(path, func() error {
		return db.View(func(tx *bolt.Tx) error {
			var walk func(b *bolt.Bucket) error
			walk = func(b *bolt.Bucket) error {
				return b.ForEach(func(k, v []byte) error {
					res.Keys++
					if v == nil {
						if sub := b.Bucket(k); sub != nil {
							return walk(sub)
						}
					}
					return nil
				})
			}
			if err := tx.ForEach(func(_ []byte, b *bolt.Bucket) error { return walk(b) }); err != nil {
				return err
			}
			for err := range tx.Check() {
				if len(res.Problems) < maxCheckProblems {
					res.Problems = append(res.Problems, err.Error())
				}
			}
			return nil
		})
	})
	res.Took = time.Since(start)
	if err != nil {
		return res, err
	}
	if len(res.Problems) > 0 {
		return res, &CorruptError{Path: path, Err: fmt.Errorf("bbolt's consistency check: %s", strings.Join(res.Problems, "; "))}
	}
	return res, nil
}
