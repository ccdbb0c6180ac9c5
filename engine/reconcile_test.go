package engine

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"warden/engine/caps"
	"warden/storage"
)

// A run its engine left "running" (the engine was killed mid-run: the
// store holds the run record and its live token, as the start commit
// wrote them) is closed at the next open: failed, with a hook.end, and
// its token revoked with a token.revoke receipt in the same commit.
func TestRunFoundDeadAtOpenIsClosedAndItsTokenRevoked(t *testing.T) {
	dir := newDataDir(t)
	e, err := Open(Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	rec := RunRecord{ID: e.store.NewRunID(now), Module: "m", Hook: "h", Actor: string(testActor), Status: storage.RunRunning,
		JailMode: JailBwrap, Started: now, Deadline: now.Add(time.Hour), PID: 999999}
	tok, err := e.auth.Mint(string(testActor), rec.ID, "hook", rec.ID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Update(func(tx *storage.Tx) error {
		if err := tok.Record(tx); err != nil {
			return err
		}
		return tx.CreateRun(rec)
	}); err != nil {
		t.Fatal(err)
	}
	if class, _ := e.auth.Check(tok.Token, rec.ID, "hook", rec.ID); class != caps.Valid {
		t.Fatalf("the run's token before the crash: %s", class)
	}
	e.Close()

	e = openEngine(t, Options{DataDir: dir})
	got, err := e.Run(rec.ID)
	if err != nil || got.Status != storage.RunFailed || !strings.Contains(got.Error, "stopped while the run was in progress") {
		t.Fatalf("run after reopen: %+v, %v", got, err)
	}
	if class, err := e.auth.Check(tok.Token, rec.ID, "hook", rec.ID); class != caps.Revoked || err == nil {
		t.Errorf("the dead run's token after reopen: %s, %v; want REVOKED", class, err)
	}
	var end, revoke *Receipt
	for _, r := range allReceipts(t, e) {
		var d map[string]any
		json.Unmarshal(r.Details, &d)
		switch {
		case r.Kind == "hook.end" && d["run"] == rec.ID:
			end = &r
		case r.Kind == "token.revoke" && r.Subject == rec.ID:
			revoke = &r
		}
	}
	if end == nil || revoke == nil {
		t.Fatalf("receipts: hook.end %v, token.revoke %v; want both", end, revoke)
	}
	if revoke.Seq != end.Seq+1 || !strings.Contains(revoke.Summary, "found dead") || revoke.Actor != "engine" {
		t.Errorf("token.revoke %+v: want it right after the hook.end (seq %d), by the engine, saying the run was found dead", *revoke, end.Seq)
	}
}
