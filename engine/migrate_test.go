package engine

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"warden/storage"
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

	// The schema step happened once: the store now says schema 2 and a
	// build that knew only schema 1 would refuse it, as this one refuses
	// a newer one (storage's TestOpenRefusesNewerSchema).
	e2 := openEngine(t, Options{DataDir: dir})
	if rs, _ := e2.Runs(0); len(rs) != 5 {
		t.Errorf("runs after reopening: %d", len(rs))
	}
}
