// Package caps is the trust root and the capability tokens of
// docs/operating.md.
//
// A token is "cap_" + 64 lowercase hex (256 random bits). It is shown to
// its holder once and never stored. Storage keeps a one-way index of it
// (SHA-256, so a presented token can be found and classified, e.g. as
// revoked) and HMAC-SHA256(host secret, generation|subject|scope|token),
// which binds it to the trust root: a token is valid only if that MAC
// recomputes under the current host.secret, compared in constant time.
package caps

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/wardenhq/warden/storage"
)

// HostSecretFile is the trust root's file name in the data dir.
const HostSecretFile = "host.secret"

// Class is what the engine records about a presented token. Callers only
// ever learn "unauthorized"; the class is for the operator.
type Class string

const (
	Malformed       Class = "MALFORMED"
	Unknown         Class = "UNKNOWN"
	SubjectMismatch Class = "SUBJECT_MISMATCH"
	ScopeMismatch   Class = "SCOPE_MISMATCH"
	SessionMismatch Class = "SESSION_MISMATCH"
	WrongGeneration Class = "WRONG_GENERATION"
	Revoked         Class = "REVOKED"
	Expired         Class = "EXPIRED"
	Valid           Class = "VALID"
)

// ErrUnauthorized is the only thing a token's presenter is told.
var ErrUnauthorized = errors.New("unauthorized")

// TrustError means host.secret and the fingerprint in storage disagree (or
// the file is missing or unsafe): nothing is authorized until the operator
// runs `warden trust rotate`.
type TrustError struct{ Problem string }

func (e *TrustError) Error() string {
	return "trust root refused: " + e.Problem + "; nothing will be authorized until you run `warden trust rotate` (it makes a new host.secret and revokes every token)"
}

// Authority issues and checks tokens against the trust root.
type Authority struct {
	store *storage.Store

	mu     sync.RWMutex
	secret []byte
	trust  storage.TrustRecord
	broken error // a *TrustError while the root disagrees
	now    func() time.Time

	valid validCache // records Classify found VALID (validcache.go)
}

// Status is what `warden trust status` shows.
type Status struct {
	Generation  uint64    `json:"generation"`
	Fingerprint string    `json:"fingerprint"`
	Since       time.Time `json:"since"`
	Agrees      bool      `json:"agrees"`
	Problem     string    `json:"problem,omitempty"`
	Tokens      int       `json:"tokens"`
	Live        int       `json:"live"`
}

// Open loads the trust root. On a fresh store it creates host.secret
// exclusively and records generation 1. A disagreement is not an error
// here (status and rotate must still work); it makes every check fail.
func Open(store *storage.Store, actor string) (*Authority, error) {
	a := &Authority{store: store, now: time.Now}
	var rec storage.TrustRecord
	var ok bool
	if err := store.View(func(tx *storage.Tx) (err error) {
		rec, ok, err = tx.Trust()
		return err
	}); err != nil {
		return nil, err
	}
	if !ok {
		secret, err := storage.LoadKeyFile(store.Dir(), HostSecretFile, true)
		if err != nil {
			return nil, err
		}
		rec = storage.TrustRecord{Generation: 1, Fingerprint: fingerprint(secret), Since: time.Now().UTC()}
		if _, err := store.Update(func(tx *storage.Tx) error {
			if err := tx.PutTrust(rec); err != nil {
				return err
			}
			_, err := tx.AppendReceipt(storage.Draft{Kind: storage.KindTrustInit, Actor: actor, Subject: "trust",
				Summary: "trust root created (generation 1)", Details: map[string]any{"generation": 1, "fingerprint": rec.Fingerprint}})
			return err
		}); err != nil {
			return nil, err
		}
		a.secret, a.trust = secret, rec
		return a, nil
	}
	a.trust = rec
	secret, err := storage.LoadKeyFile(store.Dir(), HostSecretFile, false)
	switch {
	case err != nil:
		a.broken = &TrustError{Problem: "cannot use " + filepath.Join(store.Dir(), HostSecretFile) + ": " + err.Error()}
	case !hmac.Equal([]byte(fingerprint(secret)), []byte(rec.Fingerprint)):
		a.broken = &TrustError{Problem: "host.secret does not match the fingerprint recorded for generation " + strconv.FormatUint(rec.Generation, 10)}
	default:
		a.secret = secret
	}
	return a, nil
}

func fingerprint(secret []byte) string {
	sum := sha256.Sum256(secret)
	return hex.EncodeToString(sum[:])
}

// tokenID is the one-way index under which a token's record is stored.
// Its prefix is a fixed domain label, not the Go module path: every
// stored token is found by it, so it never changes.
func tokenID(token string) string {
	sum := sha256.Sum256([]byte("warden/token-id/v1|" + token))
	return hex.EncodeToString(sum[:])
}

func (a *Authority) mac(gen uint64, subject, scope, token string) string {
	m := hmac.New(sha256.New, a.secret)
	fmt.Fprintf(m, "%d|%s|%s|%s", gen, subject, scope, token)
	return hex.EncodeToString(m.Sum(nil))
}

// Err reports the trust root's disagreement, if any.
func (a *Authority) Err() error {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.broken
}

// Issue mints a token for subject/scope/session valid for ttl. The token
// is returned once; only its index and MAC are stored. Issuing writes a
// receipt naming subject and scope, never the token.
func (a *Authority) Issue(actor, subject, scope, session string, ttl time.Duration) (string, error) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	m, err := a.mintLocked(actor, subject, scope, session, ttl)
	if err != nil {
		return "", err
	}
	if _, err := a.store.Update(m.Record); err != nil {
		return "", err
	}
	return m.Token, nil
}

// Minted is a token whose record is not stored yet. Record stores it and
// its token.issue receipt inside the caller's write transaction, so that
// issuing can share one commit (one fsync) with the caller's own writes;
// until that commits, the token is unknown and authorizes nothing.
type Minted struct {
	Token string
	actor string
	rec   storage.TokenRecord
}

// Mint makes a token as Issue does, without storing it: see Minted.
func (a *Authority) Mint(actor, subject, scope, session string, ttl time.Duration) (*Minted, error) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.mintLocked(actor, subject, scope, session, ttl)
}

func (a *Authority) mintLocked(actor, subject, scope, session string, ttl time.Duration) (*Minted, error) {
	if a.broken != nil {
		return nil, a.broken
	}
	if subject == "" || scope == "" || ttl <= 0 {
		return nil, errors.New("issue: subject, scope and a positive ttl are required")
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, err
	}
	token := "cap_" + hex.EncodeToString(raw[:])
	now := a.now().UTC()
	rec := storage.TokenRecord{
		ID: tokenID(token), MAC: a.mac(a.trust.Generation, subject, scope, token),
		Subject: subject, Scope: scope, Session: session, Generation: a.trust.Generation,
		Created: now, Expires: now.Add(ttl),
	}
	return &Minted{Token: token, actor: actor, rec: rec}, nil
}

// Record stores the minted token's record and its token.issue receipt in
// tx. It fails if the trust root was rotated since the token was minted.
// Like every Update function it may run more than once.
func (m *Minted) Record(tx *storage.Tx) error {
	trust, _, err := tx.Trust()
	if err != nil {
		return err
	}
	if trust.Generation != m.rec.Generation {
		return errors.New("issue: the trust root was rotated while the token was being issued; try again")
	}
	if err := tx.PutToken(m.rec); err != nil {
		return err
	}
	_, err = tx.AppendReceipt(storage.Draft{Kind: storage.KindTokenIssue, Actor: m.actor, Subject: m.rec.Subject,
		Summary: "issued " + m.rec.Scope + " token", Details: map[string]any{"scope": m.rec.Scope, "session": m.rec.Session, "expires": m.rec.Expires, "generation": m.rec.Generation}})
	return err
}

// Classify says what a presented token is for the expected subject, scope
// and session. It never returns an error: anything it cannot read is
// UNKNOWN (with the trust root broken, nothing is VALID).
func (a *Authority) Classify(token, subject, scope, session string) Class {
	if !wellFormed(token) {
		return Malformed
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	id := tokenID(token)
	if a.broken == nil {
		// A record found VALID before, and nothing revoked since: only
		// what can change without a commit (the clock) is judged again.
		if rec, ok := a.valid.get(id); ok {
			return a.judge(rec, subject, scope, session)
		}
	}
	epoch := a.valid.epoch() // before the read: see validCache
	var rec storage.TokenRecord
	var gone storage.Tombstone
	var revoked bool
	if err := a.store.View(func(tx *storage.Tx) (err error) {
		rec, err = tx.Token(id)
		if errors.Is(err, storage.ErrNotFound) {
			// A revoked token leaves only its tombstone, which still says
			// which generation it was issued under.
			gone, err = tx.TokenTombstone(id)
			revoked = err == nil
		}
		return err
	}); err != nil {
		return Unknown
	}
	if revoked {
		if gone.Generation != a.trust.Generation {
			return WrongGeneration
		}
		return Revoked
	}
	if c := a.judge(rec, subject, scope, session); c != Valid {
		return c
	}
	if a.broken != nil || !hmac.Equal([]byte(a.mac(rec.Generation, subject, scope, token)), []byte(rec.MAC)) {
		return Unknown
	}
	a.valid.put(id, rec, epoch)
	return Valid
}

// judge classifies a token by its record, short of the MAC: generation,
// revocation, expiry, and what it was issued for. Called with a.mu held.
func (a *Authority) judge(rec storage.TokenRecord, subject, scope, session string) Class {
	switch {
	case rec.Generation != a.trust.Generation:
		return WrongGeneration
	case rec.Revoked != nil:
		return Revoked
	case !a.now().Before(rec.Expires):
		return Expired
	case rec.Subject != subject:
		return SubjectMismatch
	case rec.Scope != scope:
		return ScopeMismatch
	case rec.Session != session:
		return SessionMismatch
	}
	return Valid
}

// Check returns nil for a VALID token and otherwise ErrUnauthorized,
// together with the class for the operator's record.
func (a *Authority) Check(token, subject, scope, session string) (Class, error) {
	c := a.Classify(token, subject, scope, session)
	if c != Valid {
		return c, ErrUnauthorized
	}
	return c, nil
}

func wellFormed(token string) bool {
	if len(token) != 68 || token[:4] != "cap_" {
		return false
	}
	for _, c := range token[4:] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Revoke revokes one token. Revoking an unknown or already revoked token
// is not an error (revocation is idempotent).
func (a *Authority) Revoke(actor, token string) error {
	if !wellFormed(token) {
		return nil
	}
	_, err := a.store.Update(func(tx *storage.Tx) error { return a.RevokeTx(tx, actor, token, "revoked token") })
	return err
}

// RevokeTx revokes one token inside tx (a point lookup by its index, not a
// walk of every token), with a token.revoke receipt saying summary.
// Unknown, malformed and already revoked tokens are left alone, with no
// receipt.
func (a *Authority) RevokeTx(tx *storage.Tx, actor, token, summary string) error {
	if !wellFormed(token) {
		return nil
	}
	r, err := tx.Token(tokenID(token))
	if errors.Is(err, storage.ErrNotFound) || (err == nil && r.Revoked != nil) {
		return nil
	}
	if err != nil {
		return err
	}
	now := a.now().UTC()
	r.Revoked = &now
	if err := tx.PutToken(r); err != nil {
		return err
	}
	tx.AfterCommit(a.valid.drop)
	_, err = tx.AppendReceipt(storage.Draft{Kind: storage.KindTokenRevoke, Actor: actor, Subject: r.Subject, Summary: summary,
		Details: map[string]any{"count": 1}})
	return err
}

// RevokeSession revokes every live token of a session.
func (a *Authority) RevokeSession(actor, session string) error {
	if session == "" {
		return errors.New("revoke: empty session")
	}
	_, err := a.store.Update(func(tx *storage.Tx) error {
		return a.RevokeSessionTx(tx, actor, session, "revoked session "+session)
	})
	return err
}

// RevokeSessionTx revokes every live token of a session inside tx, with
// one token.revoke receipt saying summary (none when nothing was live).
// It reads only that session's tokens, through storage's index by
// session (a run found dead when the engine opens costs the same after
// 100,000 runs as after 10).
func (a *Authority) RevokeSessionTx(tx *storage.Tx, actor, session, summary string) error {
	if session == "" {
		return errors.New("revoke: empty session")
	}
	recs, err := tx.TokensOfSession(session)
	if err != nil {
		return err
	}
	now := a.now().UTC()
	var hits []storage.TokenRecord
	for _, r := range recs {
		if r.Revoked == nil && r.Session == session {
			hits = append(hits, r)
		}
	}
	if len(hits) == 0 {
		return nil
	}
	tx.AfterCommit(a.valid.drop)
	subjects := map[string]bool{}
	for _, r := range hits {
		r.Revoked = &now
		subjects[r.Subject] = true
		if err := tx.PutToken(r); err != nil {
			return err
		}
	}
	subject := hits[0].Subject
	if len(subjects) > 1 {
		subject = "tokens"
	}
	_, err = tx.AppendReceipt(storage.Draft{Kind: storage.KindTokenRevoke, Actor: actor, Subject: subject, Summary: summary,
		Details: map[string]any{"count": len(hits)}})
	return err
}

// Prune deletes token records that expired or were revoked more than
// keep ago, so the tokens bucket does not grow with every hook run. It
// reads only those, through storage's index by due time, in bounded
// batches (each its own commit), so no writer waits long behind it.
func (a *Authority) Prune(keep time.Duration) (int, error) {
	const batch = 4096
	cutoff := a.now().Add(-keep)
	n := 0
	for {
		// Look first: most opens have nothing to prune and should not pay
		// for a write transaction (an fsync) to find that out.
		due := false
		if err := a.store.View(func(tx *storage.Tx) error {
			due = tx.TokensDue(cutoff)
			return nil
		}); err != nil || !due {
			return n, err
		}
		var got int
		if _, err := a.store.Update(func(tx *storage.Tx) error {
			var err error
			got, err = tx.PruneTokens(cutoff, batch)
			return err
		}); err != nil {
			return n, err
		}
		n += got
		if got < batch {
			return n, nil
		}
	}
}

// Status reports the trust root and token counts.
func (a *Authority) Status() (Status, error) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	st := Status{Generation: a.trust.Generation, Fingerprint: a.trust.Fingerprint, Since: a.trust.Since, Agrees: a.broken == nil}
	if a.broken != nil {
		st.Problem = a.broken.Error()
	}
	now := a.now()
	// Counted on storage's index by due time: only the tokens not yet
	// due (unexpired and unrevoked) are read, however many are kept.
	err := a.store.View(func(tx *storage.Tx) error {
		st.Tokens = tx.TokenCount()
		return tx.EachTokenDueAfter(now, func(r storage.TokenRecord) error {
			if r.Revoked == nil && r.Generation == a.trust.Generation && now.Before(r.Expires) {
				st.Live++
			}
			return nil
		})
	})
	return st, err
}

// Rotate makes a new host.secret (atomically), moves to the next
// generation and revokes every token issued before. It is also the way out
// of a trust-root disagreement.
func (a *Authority) Rotate(actor string) (Status, error) {
	a.mu.Lock()
	dir := a.store.Dir()
	path := filepath.Join(dir, HostSecretFile)
	// An unsafe file (symlink, extra link) is moved aside, never followed.
	if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() {
		os.Rename(path, path+".refused-"+strconv.FormatInt(time.Now().Unix(), 10))
	}
	secret, err := storage.ReplaceKeyFile(dir, HostSecretFile)
	if err != nil {
		a.mu.Unlock()
		return Status{}, err
	}
	next := storage.TrustRecord{Generation: a.trust.Generation + 1, Fingerprint: fingerprint(secret), Since: a.now().UTC()}
	now := next.Since
	_, err = a.store.Update(func(tx *storage.Tx) error {
		if err := tx.PutTrust(next); err != nil {
			return err
		}
		// Collect first: bbolt forbids writes during a bucket walk.
		var live []storage.TokenRecord
		if err := tx.EachToken(func(r storage.TokenRecord) error {
			if r.Revoked == nil {
				live = append(live, r)
			}
			return nil
		}); err != nil {
			return err
		}
		tx.AfterCommit(a.valid.drop)
		n := len(live)
		for _, r := range live {
			r.Revoked = &now
			if err := tx.PutToken(r); err != nil {
				return err
			}
		}
		_, err := tx.AppendReceipt(storage.Draft{Kind: storage.KindTrustRotate, Actor: actor, Subject: "trust",
			Summary: fmt.Sprintf("trust root rotated to generation %d; %d tokens revoked", next.Generation, n),
			Details: map[string]any{"generation": next.Generation, "fingerprint": next.Fingerprint, "revoked": n}})
		return err
	})
	if err != nil {
		// The file on disk is no longer the secret storage vouches for:
		// authorize nothing (as a reopen would find) rather than keep
		// minting tokens under a secret that is gone.
		a.broken = &TrustError{Problem: "host.secret was replaced but its fingerprint could not be recorded: " + err.Error()}
		a.mu.Unlock()
		return Status{}, fmt.Errorf("rotate: new host.secret written but not recorded (%w); run `warden trust rotate` again", err)
	}
	a.secret, a.trust, a.broken = secret, next, nil
	a.mu.Unlock()
	return a.Status()
}
