package engine

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wardenhq/warden/engine/caps"
	"github.com/wardenhq/warden/storage"
)

// openFixture copies a fixture data dir into a private temp dir (git does
// not keep the 0700/0600 modes the store insists on).
func openFixture(t *testing.T, fixture string) string {
	t.Helper()
	dir := newDataDir(t)
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{storage.DBFile, storage.SealKeyFile, "host.secret"} {
		copyFile(t, filepath.Join(fixture, name), filepath.Join(dir, name))
	}
	return dir
}

// TestOpenMigratesSchema1Store opens a data dir written by the schema-1
// code: the schema step builds the new indexes from what is stored, and
// the engine then works from them: the run its engine never finished is
// closed, the month-old token is pruned, the stream total is what the
// streams hold, and nothing stored is lost.
func TestOpenMigratesSchema1Store(t *testing.T) {
	dir := openFixture(t, storeFixtureV1)
	e := openEngine(t, Options{DataDir: dir})

	runs, err := e.Runs(0)
	if err != nil || len(runs) != 5 {
		t.Fatalf("runs after migrating: %d, %v; want the fixture's 5", len(runs), err)
	}
	var finished int
	for _, r := range runs {
		switch {
		case r.PID == 999999:
			if r.Status != storage.RunFailed || !strings.Contains(r.Error, "engine (pid 999999) stopped") {
				t.Errorf("the run left running was not reconciled: %+v", r)
			}
		case r.Hook == "count":
			finished++
			if lines, err := e.StreamLines(r.ID, 0, 0); err != nil || len(lines) != 20 || lines[19].Text != "20" {
				t.Errorf("stream of run %s after migrating: %d lines, %v", r.ID, len(lines), err)
			}
		}
	}
	if finished != 3 {
		t.Errorf("finished count runs: %d, want 3", finished)
	}
	e.store.View(func(tx *storage.Tx) error {
		if live, err := tx.LiveRuns(); err != nil || len(live) != 0 {
			t.Errorf("live runs after reconciling: %+v %v", live, err)
		}
		if _, err := tx.Token(strings.Repeat("cd", 32)); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("the month-old token was not pruned: %v", err)
		}
		return nil
	})
	if got, want := e.streamTotal(), storedStreamBytes(t, e); got != want || got == 0 {
		t.Errorf("stream total after migrating: %d, walk says %d", got, want)
	}
	if v, err := e.VerifyReceipts(); err != nil || !v.Intact || v.Count < 10 {
		t.Errorf("receipts after migrating: %+v %v", v, err)
	}
	e.store.View(func(tx *storage.Tx) error {
		if got, ok, err := tx.SecretGet("testmod", "api_key"); err != nil || !ok || got != "fixture-secret" {
			t.Errorf("sealed secret after migrating: ok=%v %v", ok, err)
		}
		return nil
	})
	e.Close()

	// The schema steps happened once: the store now says the current
	// schema and a build that knew only schema 1 would refuse it, as this one refuses
	// a newer one (storage's TestOpenRefusesNewerSchema).
	e2 := openEngine(t, Options{DataDir: dir})
	if rs, _ := e2.Runs(0); len(rs) != 5 {
		t.Errorf("runs after reopening: %d", len(rs))
	}
}

// TestOpenMigratesSchema2Store opens a data dir written by the schema-2
// code. The schema step keeps each revoked token as a tombstone (its
// whole record goes) and indexes the rest by session; every token is then
// classified as it was (REVOKED, EXPIRED, VALID); and the engine revokes
// the token of the run its engine never finished, found through the new
// index, and only that one.
func TestOpenMigratesSchema2Store(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(storeFixtureV2, "tokens.json"))
	if err != nil {
		t.Fatal(err)
	}
	var fx storeFixtureV2Tokens
	if err := json.Unmarshal(raw, &fx); err != nil {
		t.Fatal(err)
	}
	dir := openFixture(t, storeFixtureV2)

	// The schema step alone (storage and the trust root; no engine, so
	// nothing is reconciled or pruned yet).
	st, err := storage.Open(storage.Options{Dir: dir})
	if err != nil {
		t.Fatalf("opening the schema-2 store: %v", err)
	}
	auth, err := caps.Open(st, "local:test")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, token, subject, session string
		want                          caps.Class
	}{
		{"revoked", fx.Revoked, "testmod", "s-revoked", caps.Revoked},
		{"expired", fx.Expired, "testmod", "s-expired", caps.Expired},
		{"other", fx.Other, "testmod", "s-other", caps.Valid},
		{"left running", fx.LeftRunning, fx.LeftRunID, fx.LeftRunID, caps.Valid},
	} {
		got := auth.Classify(c.token, c.subject, "hook", c.session)
		if c.name == "left running" && got == caps.Expired {
			// Issued for an hour when the fixture was written, so it has
			// expired since; what matters is that the schema step kept
			// its record whole and did not revoke it.
			got = caps.Valid
		}
		if got != c.want {
			t.Errorf("%s token after the schema step: %s, want %s", c.name, got, c.want)
		}
	}
	var leftExpires time.Time
	st.View(func(tx *storage.Tx) error {
		for _, id := range fx.RunTokenIDs {
			if _, err := tx.Token(id); !errors.Is(err, storage.ErrNotFound) {
				t.Errorf("finished run's revoked token %.8s still stored whole: %v", id, err)
			}
			if ts, err := tx.TokenTombstone(id); err != nil || ts.Generation != 1 {
				t.Errorf("finished run's revoked token %.8s has no tombstone: %+v %v", id, ts, err)
			}
		}
		if got, err := tx.TokensOfSession(fx.LeftRunID); err != nil || len(got) != 1 || got[0].Subject != fx.LeftRunID {
			t.Errorf("the left run's session index: %+v %v", got, err)
		} else {
			leftExpires = got[0].Expires
		}
		// Three records (other, expired, left running) and four tombstones
		// (the three runs' and the revoked one): nothing lost, none twice.
		if n := tx.TokenCount(); n != 7 {
			t.Errorf("tokens kept after the schema step: %d, want 7", n)
		}
		return nil
	})
	st.Close()

	// The left run's token was issued for an hour when the fixture was
	// written. Until a week past its expiry the engine revokes it at open
	// (REVOKED, with a token.revoke receipt); after that, open's prune of
	// tokens expired over 7 days removes it first and it reads UNKNOWN.
	// Refused either way, and the run is closed either way; which of the
	// two depends only on the fixture's age.
	prunedBefore := time.Since(leftExpires) > 7*24*time.Hour
	e := openEngine(t, Options{DataDir: dir})
	pruned := time.Since(leftExpires) > 7*24*time.Hour
	wantLeft := caps.Revoked
	if pruned {
		wantLeft = caps.Unknown
	}
	sure := pruned == prunedBefore // not opened on the very instant it turned a week old
	if got := e.auth.Classify(fx.LeftRunning, fx.LeftRunID, "hook", fx.LeftRunID); sure && got != wantLeft {
		t.Errorf("the token of the run left running (expired %s): %s, want %s (the engine closed the run)", leftExpires.Format(time.RFC3339), got, wantLeft)
	}
	if got := e.auth.Classify(fx.Other, "testmod", "hook", "s-other"); got != caps.Valid {
		t.Errorf("another session's token: %s, want VALID", got)
	}
	rs, err := e.Receipts(ReceiptFilter{Kind: storage.KindTokenRevoke})
	if sure && !pruned && (err != nil || len(rs) == 0 || rs[len(rs)-1].Actor != "engine" || !strings.Contains(rs[len(rs)-1].Summary, fx.LeftRunID)) {
		t.Errorf("no token.revoke by engine for the run left running: %+v %v", rs, err)
	}
	runs, err := e.Runs(0)
	if err != nil || len(runs) != 4 {
		t.Fatalf("runs after migrating: %d, %v; want the fixture's 4", len(runs), err)
	}
	for _, r := range runs {
		if r.ID == fx.LeftRunID {
			if r.Status != storage.RunFailed {
				t.Errorf("the run left running was not reconciled: %+v", r)
			}
		} else if lines, err := e.StreamLines(r.ID, 0, 0); err != nil || len(lines) != 20 {
			t.Errorf("stream of run %s after migrating: %d lines, %v", r.ID, len(lines), err)
		}
	}
	if v, err := e.VerifyReceipts(); err != nil || !v.Intact || v.Count < 10 {
		t.Errorf("receipts after migrating: %+v %v", v, err)
	}
	e.Close()
	e2 := openEngine(t, Options{DataDir: dir})
	if got := e2.auth.Classify(fx.LeftRunning, fx.LeftRunID, "hook", fx.LeftRunID); sure && got != wantLeft {
		t.Errorf("after reopening, the left run's token: %s, want %s", got, wantLeft)
	}
}
