package storage

import (
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

// PutToken stores a token record under its id.
func (tx *Tx) PutToken(r TokenRecord) error {
	if !hexHash.MatchString(r.ID) {
		return fmt.Errorf("bad token id")
	}
	return putRecord(tx, bucketTokens, []byte(r.ID), &r)
}

// DeleteToken removes a token record (pruning).
func (tx *Tx) DeleteToken(id string) error {
	return tx.bucket(bucketTokens).Delete([]byte(id))
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
