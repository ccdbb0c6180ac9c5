package engine

// Stream ingestion end to end: real child processes (jail off) writing to
// their stdout and stderr, lines made durable by the ingester, published
// in batches, and kept within the per-run limit and the cross-run budget.

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/wardenhq/warden/storage"
)

// scriptModule writes a module (under the user cache dir, like
// testModule) whose hooks are the given shell scripts: scripts maps a file
// name in the module dir to its body, hooks a hook name to its YAML body.
func scriptModule(t testing.TB, scripts map[string]string, hooks map[string]string) string {
	t.Helper()
	dir := testModule(t, hooks)
	for name, body := range scripts {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// setupScripts opens an engine with opts and registers a script module.
func setupScripts(t testing.TB, opts Options, scripts, hooks map[string]string) *Engine {
	t.Helper()
	e := openEngine(t, opts)
	if _, err := e.AddModule(testActor, scriptModule(t, scripts, hooks)); err != nil {
		t.Fatal(err)
	}
	return e
}

func runScript(t testing.TB, e *Engine, hook string) Outcome {
	t.Helper()
	o, err := e.RunHook(testActor, RunRequest{Module: "testmod", Hook: hook, Jail: JailOff})
	if err != nil {
		t.Fatal(err)
	}
	if !o.OK() {
		t.Fatalf("run of %s: %s: %s", hook, o.Run.Status, o.Run.Error)
	}
	return o
}

// drain returns every event queued for sub (everything a finished run
// published is queued by the time Wait returns) and whether a missed
// marker was among them.
func drain(t testing.TB, sub *Subscription) (evs []Event, missed bool) {
	t.Helper()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		ev, err := sub.Next(ctx)
		cancel()
		if err != nil {
			return evs, missed
		}
		if ev.Kind == EventMissed {
			missed = true
			continue
		}
		evs = append(evs, ev)
	}
}

func TestStream200kLinesDurableAndBatched(t *testing.T) {
	e := setupScripts(t, Options{},
		map[string]string{"seq.sh": "#!/bin/sh\nexec seq 1 200000\n"},
		map[string]string{"seq": "    run: [./seq.sh]\n"})
	sub := e.bus.subscribe(1 << 20)
	defer sub.Close()
	o := runScript(t, e, "seq")
	id := o.Run.ID

	const want = 200000
	m, err := e.StreamInfo(id)
	if err != nil {
		t.Fatal(err)
	}
	if m.Lines != want || m.First != 0 || m.Dropped != 0 {
		t.Fatalf("stream meta %+v, want %d lines, none dropped", m, want)
	}
	lines, err := e.StreamLines(id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != want {
		t.Fatalf("read back %d lines, want %d", len(lines), want)
	}
	if lines[0].Text != "1" || lines[want-1].Text != strconv.Itoa(want) {
		t.Errorf("first %q, last %q", lines[0].Text, lines[want-1].Text)
	}
	for i, l := range lines {
		if l.N != uint64(i) || l.Text != strconv.Itoa(i+1) || l.Level != storage.LevelInfo {
			t.Fatalf("line %d: %+v", i, l)
		}
	}

	evs, missed := drain(t, sub)
	var batches, sum int
	next := uint64(0)
	for _, ev := range evs {
		if ev.Kind != EventLines || ev.Lines.Run != id {
			continue
		}
		batches++
		for _, l := range ev.Lines.Lines {
			if !missed && l.N != next {
				t.Fatalf("lines event out of order: line %d where %d was next", l.N, next)
			}
			next = l.N + 1
			sum++
		}
	}
	t.Logf("%d lines arrived in %d lines events (missed marker: %v)", sum, batches, missed)
	if batches == 0 || batches >= 5000 {
		t.Errorf("%d lines events for %d lines: want batching (fewer than 5000)", batches, want)
	}
	if !missed && sum != want {
		t.Errorf("lines events carried %d lines, want %d", sum, want)
	}
}

func TestStreamRetentionKeepsNewest(t *testing.T) {
	const limit = 256 << 10
	const n = 22000 // ~2.1 MB of text
	pad := strings.Repeat("x", 90)
	e := setupScripts(t, Options{StreamLimit: limit},
		map[string]string{"big.sh": "#!/bin/sh\nseq 1 " + strconv.Itoa(n) + " | sed 's/$/ " + pad + "/'\n"},
		map[string]string{"big": "    run: [./big.sh]\n"})
	o := runScript(t, e, "big")
	m, err := e.StreamInfo(o.Run.ID)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("meta %+v", m)
	if m.Lines != n || m.Dropped == 0 || m.First != m.Dropped {
		t.Fatalf("meta %+v: want %d lines with some dropped from the front", m, n)
	}
	if m.Bytes > limit+maxChunkBytes {
		t.Errorf("%d bytes stored, over the limit %d plus one chunk", m.Bytes, limit)
	}
	lines, err := e.StreamLines(o.Run.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if uint64(len(lines)) != m.Lines-m.First {
		t.Fatalf("read %d lines, meta says %d are stored", len(lines), m.Lines-m.First)
	}
	var bytes uint64
	for i, l := range lines {
		if l.N != m.First+uint64(i) {
			t.Fatalf("line %d has N %d, want %d", i, l.N, m.First+uint64(i))
		}
		if want := strconv.FormatUint(l.N+1, 10) + " " + pad; l.Text != want {
			t.Fatalf("line N=%d: %q, want %q", l.N, l.Text, want)
		}
		bytes += uint64(len(l.Text))
	}
	if bytes != m.Bytes {
		t.Errorf("stored text is %d bytes, meta says %d", bytes, m.Bytes)
	}
	if last := lines[len(lines)-1].Text; last != strconv.Itoa(n)+" "+pad {
		t.Errorf("newest line not kept: last is %q", last)
	}
	// Reading from a line that was dropped starts at the first kept one.
	if some, _ := e.StreamLines(o.Run.ID, m.First/2, 3); len(some) != 3 || some[0].N != m.First {
		t.Errorf("reading from a dropped line: %+v", some)
	}
}

func TestStreamBudgetPrunesOlderRuns(t *testing.T) {
	e := setupScripts(t, Options{StreamBudget: 10000},
		map[string]string{"count.sh": "#!/bin/sh\nexec seq 1 2000\n"}, // 6893 bytes of text
		map[string]string{"count": "    run: [./count.sh]\n"})
	a := runScript(t, e, "count")
	e.pruneStreams() // whatever the pruner was woken for is done
	if m, _ := e.StreamInfo(a.Run.ID); m.Lines != 2000 {
		t.Fatalf("first run's stream, under budget: %+v", m)
	}
	b := runScript(t, e, "count")
	e.pruneStreams()
	if m, _ := e.StreamInfo(a.Run.ID); m.Lines != 0 || m.Bytes != 0 {
		t.Errorf("older run's stream not pruned once the next run passed the budget: %+v", m)
	}
	if lines, _ := e.StreamLines(a.Run.ID, 0, 0); len(lines) != 0 {
		t.Errorf("older run still has %d lines", len(lines))
	}
	if m, _ := e.StreamInfo(b.Run.ID); m.Lines != 2000 {
		t.Errorf("newest run's stream: %+v", m)
	}
	// The run record itself stays: only its stream goes.
	if r, err := e.Run(a.Run.ID); err != nil || r.Status != storage.RunSucceeded {
		t.Errorf("older run record: %+v %v", r, err)
	}
}

// TestStreamBudgetPrunerWakesItself: nobody calls the pruner here; the
// write that passes the budget wakes it, and the older stream goes.
func TestStreamBudgetPrunerWakesItself(t *testing.T) {
	e := setupScripts(t, Options{StreamBudget: 10000},
		map[string]string{"count.sh": "#!/bin/sh\nexec seq 1 2000\n"},
		map[string]string{"count": "    run: [./count.sh]\n"})
	a := runScript(t, e, "count")
	runScript(t, e, "count")
	var m storage.StreamMeta
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m, _ = e.StreamInfo(a.Run.ID); m.Lines == 0 {
			return
		}
	}
	t.Errorf("the older run's stream is still there 30 s after the budget was passed: %+v", m)
}

func TestStreamStdoutInfoStderrWarn(t *testing.T) {
	e := setupScripts(t, Options{},
		map[string]string{"both.sh": "#!/bin/sh\necho to-stdout\necho to-stderr >&2\n"},
		map[string]string{"both": "    run: [./both.sh]\n"})
	o := runScript(t, e, "both")
	lines, err := e.StreamLines(o.Run.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]storage.Level{}
	for _, l := range lines {
		got[l.Text] = l.Level
	}
	if len(lines) != 2 || got["to-stdout"] != storage.LevelInfo || got["to-stderr"] != storage.LevelWarn {
		t.Errorf("lines %+v: want to-stdout at info and to-stderr at warn", lines)
	}
}

// storedStreamBytes sums every run's stored stream bytes by walking them.
func storedStreamBytes(t *testing.T, e *Engine) uint64 {
	t.Helper()
	var total uint64
	if err := e.store.View(func(tx *storage.Tx) error {
		sizes, err := tx.StreamSizes()
		for _, n := range sizes {
			total += n
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return total
}

// The stored running total that spares everyone a walk of every stream
// must match a walk, through appends, a run's own limit, pruning and a
// reopen; and pruning must bring the total under the budget, oldest first.
func TestStreamBudgetRunningTotal(t *testing.T) {
	const each = 6893 // text bytes of seq 1 2000 (line ends are not stored)
	dir := newDataDir(t)
	scripts := map[string]string{"count.sh": "#!/bin/sh\nexec seq 1 2000\n", "big.sh": "#!/bin/sh\nseq 1 30000\n"}
	hooks := map[string]string{"count": "    run: [./count.sh]\n", "big": "    run: [./big.sh]\n"}
	mod := scriptModule(t, scripts, hooks)
	e, err := Open(Options{DataDir: dir, StreamBudget: 3*each - 100, StreamLimit: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.AddModule(testActor, mod); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := 0; i < 3; i++ {
		ids = append(ids, runScript(t, e, "count").Run.ID)
		e.pruneStreams()
		if got, want := e.streamTotal(), storedStreamBytes(t, e); got != want {
			t.Fatalf("after run %d: running total %d, storage %d", i, got, want)
		}
	}
	// The third run took the total over budget: the oldest stream went
	// (only: that was enough), the newer two stayed.
	for i, want := range []uint64{0, 2000, 2000} {
		if m, _ := e.StreamInfo(ids[i]); m.Lines != want {
			t.Errorf("run %d after the budget was passed: %+v, want %d lines kept", i, m, want)
		}
	}
	// A run over its own limit: the total counts what that dropped, and
	// the older streams make way.
	// The pruner is held off while the big run's stream is looked at: over
	// the budget on its own, it goes as soon as the run has ended.
	e.pruneMu.Lock()
	big := runScript(t, e, "big")
	m, _ := e.StreamInfo(big.Run.ID)
	e.pruneMu.Unlock()
	if m.Dropped == 0 {
		t.Errorf("the big run was not over its limit: %+v", m)
	}
	e.pruneStreams()
	if got, want := e.streamTotal(), storedStreamBytes(t, e); got != want || got > 3*each-100 {
		t.Fatalf("after a run over its limit: running total %d, storage %d, budget %d", got, want, 3*each-100)
	}
	for _, id := range ids[1:] {
		if m, _ := e.StreamInfo(id); m.Bytes != 0 {
			t.Errorf("run %s older than the big run kept its stream: %+v", id, m)
		}
	}
	last := runScript(t, e, "count")
	e.pruneStreams()
	if got, want := e.streamTotal(), storedStreamBytes(t, e); got != want || got != each {
		t.Fatalf("after the last run: running total %d, storage %d, want %d (the last run's)", got, want, each)
	}
	if m, _ := e.StreamInfo(last.Run.ID); m.Lines != 2000 {
		t.Errorf("last run: %+v", m)
	}
	e.Close()

	// A reopened engine reads the total (no walk), and prunes at once when
	// it is over a (now smaller) budget.
	e2 := openEngine(t, Options{DataDir: dir, StreamBudget: 1})
	e2.pruneStreams()
	if got, want := e2.streamTotal(), storedStreamBytes(t, e2); got != want || got != 0 {
		t.Fatalf("after reopening with a 1-byte budget: running total %d, storage %d, want 0", got, want)
	}
}

// A stream record pruning cannot read stops pruning, not the run: the next
// run starts and succeeds, and a stream.error receipt tells the operator
// why the budget is not kept, so the failure is never silent.
func TestStreamBudgetPruneFailureIsReceipted(t *testing.T) {
	dir := newDataDir(t)
	mod := scriptModule(t, map[string]string{"count.sh": "#!/bin/sh\nexec seq 1 10\n"}, map[string]string{"count": "    run: [./count.sh]\n"})
	e := openEngine(t, Options{DataDir: dir})
	if _, err := e.AddModule(testActor, mod); err != nil {
		t.Fatal(err)
	}
	first := runScript(t, e, "count")
	e.Close()

	// Corrupt the first run's stream meta record with plain bbolt.
	db, err := bolt.Open(filepath.Join(dir, storage.DBFile), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("streams")).Bucket([]byte(first.Run.ID)).Put([]byte("m"), []byte("not a record"))
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()

	e2 := openEngine(t, Options{DataDir: dir, StreamBudget: 1})
	if o := runScript(t, e2, "count"); !o.OK() {
		t.Fatalf("the run after a failed prune: %+v", o.Run)
	}
	// The pruner was woken at open and by the run's output; this pass
	// returns after any in flight, and fails the same way (still one
	// receipt: only an engine's first failure is receipted).
	e2.pruneStreams()
	rs, err := e2.Receipts(ReceiptFilter{Kind: storage.KindStreamError})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || !strings.Contains(rs[0].Summary, "pruning old streams failed") || !strings.Contains(rs[0].Summary, "warden doctor") {
		t.Fatalf("stream.error receipts after a failed prune: %+v", rs)
	}
}
