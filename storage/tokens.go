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

// PutToken stores a token record under its id, and its entry in the index
// by due time (moved if revoking made it due sooner).
func (tx *Tx) PutToken(r TokenRecord) error {
	if !hexHash.MatchString(r.ID) {
		return fmt.Errorf("bad token id")
	}
	idx := tx.bucket(bucketTokenAge)
	idx.FillPercent = timeOrderedFill
	if raw := tx.bucket(bucketTokens).Get([]byte(r.ID)); raw != nil {
		var old TokenRecord
		if err := decodeRecord("tokens", r.ID, raw, &old); err != nil {
			return err
		}
		if err := idx.Delete(tokenDue(&old)); err != nil {
			return err
		}
	}
	if err := putRecord(tx, bucketTokens, []byte(r.ID), &r); err != nil {
		return err
	}
	return idx.Put(tokenDue(&r), present)
}

// DeleteToken removes a token record and its index entry. A record too
// corrupt to name its entry is removed all the same; its entry goes when
// PruneTokens reaches it.
func (tx *Tx) DeleteToken(id string) error {
	r, err := tx.Token(id)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err == nil {
		if err := tx.bucket(bucketTokenAge).Delete(tokenDue(&r)); err != nil {
			return err
		}
	}
	return tx.bucket(bucketTokens).Delete([]byte(id))
}

// PruneTokens deletes the tokens that expired or were revoked before
// cutoff, at most limit of them (0 for all), reading only those through
// the index by due time. It returns how many it deleted.
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
			if err := tx.bucket(bucketTokens).Delete(k[8:]); err != nil {
				return 0, err
			}
		}
		if err := idx.Delete(k); err != nil {
			return 0, err
		}
	}
	return len(due), nil
}

// TokensDue reports whether any token expired or was revoked before
// cutoff: one index read.
func (tx *Tx) TokensDue(cutoff time.Time) bool {
	k, _ := tx.bucket(bucketTokenAge).Cursor().First()
	return k != nil && bytes.Compare(k[:min(len(k), 8)], u64key(uint64(max(cutoff.UnixNano(), 0)))) < 0
}

// TokenCount is how many token records are stored, counted on the index
// by due time (keys only: no record is decoded).
func (tx *Tx) TokenCount() int {
	n := 0
	c := tx.bucket(bucketTokenAge).Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		n++
	}
	return n
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

// EachToken calls fn for every token record; a corrupt record stops the
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
