package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wardenhq/warden/engine/caps"
	"github.com/wardenhq/warden/engine/jail"
	"github.com/wardenhq/warden/engine/jail/cgroup"
	"github.com/wardenhq/warden/engine/perms"
	"github.com/wardenhq/warden/storage"
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

// A dead run's question is closed at the next open, as a cancel closes
// it: an operator cannot approve what a run that is gone asked (the
// approval would be receipted for a run already failed). And the cgroup
// its engine left behind, with whatever was still
// in it, is removed, saying so in the run's hook.end.
func TestDeadRunsQuestionAndCgroupAreClosed(t *testing.T) {
	needLimits(t)
	dir := newDataDir(t)
	e, err := Open(Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	rec := RunRecord{ID: e.store.NewRunID(now), Module: "m", Hook: "h", Actor: string(testActor), Status: storage.RunRunning,
		JailMode: JailBwrap, Started: now, Deadline: now.Add(time.Hour), PID: 999999}
	op, err := perms.NewOp("module:m", "operator.confirm", map[string]any{"message": "Store it?"})
	if err != nil {
		t.Fatal(err)
	}
	var req storage.RequestRecord
	if _, err := e.store.Update(func(tx *storage.Tx) error {
		if err := tx.CreateRun(rec); err != nil {
			return err
		}
		req, err = perms.Open(tx, perms.Ask{Op: op, Requester: storage.Requester{Run: rec.ID, Module: "m", Hook: "h"}, TTL: time.Hour}, now)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// What the run's group held when its engine died.
	g, err := cgroup.New(rec.ID, cgroup.Limits{Pids: 16})
	if err != nil {
		t.Fatal(err)
	}
	left := exec.Command("sleep", "300")
	if err := g.Start(left); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- left.Wait() }()
	dirs := runGroupDirs(rec.ID)
	if len(dirs) == 0 {
		t.Fatal("the run's group is nowhere to be found")
	}
	e.Close()

	e = openEngine(t, Options{DataDir: dir})
	got, err := e.Request(req.ID)
	if err != nil || got.Decision == nil || got.Decision.Verdict != Deny || got.Decision.By != perms.EngineActor ||
		!strings.Contains(got.Decision.Reason, "the run ended before a decision") {
		t.Fatalf("the dead run's request after reopen: %+v %v; want denied by the engine, the run having ended", got.Decision, err)
	}
	if _, err := e.Approve(testActor, req.ID, ""); err == nil {
		t.Errorf("an operator approved a dead run's question")
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		left.Process.Kill()
		t.Errorf("the process left in the dead run's group was not killed")
	}
	if d := runGroupDirs(rec.ID); len(d) > 0 {
		t.Errorf("the dead run's cgroup is still there: %v", d)
	}
	for _, r := range allReceipts(t, e) {
		var d map[string]any
		json.Unmarshal(r.Details, &d)
		if r.Kind == "hook.end" && d["run"] == rec.ID {
			if c, _ := d["cgroup"].(string); !strings.HasPrefix(c, "left behind; removed (") {
				t.Errorf("hook.end says of the cgroup %q", c)
			}
		}
	}
}

// A run found "running" whose engine is alive (a copy of a data dir in
// use, opened beside it) is closed in the copy, but its cgroup, which is
// the live engine's run's, is left alone.
func TestDeadRunOfALiveEngineIsNotSwept(t *testing.T) {
	needLimits(t)
	live := exec.Command("sleep", "300") // stands for the live engine
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { live.Process.Kill(); live.Wait() }()
	dir := newDataDir(t)
	e, err := Open(Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	rec := RunRecord{ID: e.store.NewRunID(now), Module: "m", Hook: "h", Actor: string(testActor), Status: storage.RunRunning,
		JailMode: JailBwrap, Started: now, Deadline: now.Add(time.Hour), PID: live.Process.Pid}
	if _, err := e.store.Update(func(tx *storage.Tx) error { return tx.CreateRun(rec) }); err != nil {
		t.Fatal(err)
	}
	g, err := cgroup.New(rec.ID, cgroup.Limits{Pids: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Delete()
	e.Close()

	e = openEngine(t, Options{DataDir: dir})
	if d := runGroupDirs(rec.ID); len(d) == 0 {
		t.Errorf("the live engine's run group was swept")
	}
	for _, r := range allReceipts(t, e) {
		var d map[string]any
		json.Unmarshal(r.Details, &d)
		if r.Kind == "hook.end" && d["run"] == rec.ID {
			if c, _ := d["cgroup"].(string); !strings.Contains(c, "not swept: pid") {
				t.Errorf("hook.end says of the cgroup %q", c)
			}
		}
	}
}

// A landlock stage whose engine died and whose parent-death signal never
// came (the fault the real stage cannot be made to show: here a shell
// that, like the stage, kills its child on EngineGone) is ended by the
// next engine through its stamp, with its child; the receipt says so. A
// stamp whose start time is not the live process's (the pid reused)
// touches nothing.
func TestDeadRunsLandlockStageIsEnded(t *testing.T) {
	dir := newDataDir(t)
	e, err := Open(Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	marker := fmt.Sprintf("300.%09d", time.Now().UnixNano()%1e9)
	stage := exec.Command("sh", "-c", `trap 'kill -9 $c; exit 0' USR1; sleep `+marker+` & c=$!; wait`)
	if err := stage.Start(); err != nil {
		t.Fatal(err)
	}
	stageDone := make(chan error, 1)
	go func() { stageDone <- stage.Wait() }()
	t.Cleanup(func() { stage.Process.Kill() })
	bystander := exec.Command("sleep", "300")
	if err := bystander.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bystander.Process.Kill(); bystander.Wait() })
	for deadline := time.Now().Add(10 * time.Second); len(markedProcs(marker)) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the stage's child did not start")
		}
	}

	now := time.Now().UTC()
	os.MkdirAll(filepath.Join(dir, "runs"), 0o700)
	var runs []RunRecord
	for i, pid := range []int{stage.Process.Pid, bystander.Process.Pid} {
		rec := RunRecord{ID: e.store.NewRunID(now), Module: "m", Hook: "h", Actor: string(testActor), Status: storage.RunRunning,
			JailMode: JailLandlock, Started: now, Deadline: now.Add(time.Hour), PID: 999999}
		s, err := jail.StampOf(pid)
		if err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			s.Start++ // another process that had this pid
		}
		if err := os.WriteFile(e.stampPath(rec.ID), []byte(s.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := e.store.Update(func(tx *storage.Tx) error { return tx.CreateRun(rec) }); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, rec)
	}
	e.Close()

	e = openEngine(t, Options{DataDir: dir})
	select {
	case <-stageDone:
	case <-time.After(10 * time.Second):
		t.Fatal("the stage named by its stamp still runs after the next open")
	}
	if len(markedProcs(marker)) > 0 {
		t.Errorf("the stage's child outlived it")
	}
	if err := syscall.Kill(bystander.Process.Pid, 0); err != nil {
		t.Errorf("a process under a stale stamp was hit: %v", err)
	}
	for _, r := range runs {
		if _, err := os.Stat(e.stampPath(r.ID)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("run %s's stamp is still there: %v", r.ID, err)
		}
	}
	found := false
	for _, r := range allReceipts(t, e) {
		var d map[string]any
		json.Unmarshal(r.Details, &d)
		if r.Kind == "hook.end" && d["run"] == runs[0].ID {
			found = true
			if s, _ := d["stage"].(string); !strings.Contains(s, "was still running: ended") {
				t.Errorf("the dead run's hook.end says nothing of its stage: %s", r.Details)
			}
		}
		if r.Kind == "hook.end" && d["run"] == runs[1].ID && d["stage"] != nil {
			t.Errorf("the stale stamp's run claims a stage: %s", r.Details)
		}
	}
	if !found {
		t.Error("no hook.end for the dead landlock run")
	}
}
