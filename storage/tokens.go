package storage

import (
	"bytes"
	"errors"
	"fmt"
	"time"
)

var (
	bucketTokens = []byte("tokens")
	keyTrust     = []byte("trust")
)

// TrustRecord is the trust root's fingerprint and generation. The secret
// itself lives only in host.secret.
type TrustRecord struct {
	Generation  uint64    `json:"generation"`
	Fingerprint string    `json:"fingerprint"` // hex SHA-256 of host.secret
	Since       time.Time `json:"since"`
}

func (r *TrustRecord) validate() error {
	if r.Generation == 0 {
		return errors.New("generation must be positive")
	}
	if !hexHash.MatchString(r.Fingerprint) {
		return errors.New("fingerprint is not 64 hex chars")
	}
	return nil
}

// Trust reads the trust record; ok is false before the first issue.
func (tx *Tx) Trust() (rec TrustRecord, ok bool, err error) {
	err = getRecord(tx, bucketMeta, keyTrust, "trust", &rec)
	if errors.Is(err, ErrNotFound) {
		return rec, false, nil
	}
	return rec, err == nil, err
}

// PutTrust replaces the trust record.
func (tx *Tx) PutTrust(rec TrustRecord) error {
	return putRecord(tx, bucketMeta, keyTrust, &rec)
}

// TokenRecord is what is kept of an issued token: never the token itself.
// ID is a one-way index of the token (so a presented token can be found and
// classified); MAC is HMAC-SHA256(host secret, generation|subject|scope|token).
type TokenRecord struct {
	ID         string     `json:"id"`
	MAC        string     `json:"mac"`
	Subject    string     `json:"subject"`
	Scope      string     `json:"scope"`
	Session    string     `json:"session,omitempty"`
	Generation uint64     `json:"generation"`
	Created    time.Time  `json:"created"`
	Expires    time.Time  `json:"expires"`
	Revoked    *time.Time `json:"revoked,omitempty"`
}

func (r *TokenRecord) validate() error {
	switch {
	case !hexHash.MatchString(r.ID):
		return errors.New("id is not 64 hex chars")
	case !hexHash.MatchString(r.MAC):
		return errors.New("mac is not 64 hex chars")
	case r.Subject == "" || r.Scope == "":
		return errors.New("missing subject or scope")
	case r.Generation == 0:
		return errors.New("generation must be positive")
	case r.Created.IsZero() || r.Expires.IsZero():
		return errors.New("missing created or expires")
	}
	return nil
}

// Token reads a token record by its index id.
func (tx *Tx) Token(id string) (TokenRecord, error) {
	var r TokenRecord
	if !hexHash.MatchString(id) {
		return r, ErrNotFound
	}
	err := getRecord(tx, bucketTokens, []byte(id), id, &r)
	return r, err
}

// bucketTokenAge indexes tokens by when they become prunable: the key is
// that time (unix nanoseconds, 8 bytes big-endian) then the token's id, so
// pruning reads only what is due. A token is due when it expires, or when
// it is revoked if that comes first.
var bucketTokenAge = []byte("tokens.due")

func tokenDue(r *TokenRecord) []byte {
	due := r.Expires
	if r.Revoked != nil && r.Revoked.Before(due) {
		due = *r.Revoked
	}
	return append(u64key(uint64(max(due.UnixNano(), 0))), r.ID...)
}

// bucketTokenSession indexes the stored token records by session: the key
// is the session, NUL, then the token's id (64 hex, a fixed length, so a
// key splits unambiguously even if a session held a NUL). Revoking a
// session (a run found dead at open) reads only its own tokens.
var bucketTokenSession = []byte("tokens.session")

func tokenSessionKey(session, id string) []byte {
	return []byte(session + "\x00" + id)
}

// PutToken stores what is kept of a token. A token not revoked is stored
// whole under its id, with its entries in the index by due time and the
// index by session. A revoked token can never be valid again, so only its
// tombstone is kept (see Tombstone): its record and index entries go.
// Re-storing a record first drops the entries of the stored one.
func (tx *Tx) PutToken(r TokenRecord) error {
	if !hexHash.MatchString(r.ID) {
		return fmt.Errorf("bad token id")
	}
	if err := r.validate(); err != nil {
		return fmt.Errorf("refusing to store invalid record: %w", err)
	}
	due, sess := tx.bucket(bucketTokenAge), tx.bucket(bucketTokenSession)
	due.FillPercent, sess.FillPercent = timeOrderedFill, timeOrderedFill
	if raw := tx.bucket(bucketTokens).Get([]byte(r.ID)); raw != nil {
		var old TokenRecord
		if err := decodeRecord("tokens", r.ID, raw, &old); err != nil {
			return err
		}
		if err := tx.dropTokenEntries(&old); err != nil {
			return err
		}
	}
	if r.Revoked != nil {
		if err := tx.bucket(bucketTokens).Delete([]byte(r.ID)); err != nil {
			return err
		}
		return tx.putTombstone(r.ID, Tombstone{Generation: r.Generation, Revoked: *r.Revoked})
	}
	if err := putRecord(tx, bucketTokens, []byte(r.ID), &r); err != nil {
		return err
	}
	if r.Session != "" {
		if err := sess.Put(tokenSessionKey(r.Session, r.ID), present); err != nil {
			return err
		}
	}
	return due.Put(tokenDue(&r), present)
}

// dropTokenEntries removes a stored record's index entries.
func (tx *Tx) dropTokenEntries(r *TokenRecord) error {
	if err := tx.bucket(bucketTokenAge).Delete(tokenDue(r)); err != nil {
		return err
	}
	if r.Session == "" {
		return nil
	}
	return tx.bucket(bucketTokenSession).Delete(tokenSessionKey(r.Session, r.ID))
}

// TokensOfSession returns the stored (not revoked) token records of a
// session, read through the index by session: it costs the same however
// many tokens other sessions left.
func (tx *Tx) TokensOfSession(session string) ([]TokenRecord, error) {
	prefix := []byte(session + "\x00")
	var out []TokenRecord
	c := tx.bucket(bucketTokenSession).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		if len(k) != len(prefix)+64 {
			continue // another session's key that starts with this one and a NUL
		}
		r, err := tx.Token(string(k[len(prefix):]))
		if errors.Is(err, ErrNotFound) {
			continue // a stale entry of a record deleted while corrupt
		}
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// DeleteToken removes a token record and its index entries. A record too
// corrupt to name its entries is removed all the same; its due entry goes
// when PruneTokens reaches it, and a stale session entry is skipped by
// TokensOfSession.
func (tx *Tx) DeleteToken(id string) error {
	r, err := tx.Token(id)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err == nil {
		if err := tx.dropTokenEntries(&r); err != nil {
			return err
		}
	}
	return tx.bucket(bucketTokens).Delete([]byte(id))
}

// PruneTokens deletes what is kept of the tokens that expired or were
// revoked before cutoff: records through the index by due time, at most
// limit of them (0 for all), then tombstones a whole day at a time (those
// of days that ended by cutoff: a tombstone is kept up to a day longer
// than asked), days until limit is reached (at least one day). It returns
// how many records and tombstones it deleted: a caller pruning in batches
// goes on while that is limit or more.
func (tx *Tx) PruneTokens(cutoff time.Time, limit int) (int, error) {
	end := u64key(uint64(max(cutoff.UnixNano(), 0)))
	idx := tx.bucket(bucketTokenAge)
	var due [][]byte
	c := idx.Cursor()
	for k, _ := c.First(); k != nil && bytes.Compare(k[:min(len(k), 8)], end) < 0; k, _ = c.Next() {
		due = append(due, append([]byte(nil), k...))
		if limit > 0 && len(due) == limit {
			break
		}
	}
	for _, k := range due {
		if len(k) == 8+64 {
			r, err := tx.Token(string(k[8:]))
			if err == nil && r.Session != "" {
				if err := tx.bucket(bucketTokenSession).Delete(tokenSessionKey(r.Session, r.ID)); err != nil {
					return 0, err
				}
			}
			if err := tx.bucket(bucketTokens).Delete(k[8:]); err != nil {
				return 0, err
			}
		}
		if err := idx.Delete(k); err != nil {
			return 0, err
		}
	}
	n := len(due)
	if limit > 0 && n == limit {
		return n, nil
	}
	gone, err := tx.pruneTombstones(cutoff, limit-n)
	return n + gone, err
}

// TokensDue reports whether anything kept of a token expired or was
// revoked before cutoff: two index reads.
func (tx *Tx) TokensDue(cutoff time.Time) bool {
	k, _ := tx.bucket(bucketTokenAge).Cursor().First()
	if k != nil && bytes.Compare(k[:min(len(k), 8)], u64key(uint64(max(cutoff.UnixNano(), 0)))) < 0 {
		return true
	}
	return tx.tombstonesDue(cutoff)
}

// TokenCount is how many tokens are kept: records, counted on the index
// by due time (keys only: no record is decoded), and tombstones.
func (tx *Tx) TokenCount() int {
	n := 0
	c := tx.bucket(bucketTokenAge).Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		n++
	}
	return n + tx.tombstoneCount()
}

// EachTokenDueAfter calls fn for every token neither expired nor revoked
// at t (due at or after it), reading only those through the index.
func (tx *Tx) EachTokenDueAfter(t time.Time, fn func(TokenRecord) error) error {
	c := tx.bucket(bucketTokenAge).Cursor()
	for k, _ := c.Seek(u64key(uint64(max(t.UnixNano(), 0)))); k != nil; k, _ = c.Next() {
		if len(k) != 8+64 {
			continue
		}
		r, err := tx.Token(string(k[8:]))
		if errors.Is(err, ErrNotFound) {
			continue // a stale entry of a record deleted while corrupt
		}
		if err != nil {
			return err
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

// EachToken calls fn for every stored token record (tokens not revoked:
// a revoked one leaves only its tombstone); a corrupt record stops the
// walk with its error.
func (tx *Tx) EachToken(fn func(TokenRecord) error) error {
	return tx.bucket(bucketTokens).ForEach(func(k, v []byte) error {
		var r TokenRecord
		if err := decodeRecord("tokens", string(k), v, &r); err != nil {
			return err
		}
		return fn(r)
	})
}
