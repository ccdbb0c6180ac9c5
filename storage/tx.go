package storage

import (
	"encoding/binary"
	"strconv"

	bolt "go.etcd.io/bbolt"
)

// Tx is a storage transaction. Its typed methods are the only way records
// are read or written, so every value passes the strict codecs.
type Tx struct {
	s        *Store
	btx      *bolt.Tx
	head     *chainHead // write transactions only: the chain head so far
	appended []Receipt
	after    []func() // AfterCommit's, run once this transaction has landed
}

// AfterCommit has fn run once this write transaction has committed, before
// the Update that made it returns; never if it does not commit (an error,
// a rollback, a retry of the batch it was in). For a cache of what the
// transaction changes: dropping it after the commit, not before, leaves
// no moment in which a reader could fill it again from the old state.
func (tx *Tx) AfterCommit(fn func()) { tx.after = append(tx.after, fn) }

func (tx *Tx) bucket(name []byte) *bolt.Bucket { return tx.btx.Bucket(name) }

func (tx *Tx) writable() bool { return tx.btx.Writable() }

func u64key(n uint64) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], n)
	return k[:]
}

func u64str(n uint64) string { return strconv.FormatUint(n, 10) }

// nameKey joins a module and a name; both are restricted to [a-z0-9_-] by
// their validators, so NUL can never be part of either.
func nameKey(module, name string) []byte {
	return []byte(module + "\x00" + name)
}

// getRecord reads and strictly decodes one record; ErrNotFound when absent.
func getRecord(tx *Tx, bucket []byte, key []byte, shownKey string, v record) error {
	raw := tx.bucket(bucket).Get(key)
	if raw == nil {
		return ErrNotFound
	}
	return decodeRecord(string(bucket), shownKey, raw, v)
}

func putRecord(tx *Tx, bucket []byte, key []byte, v record) error {
	b, err := encodeRecord(v)
	if err != nil {
		return err
	}
	return tx.bucket(bucket).Put(key, b)
}

// present is the value of index entries whose key says everything (bbolt
// cannot tell a nil value from a missing key, so it is never empty).
var present = []byte{1}

// timeOrderedFill is the page fill for buckets keyed by time (run ids,
// due times): new keys land on the last page, and records there may still
// grow once (a run's end), so pages are packed nearly full rather than
// bbolt's default half, which left these buckets at 47% of their pages.
const timeOrderedFill = 0.9
