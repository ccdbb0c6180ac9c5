package engine

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wardenhq/warden/storage"
)

// storeFixtureV2 is a data dir written by the schema-2 code (main
// fa98981), kept to prove that every later build opens and migrates it.
// Beside the store it holds tokens.json: raw tokens issued into it (test
// values, worthless outside this fixture) and the index ids of the token
// records its finished runs left, so the migration test can classify them.
const storeFixtureV2 = "../testdata/store-v2"

// storeFixtureV2Tokens is tokens.json.
type storeFixtureV2Tokens struct {
	// Revoked was issued for session "s-revoked" and revoked by the operator.
	Revoked string `json:"revoked"`
	// LeftRunning is the token of the run left running (subject and
	// session are its id), never revoked: the next engine must revoke it.
	LeftRunning string `json:"leftRunning"`
	LeftRunID   string `json:"leftRunID"`
	// Other is a long-lived token of another session that nothing revokes.
	Other string `json:"other"`
	// Expired ran out without being revoked.
	Expired string `json:"expired"`
	// RunTokenIDs are the index ids of the finished runs' (revoked) tokens.
	RunTokenIDs []string `json:"runTokenIDs"`
}

// TestWriteStoreFixtureV2 regenerates storeFixtureV2. It is a generator,
// not a test: it only runs when asked, and only the schema-2 code may run
// it (a later build would write a later schema).
//
//	WARDEN_WRITE_STORE_FIXTURE=2 go test -run TestWriteStoreFixtureV2 ./engine/
func TestWriteStoreFixtureV2(t *testing.T) {
	if os.Getenv("WARDEN_WRITE_STORE_FIXTURE") != "2" {
		t.Skip("a fixture generator; set WARDEN_WRITE_STORE_FIXTURE=2 to rewrite " + storeFixtureV2)
	}
	dir := newDataDir(t)
	e := setupScripts(t, Options{DataDir: dir},
		map[string]string{"count.sh": "#!/bin/sh\nseq 1 20\n"},
		map[string]string{"count": "    run: [./count.sh]\n"})
	var fx storeFixtureV2Tokens
	var runs []string
	for i := 0; i < 3; i++ {
		runs = append(runs, runScript(t, e, "count").Run.ID)
	}
	e.store.View(func(tx *storage.Tx) error {
		return tx.EachToken(func(r storage.TokenRecord) error {
			for _, id := range runs {
				if r.Session == id && r.Revoked != nil {
					fx.RunTokenIDs = append(fx.RunTokenIDs, r.ID)
				}
			}
			return nil
		})
	})
	if len(fx.RunTokenIDs) != 3 {
		t.Fatalf("the finished runs left %d revoked tokens, want 3", len(fx.RunTokenIDs))
	}
	var err error
	if fx.Revoked, err = e.auth.Issue("local:fixture", "testmod", "hook", "s-revoked", time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := e.auth.Revoke("local:fixture", fx.Revoked); err != nil {
		t.Fatal(err)
	}
	if fx.Other, err = e.auth.Issue("local:fixture", "testmod", "hook", "s-other", 100*365*24*time.Hour); err != nil {
		t.Fatal(err)
	}
	if fx.Expired, err = e.auth.Issue("local:fixture", "testmod", "hook", "s-expired", time.Millisecond); err != nil {
		t.Fatal(err)
	}
	// A run its engine never finished (it was killed), with a stream and
	// its token, issued as a run's is and never revoked.
	now := time.Now().UTC()
	left := storage.RunRecord{ID: e.store.NewRunID(now.Add(time.Second)), Module: "testmod", Hook: "count", Actor: string(testActor),
		Status: storage.RunRunning, JailMode: "off", Started: now, Deadline: now.Add(time.Hour), PID: 999999}
	fx.LeftRunID = left.ID
	if fx.LeftRunning, err = e.auth.Issue(string(testActor), left.ID, "hook", left.ID, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Update(func(tx *storage.Tx) error {
		if err := tx.PutRun(left); err != nil {
			return err
		}
		_, _, err := tx.AppendLines(left.ID, []storage.Line{{At: now, Level: storage.LevelInfo, Text: "half way"}}, 0)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	e.Close()

	out := storeFixtureV2
	if err := os.RemoveAll(out); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{storage.DBFile, storage.SealKeyFile, "host.secret"} {
		copyFile(t, filepath.Join(dir, name), filepath.Join(out, name))
	}
	raw, _ := json.MarshalIndent(fx, "", "  ")
	if err := os.WriteFile(filepath.Join(out, "tokens.json"), append(raw, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s: finished runs %v, left running %s", out, runs, left.ID)
}
