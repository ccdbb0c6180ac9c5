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
	pageSize       uint32
	root, freelist uint64
	pgid, txid     uint64
	valid          bool
	invalidBecause string
	offset         int64
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
// would fault inside bbolt, and a fault there kills the process. It reads
// a few fixed places (both meta pages, the heads of the root and freelist
// pages), whatever the file's size: damage deeper in the tree is found
// where it is read (guarded turns bbolt's panic or fault into a
// *CorruptError) and by the walk of CheckTree. With walk, or when the
// file has no stored freelist (bbolt then rebuilds it by walking every
// page on a goroutine of its own, where a damaged page is a panic no
// recover can reach), the page tree is walked too. An empty file is a new
// store (bbolt writes its first pages).
func checkFile(path string, walk bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	newest, err := newestMeta(f, path)
	if err != nil || newest == nil {
		return err
	}
	if err := checkHeads(f, newest); err != nil {
		return &CorruptError{Path: path, Err: err}
	}
	if walk || newest.freelist == noFreelist {
		if err := walkPages(f, newest, nil); err != nil {
			return &CorruptError{Path: path, Err: err}
		}
	}
	return nil
}

// newestMeta is the valid meta page of the file with the highest txid,
// held to the file's size; nil for an empty file.
func newestMeta(f *os.File, path string) (*diskMeta, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := fi.Size()
	if size == 0 {
		return nil, nil
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
		return nil, &CorruptError{Path: path, Err: fmt.Errorf("no valid bbolt meta page (%s)", strings.Join(why, "; "))}
	}
	ps := uint64(newest.pageSize)
	if newest.pgid < 2 || newest.pgid > uint64(1)<<48/ps {
		return nil, &CorruptError{Path: path, Err: fmt.Errorf("its newest meta page (txid %d) counts %d pages", newest.txid, newest.pgid)}
	}
	if need := newest.pgid * ps; uint64(size) < need {
		return nil, &CorruptError{Path: path, Err: fmt.Errorf("the file is %d bytes but its newest meta page (txid %d) counts %d pages of %d bytes (%d bytes): it was truncated", size, newest.txid, newest.pgid, ps, need)}
	}
	if newest.root < 2 || newest.root >= newest.pgid || newest.freelist != noFreelist && (newest.freelist < 2 || newest.freelist >= newest.pgid) {
		return nil, &CorruptError{Path: path, Err: fmt.Errorf("its newest meta page (txid %d) points past its %d pages (root %d, freelist %d)", newest.txid, newest.pgid, newest.root, newest.freelist)}
	}
	return newest, nil
}

// checkHeads reads the headers of the two pages bbolt reads at open, the
// root's and the freelist's: each must name itself and be of its kind,
// and the freelist's ids must fit in its pages. bbolt copies the freelist
// with a length read from that page: a damaged count would have it ask
// for more memory than there is, which no recover catches.
func checkHeads(f *os.File, m *diskMeta) error {
	le := binary.LittleEndian
	ps := uint64(m.pageSize)
	hdr := make([]byte, pageHeaderSize+8)
	head := func(id uint64) (flags uint16, count, overflow uint64, err error) {
		if _, err := f.ReadAt(hdr, int64(id*ps)); err != nil {
			return 0, 0, 0, fmt.Errorf("page %d: %v", id, err)
		}
		if got := le.Uint64(hdr); got != id {
			return 0, 0, 0, fmt.Errorf("page %d names itself page %d", id, got)
		}
		return le.Uint16(hdr[8:]), uint64(le.Uint16(hdr[10:])), uint64(le.Uint32(hdr[12:])), nil
	}
	flags, _, _, err := head(m.root)
	if err != nil {
		return err
	}
	if flags != branchPage && flags != leafPage {
		return fmt.Errorf("the root page %d is neither a branch nor a leaf (flags %#x)", m.root, flags)
	}
	if m.freelist == noFreelist {
		return nil
	}
	flags, count, overflow, err := head(m.freelist)
	if err != nil {
		return err
	}
	if flags != freelistPage {
		return fmt.Errorf("the freelist page %d is not a freelist (flags %#x)", m.freelist, flags)
	}
	if m.freelist+overflow >= m.pgid {
		return fmt.Errorf("the freelist page %d runs %d pages past the end of the file's %d", m.freelist, overflow, m.pgid)
	}
	// The ids the pages hold; a count of 0xFFFF is bbolt's mark for a
	// count stored in the first slot instead.
	room := ((overflow+1)*ps - pageHeaderSize) / 8
	if count == 0xFFFF {
		count = le.Uint64(hdr[pageHeaderSize:])
		room-- // that slot
	}
	if count > room {
		return fmt.Errorf("the freelist page %d counts %d ids, more than its %d pages hold", m.freelist, count, overflow+1)
	}
	return nil
}

// treeWalkDelay is how long after Open the background walk of the page
// tree starts: a CLI verb answers and exits well within it, so it never
// pays for a walk it would not see the end of; a console or serve that
// stays is walked once.
var treeWalkDelay = 2 * time.Second

// walkInBackground walks the page tree once treeWalkDelay has passed,
// unless the store closes first.
func (s *Store) walkInBackground() {
	defer s.wg.Done()
	defer close(s.walked)
	t := time.NewTimer(treeWalkDelay)
	defer t.Stop()
	select {
	case <-t.C:
		s.CheckTree()
	case <-s.stopWalk:
	}
}

// errWalkStopped ends a walk the store's Close interrupted.
var errWalkStopped = errors.New("the store closed during the walk")

// CheckTree walks the page tree of the open store from the file's own
// bytes (read, not mapped: the walk itself cannot fault), every page in
// use once, which Open does not do before a verb answers. It returns a
// *CorruptError naming the first damaged page, and from then on writes
// fail with it (a commit that copies a damaged page spreads the damage);
// reads go on, and a read of the damaged page fails on its own. Receipt
// verification runs it first; Open runs it in the background.
func (s *Store) CheckTree() error {
	if ce := s.damage.Load(); ce != nil {
		return ce
	}
	path := s.db.Path()
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	err = walkSettled(f, path, s.stopWalk, func(walk func(*diskMeta) error) error {
		// The last try holds a read transaction, so that no commit reuses
		// the pages it reads; it stalls a commit that must grow the map,
		// which is why it comes last.
		if s.broken.Load() != nil {
			return nil // bbolt may hold its locks for good
		}
		return s.noteBroken(guarded(path, func() error {
			return s.db.View(func(tx *bolt.Tx) error {
				m, err := newestMeta(f, path)
				if err != nil || m == nil || m.txid != uint64(tx.ID()) {
					return err // two commits since it began: nothing to conclude
				}
				return walk(m)
			})
		}))
	})
	if errors.Is(err, errWalkStopped) {
		return nil
	}
	var ce *CorruptError
	if errors.As(err, &ce) {
		s.damage.CompareAndSwap(nil, ce)
	}
	return err
}

// walkSettled walks the tree of the file's newest meta page until a walk
// either passes or fails with no commit between its start and end (a
// commit may reuse the pages of the tree before it, and a walk that read
// those saw no tree at all). After a few tries spoiled that way it walks
// inside locked, which holds commits off the pages.
func walkSettled(f *os.File, path string, stop <-chan struct{}, locked func(func(*diskMeta) error) error) error {
	walk := func(m *diskMeta) error {
		if err := walkPages(f, m, stop); err != nil {
			if errors.Is(err, errWalkStopped) {
				return err
			}
			return &CorruptError{Path: path, Err: err}
		}
		return nil
	}
	for try := 0; try < 3; try++ {
		m, err := newestMeta(f, path)
		if err != nil || m == nil {
			return err
		}
		err = walk(m)
		if err == nil || errors.Is(err, errWalkStopped) {
			return err
		}
		if now, nerr := newestMeta(f, path); nerr == nil && now != nil && now.txid == m.txid {
			return err
		}
	}
	return locked(walk)
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
	return &CorruptError{Path: path, Err: fmt.Errorf("reading it failed: %v", r), panicked: true}
}

// noteBroken remembers a panic or fault inside bbolt. bbolt may have
// been holding its locks when it happened (a fault while it begins a
// transaction leaves them held for good), so from then on writes fail
// with this error without entering bbolt, and Close leaves the file to
// the process's exit rather than wait for a lock that never frees.
func (s *Store) noteBroken(err error) error {
	var ce *CorruptError
	if errors.As(err, &ce) && ce.panicked {
		s.broken.CompareAndSwap(nil, ce)
	}
	return err
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
	if err := checkFile(path, true); err != nil {
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
			// A damaged branch page can point back up its own tree, and a
			// bucket into itself: bbolt would walk either for ever. Every
			// record takes a 16-byte element of some page, and warden
			// nests buckets two deep, so more records than the file has
			// room for, or deeper nesting, is a loop.
			maxKeys := int(tx.Size() / 16)
			seen := map[uint64]bool{}
			var walk func(b *bolt.Bucket, depth int) error
			walk = func(b *bolt.Bucket, depth int) error {
				if root := uint64(b.Root()); root != 0 {
					if seen[root] || depth > 8 {
						return &CorruptError{Path: path, Err: fmt.Errorf("page %d is the root of two buckets (or of one inside itself)", root)}
					}
					seen[root] = true
				}
				return b.ForEach(func(k, v []byte) error {
					if res.Keys++; res.Keys > maxKeys {
						return &CorruptError{Path: path, Err: fmt.Errorf("its pages hold more than the %d records they have room for: a page points back into its own tree", maxKeys)}
					}
					if v == nil {
						if sub := b.Bucket(k); sub != nil {
							return walk(sub, depth+1)
						}
					}
					return nil
				})
			}
			if err := tx.ForEach(func(_ []byte, b *bolt.Bucket) error { return walk(b, 0) }); err != nil {
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

// bbolt page flags and element sizes.
const (
	branchPage     = 0x01
	leafPage       = 0x02
	freelistPage   = 0x10
	bucketLeafFlag = 0x01
	elementSize    = 16
	maxPageDepth   = 64
)

// walkPages checks the page tree the newest meta page points at, from
// the file's own bytes (read, not mapped): every page inside the high
// water mark, naming itself, a branch or a leaf whose elements fit in it,
// and reached once. bbolt trusts all of this: a branch page pointing back
// up its tree sends its cursor round for ever, and an element past its
// page into memory that is not there. It costs one read of every page in
// use. It returns errWalkStopped once stop (when not nil) is closed.
func walkPages(f *os.File, m *diskMeta, stop <-chan struct{}) error {
	ps := int64(m.pageSize)
	seen := make(map[uint64]bool)
	var page func(id uint64, depth int) error
	var elems func(id uint64, p []byte, depth int) error
	page = func(id uint64, depth int) error {
		select {
		case <-stop:
			return errWalkStopped
		default:
		}
		if id < 2 || id >= m.pgid {
			return fmt.Errorf("page %d is outside the %d pages of the file", id, m.pgid)
		}
		if seen[id] || depth > maxPageDepth {
			return fmt.Errorf("page %d is reached twice: a page points back into the tree", id)
		}
		hdr := make([]byte, pageHeaderSize)
		if _, err := f.ReadAt(hdr, int64(id)*ps); err != nil {
			return fmt.Errorf("page %d: %v", id, err)
		}
		le := binary.LittleEndian
		if got := le.Uint64(hdr); got != id {
			return fmt.Errorf("page %d names itself page %d", id, got)
		}
		overflow := uint64(le.Uint32(hdr[12:]))
		if id+overflow >= m.pgid {
			return fmt.Errorf("page %d runs %d pages past the end of the file's %d", id, overflow, m.pgid)
		}
		for i := id; i <= id+overflow; i++ {
			seen[i] = true
		}
		p := make([]byte, int64(overflow+1)*ps)
		if _, err := f.ReadAt(p, int64(id)*ps); err != nil {
			return fmt.Errorf("page %d: %v", id, err)
		}
		return elems(id, p, depth)
	}
	elems = func(id uint64, p []byte, depth int) error {
		le := binary.LittleEndian
		if len(p) < pageHeaderSize {
			return fmt.Errorf("an inline page in page %d is %d bytes", id, len(p))
		}
		flags, count := le.Uint16(p[8:]), int(le.Uint16(p[10:]))
		if pageHeaderSize+count*elementSize > len(p) {
			return fmt.Errorf("page %d counts %d elements, more than its %d bytes hold", id, count, len(p))
		}
		if flags == branchPage && count == 0 { // bbolt's cursor would read element 0 anyway
			return fmt.Errorf("page %d is a branch with no elements", id)
		}
		for i := 0; i < count; i++ {
			at := pageHeaderSize + i*elementSize
			e := p[at : at+elementSize]
			switch flags {
			case branchPage:
				pos, ksize := int(le.Uint32(e)), int(le.Uint32(e[4:]))
				if at+pos+ksize > len(p) || pos < 0 {
					return fmt.Errorf("page %d: element %d's key lies past the page", id, i)
				}
				if err := page(le.Uint64(e[8:]), depth+1); err != nil {
					return err
				}
			case leafPage:
				eflags, pos, ksize, vsize := le.Uint32(e), int64(le.Uint32(e[4:])), int64(le.Uint32(e[8:])), int64(le.Uint32(e[12:]))
				end := int64(at) + pos + ksize + vsize
				if end > int64(len(p)) {
					return fmt.Errorf("page %d: element %d lies past the page", id, i)
				}
				if eflags&bucketLeafFlag == 0 {
					continue
				}
				v := p[int64(at)+pos+ksize : end]
				if len(v) < 16 {
					return fmt.Errorf("page %d: element %d is a bucket of %d bytes", id, i, len(v))
				}
				var err error
				if root := le.Uint64(v); root != 0 {
					err = page(root, depth+1)
				} else if inl := v[16:]; len(inl) >= pageHeaderSize && le.Uint16(inl[8:]) != leafPage {
					// bbolt writes an inline bucket's page as a leaf only, and
					// answers every child of it with that page itself: a
					// branch flag there sends its cursor down for ever.
					err = fmt.Errorf("page %d: element %d is an inline bucket whose page is not a leaf (flags %#x)", id, i, le.Uint16(inl[8:]))
				} else if depth < maxPageDepth {
					err = elems(id, inl, depth+1) // an inline bucket: its page is in the value
				} else {
					err = fmt.Errorf("page %d: inline buckets nest deeper than %d", id, maxPageDepth)
				}
				if err != nil {
					return err
				}
			default:
				return fmt.Errorf("page %d is neither a branch nor a leaf (flags %#x) but is in the tree", id, flags)
			}
		}
		return nil
	}
	if err := page(m.root, 0); err != nil {
		return err
	}
	if m.freelist != noFreelist && seen[m.freelist] {
		return fmt.Errorf("the freelist page %d is also in the tree", m.freelist)
	}
	return nil
}
