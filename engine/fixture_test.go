package engine

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wardenhq/warden/storage"
)

// storeFixtureV1 is a data dir written by the schema-1 code (commit
// 4673b5d), kept to prove that every later build opens and migrates it.
const storeFixtureV1 = "../testdata/store-v1"

// TestWriteStoreFixtureV1 regenerates storeFixtureV1. It is a generator,
// not a test: it only runs when asked, and only the schema-1 code may run
// it (a later build would write a later schema).
//
//	WARDEN_WRITE_STORE_FIXTURE=1 go test -run TestWriteStoreFixtureV1 ./engine/
func TestWriteStoreFixtureV1(t *testing.T) {
	if os.Getenv("WARDEN_WRITE_STORE_FIXTURE") == "" {
		t.Skip("a fixture generator; set WARDEN_WRITE_STORE_FIXTURE=1 to rewrite " + storeFixtureV1)
	}
	dir := newDataDir(t)
	e := setupScripts(t, Options{DataDir: dir},
		map[string]string{"count.sh": "#!/bin/sh\nseq 1 20\n", "fail.sh": "#!/bin/sh\necho oops >&2\nexit 3\n"},
		map[string]string{"count": "    run: [./count.sh]\n", "fail": "    run: [./fail.sh]\n"})
	var done []string
	for i := 0; i < 3; i++ {
		done = append(done, runScript(t, e, "count").Run.ID)
	}
	if o, err := e.RunHook(testActor, RunRequest{Module: "testmod", Hook: "fail", Jail: JailOff}); err != nil || o.OK() {
		t.Fatalf("fail hook: %+v %v", o, err)
	}
	if err := e.SetSecret(testActor, "testmod", "api_key", "fixture-secret"); err != nil {
		t.Fatal(err)
	}
	// A run its engine never finished (it was killed), with a stream, and
	// a token that expired a month ago and was never pruned.
	now := time.Now().UTC()
	left := storage.RunRecord{ID: e.store.NewRunID(now.Add(time.Second)), Module: "testmod", Hook: "count", Actor: string(testActor),
		Status: storage.RunRunning, JailMode: "off", Started: now, Deadline: now.Add(time.Hour), PID: 999999}
	hex := strings.Repeat("ab", 32)
	old := storage.TokenRecord{ID: strings.Repeat("cd", 32), MAC: hex, Subject: "testmod", Scope: "hook", Session: "old",
		Generation: 1, Created: now.Add(-31 * 24 * time.Hour), Expires: now.Add(-30 * 24 * time.Hour)}
	if _, err := e.store.Update(func(tx *storage.Tx) error {
		if err := tx.PutRun(left); err != nil {
			return err
		}
		if _, _, err := tx.AppendLines(left.ID, []storage.Line{{At: now, Level: storage.LevelInfo, Text: "half way"}}, 0); err != nil {
			return err
		}
		return tx.PutToken(old)
	}); err != nil {
		t.Fatal(err)
	}
	e.Close()

	out := storeFixtureV1
	if err := os.RemoveAll(out); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{storage.DBFile, storage.SealKeyFile, "host.secret"} {
		copyFile(t, filepath.Join(dir, name), filepath.Join(out, name))
	}
	t.Logf("wrote %s: finished runs %v, left running %s", out, done, left.ID)
}

func copyFile(t testing.TB, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	f, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(f, in); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
