// Package storage is warden's single source of truth: one bbolt file in a
// private data dir, with strict codecs for every record, an append-only
// hash-chained receipt log, sealed secrets and per-run stream chunks.
//
// Invariants:
//   - Only one process opens a data dir. bbolt's flock is the guarantee;
//     warden.pid only lets a second process name the holder, so a full
//     disk that refuses the pid file does not lock the operator out (the
//     store opens without one, and a second process is told to find the
//     holder with fuser instead).
//   - Every value read back goes through decodeRecord; nothing is defaulted.
//   - Every write goes through the committer, which folds concurrent writers
//     into one fsync'd transaction (group commit).
package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// SchemaVersion is the schema this build writes and the newest it reads.
// Older schemas are migrated at open (see migrate).
const SchemaVersion = 3

// File names inside the data dir.
const (
	DBFile      = "warden.db"
	PIDFile     = "warden.pid"
	SealKeyFile = "seal.key"
)

// noFreelistSync is bbolt's choice between writing the freelist with every
// commit (false) and rebuilding it at open by walking every page (true).
// BenchmarkFreelist measures both: see its comment for the figures.
//
// Measured on a store of 10k runs (BenchmarkFreelist, same run): open
// 31-40 ms scanning against 5.3 ms reading the stored list; an fsync'd
// one-receipt commit 1.9-2.8 ms against 2.5-3.9 ms writing the list. Every
// detached CLI verb and console pays the open, and the scan grows with the
// file; appends are group-committed under load, so the stored list is the
// better trade.
var noFreelistSync = false

// Options configure Open.
type Options struct {
	Dir string
	// LockTimeout bounds the wait for another process's lock (default 1s).
	LockTimeout time.Duration
	// NoSync skips fsync; only for benchmarks of the codec path.
	NoSync bool
	// OnCommit, when set, is called by the committer after every commit
	// with the receipts it appended, in seq order. It must not block: it
	// runs on the commit path.
	OnCommit func([]Receipt)
}

// Store is an open data dir.
type Store struct {
	dir  string
	db   *bolt.DB
	seal *sealer

	commits  chan *commitOp
	wg       sync.WaitGroup
	onCommit func([]Receipt)

	mu     sync.RWMutex // guards closed and head against Close
	closed bool
	head   chainHead // last committed receipt; only the committer writes it

	headErr error // set at Open when the last receipt is corrupt; appends fail with it

	noPID error // why warden.pid could not be written (disk full), or nil

	reserveMu sync.Mutex // one release of the reserve at a time

	broken atomic.Pointer[CorruptError] // set by noteBroken: bbolt panicked or faulted
	damage atomic.Pointer[CorruptError] // set by CheckTree: a damaged page; writes fail with it

	stopWalk chan struct{} // closed by Close: ends the background walk
	walked   chan struct{} // closed when the background walk has ended

	runIDs runIDs

	configGen atomic.Uint64 // ConfigGeneration
}

// ConfigGeneration moves after every commit that wrote a module's config
// (a set or a delete). A cache of config read at generation g is current
// while ConfigGeneration still returns g, provided g was read before the
// config was: a write that lands after the read moves it, whichever of
// the two finished first.
func (s *Store) ConfigGeneration() uint64 { return s.configGen.Load() }

func (s *Store) configChanged() { s.configGen.Add(1) }

// Open opens (creating if needed) the data dir and its store, holding both
// to the policy of docs/operating.md.
func Open(opts Options) (*Store, error) {
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, err
	}
	if err := EnsureDir(dir); err != nil {
		return nil, err
	}
	dbPath := filepath.Join(dir, DBFile)
	if err := prepareDBFile(dbPath); err != nil {
		return nil, err
	}
	timeout := opts.LockTimeout
	if timeout <= 0 {
		timeout = time.Second
	}
	// bbolt trusts the file's meta pages and maps it: a truncated file
	// faults there, which no recover can catch. Check first (a few fixed
	// reads, whatever the size; the page tree is walked after Open
	// returns, see CheckTree).
	if err := checkFile(dbPath, false); err != nil {
		return nil, err
	}
	var db *bolt.DB
	err = guarded(dbPath, func() (err error) {
		db, err = bolt.Open(dbPath, 0o600, &bolt.Options{Timeout: timeout, NoSync: opts.NoSync, NoFreelistSync: noFreelistSync, FreelistType: bolt.FreelistMapType})
		return err
	})
	if err != nil {
		var ce *CorruptError
		if errors.As(err, &ce) {
			return nil, err
		}
		if errors.Is(err, bolterrors.ErrTimeout) {
			return nil, &LockedError{Dir: dir, PID: readPID(dir)}
		}
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return nil, err // it says "open PATH: why" already
		}
		return nil, fmt.Errorf("open %s: %w", dbPath, err)
	}
	s := &Store{dir: dir, db: db, commits: make(chan *commitOp, 1024), onCommit: opts.OnCommit, stopWalk: make(chan struct{}), walked: make(chan struct{})}
	fail := func(err error) (*Store, error) {
		db.Close()
		if readPID(dir) == os.Getpid() {
			os.Remove(filepath.Join(dir, PIDFile))
		}
		return nil, err
	}
	if err := writePID(dir); err != nil {
		if !IsNoSpace(err) {
			return fail(err)
		}
		// The flock above keeps any other process out; the pid file only
		// names us. A stale one must not name some other process.
		os.Remove(filepath.Join(dir, PIDFile))
		s.noPID = err
	}
	if err := guarded(dbPath, s.initSchema); err != nil {
		return fail(err)
	}
	// A missing seal.key is made fresh only while nothing is sealed: with
	// secrets stored, a new key would silently orphan every one of them.
	var sealed bool
	if err := s.View(func(tx *Tx) error {
		k, _ := tx.bucket(bucketSecrets).Cursor().First()
		sealed = k != nil
		return nil
	}); err != nil {
		return fail(err)
	}
	key, err := LoadKeyFile(dir, SealKeyFile, !sealed)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = &PolicyError{Path: filepath.Join(dir, SealKeyFile), Problem: "is missing but sealed secrets are stored",
				Fix: "restore seal.key from a backup (a new key cannot open the stored secrets)"}
		}
		return fail(err)
	}
	if s.seal, err = newSealer(key); err != nil {
		return fail(err)
	}
	if err := s.View(func(tx *Tx) error {
		// An unreadable last receipt must not lock the operator out of the
		// whole store (verify and doctor need it open): it only stops the
		// chain from growing on a head nobody can check.
		s.head, s.headErr = loadHead(tx.btx)
		last, _ := tx.bucket(bucketRuns).Cursor().Last()
		s.runIDs.seed(string(last))
		return nil
	}); err != nil {
		return fail(err)
	}
	s.ensureReserve()
	s.wg.Add(2)
	go s.committer()
	go s.walkInBackground()
	return s, nil
}

// prepareDBFile creates warden.db exclusively at 0600 when missing, and
// otherwise holds it to the private-file policy before bbolt follows the
// path (the dir is ours and private, so nobody can swap it in between).
func prepareDBFile(path string) error {
	_, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL|noFollow, 0o600)
		if err != nil {
			return err
		}
		if err := f.Chmod(0o600); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	if err != nil {
		return err
	}
	return checkPrivateFile(path)
}

func writePID(dir string) error {
	return WriteFileAtomic(filepath.Join(dir, PIDFile), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600)
}

func readPID(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, PIDFile))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// HolderPID reports the pid recorded as holding dir, when it is alive.
func HolderPID(dir string) int {
	pid := readPID(dir)
	if pid == 0 || syscall.Kill(pid, 0) != nil {
		return 0
	}
	return pid
}

// PIDFileError is why this store runs without warden.pid (the disk was
// full at Open), or nil when the pid file names this process.
func (s *Store) PIDFileError() error { return s.noPID }

// Dir is the data dir this store lives in.
func (s *Store) Dir() string { return s.dir }

// Path is the bbolt file.
func (s *Store) Path() string { return s.db.Path() }

// Close stops the committer (after it drains queued writes) and closes
// the file. The pid file is removed only if it still names this process.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.commits)
	close(s.stopWalk)
	s.mu.Unlock()
	s.wg.Wait()
	if readPID(s.dir) == os.Getpid() {
		os.Remove(filepath.Join(s.dir, PIDFile))
	}
	if s.broken.Load() != nil {
		return nil // bbolt may hold its locks for good: the exit frees the file
	}
	return s.db.Close()
}

var (
	bucketMeta = []byte("meta")
	keySchema  = []byte("schema")
)

type schemaRecord struct {
	Version int `json:"version"`
}

func (r *schemaRecord) validate() error {
	if r.Version < 1 {
		return fmt.Errorf("schema version %d out of range", r.Version)
	}
	return nil
}

// allBuckets are created at open so readers never meet a missing bucket.
var allBuckets = [][]byte{bucketMeta, bucketReceipts, bucketSecrets, bucketConfig, bucketTokens, bucketModules, bucketRuns, bucketStreams, bucketPolicies, bucketRequests, bucketHands,
	bucketLiveRuns, bucketTokenAge, bucketCheckpoints, bucketTokenSession, bucketTokenRevoked}

func (s *Store) initSchema() error {
	// Most opens find the schema current and every bucket there: they
	// need no write transaction (and its fsync) to find that out.
	current := false
	s.db.View(func(tx *bolt.Tx) error {
		var sr schemaRecord
		meta := tx.Bucket(bucketMeta)
		if meta == nil || decodeRecord("meta", "schema", meta.Get(keySchema), &sr) != nil || sr.Version != SchemaVersion {
			return nil
		}
		for _, name := range allBuckets {
			if tx.Bucket(name) == nil {
				return nil
			}
		}
		current = true
		return nil
	})
	if current {
		return nil
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			// A store with buckets but no meta is not ours to adopt.
			if err := tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
				return &CorruptError{Bucket: string(name), Key: "-", Err: errors.New("store has data but no schema record")}
			}); err != nil {
				return err
			}
			var err error
			if meta, err = tx.CreateBucket(bucketMeta); err != nil {
				return err
			}
			b, _ := encodeRecord(&schemaRecord{Version: SchemaVersion})
			if err := meta.Put(keySchema, b); err != nil {
				return err
			}
		}
		var sr schemaRecord
		raw := meta.Get(keySchema)
		if raw == nil {
			return &CorruptError{Bucket: "meta", Key: "schema", Err: errors.New("missing schema record")}
		}
		if err := decodeRecord("meta", "schema", raw, &sr); err != nil {
			return err
		}
		if sr.Version > SchemaVersion {
			return &SchemaError{Found: sr.Version, Supported: SchemaVersion}
		}
		for _, name := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		if sr.Version < SchemaVersion {
			if err := migrate(&Tx{s: s, btx: tx}, sr.Version); err != nil {
				return fmt.Errorf("migrating warden.db from schema %d to %d: %w (nothing was changed; restore from a backup if this persists)", sr.Version, SchemaVersion, err)
			}
			b, _ := encodeRecord(&schemaRecord{Version: SchemaVersion})
			return meta.Put(keySchema, b)
		}
		return nil
	})
}
