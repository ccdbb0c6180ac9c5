package caps

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wardenhq/warden/storage"
)

// TestCachedValidTokenIsRefusedOnceRevoked: a token already found VALID
// (so its record is cached) is refused the moment any way of revoking it
// returns: one token, its session, its session inside a caller's own
// transaction (how a run's end revokes), the root's rotation; and it
// expires on the clock, not on the cache.
func TestCachedValidTokenIsRefusedOnceRevoked(t *testing.T) {
	e := newEnv(t)
	valid := func(tok, sess string) {
		t.Helper()
		for range 2 { // the second is answered from the cache
			e.wantClass(tok, "m", "hook", sess, Valid)
		}
	}
	one := e.issue("m", "hook", "s1", time.Hour)
	valid(one, "s1")
	if err := e.auth.Revoke(actor, one); err != nil {
		t.Fatal(err)
	}
	e.wantClass(one, "m", "hook", "s1", Revoked)

	sess := e.issue("m", "hook", "s2", time.Hour)
	valid(sess, "s2")
	if err := e.auth.RevokeSession(actor, "s2"); err != nil {
		t.Fatal(err)
	}
	e.wantClass(sess, "m", "hook", "s2", Revoked)

	inTx := e.issue("m", "hook", "s3", time.Hour)
	valid(inTx, "s3")
	if _, err := e.store.Update(func(tx *storage.Tx) error {
		if err := tx.ConfigSet("m", "k", "v"); err != nil {
			return err
		}
		return e.auth.RevokeTx(tx, actor, inTx, "revoked session s3")
	}); err != nil {
		t.Fatal(err)
	}
	e.wantClass(inTx, "m", "hook", "s3", Revoked)

	// A revocation whose transaction fails revokes nothing: still VALID.
	kept := e.issue("m", "hook", "s4", time.Hour)
	valid(kept, "s4")
	e.store.Update(func(tx *storage.Tx) error {
		if err := e.auth.RevokeTx(tx, actor, kept, "never lands"); err != nil {
			return err
		}
		return storage.ErrNotFound
	})
	e.wantClass(kept, "m", "hook", "s4", Valid)

	if _, err := e.auth.Rotate(actor); err != nil {
		t.Fatal(err)
	}
	e.wantClass(kept, "m", "hook", "s4", WrongGeneration)

	base := time.Now()
	e.auth.now = func() time.Time { return base }
	soon := e.issue("m", "hook", "s5", time.Minute)
	valid(soon, "s5")
	e.auth.now = func() time.Time { return base.Add(time.Minute) }
	e.wantClass(soon, "m", "hook", "s5", Expired)
	// What it was issued for is still checked on a cached record.
	e.auth.now = func() time.Time { return base }
	e.wantClass(soon, "other", "hook", "s5", SubjectMismatch)
	e.wantClass(soon, "m", "admin", "s5", ScopeMismatch)
	e.wantClass(soon, "m", "hook", "s6", SessionMismatch)
}

// TestRevocationRacingChecks: with checks of a token running all along,
// no check that starts after Revoke returned finds it VALID, however the
// check's store read and the revoking commit interleave.
func TestRevocationRacingChecks(t *testing.T) {
	e := newEnv(t)
	for round := range 20 {
		tok := e.issue("m", "hook", "race", time.Hour)
		var revoked atomic.Bool
		var wrong atomic.Int64
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					after := revoked.Load()
					if e.auth.Classify(tok, "m", "hook", "race") == Valid && after {
						wrong.Add(1)
					}
				}
			}()
		}
		time.Sleep(2 * time.Millisecond)
		if err := e.auth.Revoke(actor, tok); err != nil {
			t.Fatal(err)
		}
		revoked.Store(true)
		time.Sleep(2 * time.Millisecond)
		close(stop)
		wg.Wait()
		if n := wrong.Load(); n > 0 {
			t.Fatalf("round %d: %d checks begun after Revoke returned found the token VALID", round, n)
		}
	}
}
