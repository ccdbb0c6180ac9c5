package storage

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"time"
)

// Tombstones: what is kept of a revoked token.
//
// A revoked token can never be valid again; it is kept only so that, when
// it is presented, the operator's record says REVOKED (or
// WRONG_GENERATION) rather than UNKNOWN, for as long as tokens are kept
// (caps prunes them a week after revocation). Every hook run revokes its
// token when it ends, so these are most of what the token buckets hold:
// keeping the whole record in a bucket keyed by a random id cost about
// 1.1 KB a run (a 400-byte record at under half a page's fill). A
// tombstone is a 16-byte key and a one-byte value, in a bucket per day:
//
//	tokens.revoked / <day: 8 bytes big-endian, unix days UTC> / <id[:16]> = uvarint(generation)
//
// Invariants:
//   - The key is the first 128 bits of the token's id (itself SHA-256 of
//     the token). Two tokens sharing those bits would only make an unknown
//     token be labelled REVOKED: a tombstone is never VALID, whatever it
//     matches, and a stored record (not revoked) is always read first.
//   - A token id has a record in tokens or tombstones, never both:
//     PutToken of a revoked record deletes the record and its entries.
//   - Day buckets are pruned whole, so pruning never reads a tombstone,
//     and a lookup reads one key per day kept (about eight).
var bucketTokenRevoked = []byte("tokens.revoked")

// tombstoneKeyLen is how many bytes of the id a tombstone is keyed by.
const tombstoneKeyLen = 16

// Tombstone is what is kept of a revoked token.
type Tombstone struct {
	Generation uint64
	// Revoked is when it was revoked, to the day (UTC midnight) when read.
	Revoked time.Time
}

const day = 24 * time.Hour

func dayOf(t time.Time) uint64 { return uint64(max(t.Unix(), 0)) / uint64(day/time.Second) }

func tombstoneKey(id string) ([]byte, bool) {
	if !hexHash.MatchString(id) {
		return nil, false
	}
	k, err := hex.DecodeString(id[:2*tombstoneKeyLen])
	return k, err == nil
}

func (tx *Tx) putTombstone(id string, t Tombstone) error {
	k, ok := tombstoneKey(id)
	if !ok || t.Generation == 0 {
		return errors.New("refusing to store invalid tombstone")
	}
	b, err := tx.bucket(bucketTokenRevoked).CreateBucketIfNotExists(u64key(dayOf(t.Revoked)))
	if err != nil {
		return err
	}
	// Keys are random: bbolt's default half-page split leaves pages about
	// 45% full under such inserts; a fuller split costs an extra page
	// write now and then and keeps the (many, tiny) tombstones denser.
	b.FillPercent = 0.8
	return b.Put(k, binary.AppendUvarint(nil, t.Generation))
}

// TokenTombstone reads the tombstone of a revoked token by the token's id:
// ErrNotFound when none is kept (never revoked, or pruned).
func (tx *Tx) TokenTombstone(id string) (Tombstone, error) {
	k, ok := tombstoneKey(id)
	if !ok {
		return Tombstone{}, ErrNotFound
	}
	c := tx.bucket(bucketTokenRevoked).Cursor()
	for d, v := c.Last(); d != nil; d, v = c.Prev() {
		if v != nil || len(d) != 8 {
			continue // not a day bucket
		}
		raw := tx.bucket(bucketTokenRevoked).Bucket(d).Get(k)
		if raw == nil {
			continue
		}
		gen, n := binary.Uvarint(raw)
		if n != len(raw) || gen == 0 {
			return Tombstone{}, &CorruptError{Bucket: string(bucketTokenRevoked), Key: id, Err: errors.New("bad tombstone")}
		}
		return Tombstone{Generation: gen, Revoked: time.Unix(int64(binary.BigEndian.Uint64(d))*int64(day/time.Second), 0).UTC()}, nil
	}
	return Tombstone{}, ErrNotFound
}

// tombstonesDue reports whether a day of tombstones ended by cutoff.
func (tx *Tx) tombstonesDue(cutoff time.Time) bool {
	d, _ := tx.bucket(bucketTokenRevoked).Cursor().First()
	return len(d) == 8 && binary.BigEndian.Uint64(d) < dayOf(cutoff)
}

// pruneTombstones deletes the day buckets that ended by cutoff, oldest
// first, until they held limit tombstones (limit <= 0: all of them; at
// least one day is deleted, so a batch always makes progress), and
// returns how many tombstones they held.
func (tx *Tx) pruneTombstones(cutoff time.Time, limit int) (int, error) {
	parent := tx.bucket(bucketTokenRevoked)
	end := u64key(dayOf(cutoff))
	var days [][]byte
	c := parent.Cursor()
	for d, _ := c.First(); d != nil && bytes.Compare(d, end) < 0; d, _ = c.Next() {
		days = append(days, append([]byte(nil), d...))
	}
	n := 0
	for i, d := range days {
		if i > 0 && limit > 0 && n >= limit {
			break
		}
		if b := parent.Bucket(d); b != nil {
			n += b.Stats().KeyN
		}
		if err := parent.DeleteBucket(d); err != nil {
			return n, err
		}
	}
	return n, nil
}

// tombstoneCount is how many tombstones are kept (bbolt's page counts: no
// tombstone is read).
func (tx *Tx) tombstoneCount() int {
	n := 0
	parent := tx.bucket(bucketTokenRevoked)
	c := parent.Cursor()
	for d, v := c.First(); d != nil; d, v = c.Next() {
		if v == nil {
			n += parent.Bucket(d).Stats().KeyN
		}
	}
	return n
}
