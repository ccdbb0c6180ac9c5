package storage

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// runSeeds are run records of the shapes the store writes: running,
// ended with an exit, failed with an error, with inputs and outputs, a
// network, a negative exit, and one whose strings need escapes.
func runSeeds() []RunRecord {
	t0 := time.Date(2026, 11, 29, 14, 9, 32, 123456789, time.UTC)
	end := t0.Add(5 * time.Millisecond)
	zero, neg := 0, -1
	return []RunRecord{
		{ID: "20261129T140932-3fa2c1", Module: "bench", Hook: "noop", Actor: "local:ann", Status: RunRunning, JailMode: "bwrap", Started: t0, Deadline: t0.Add(time.Minute), PID: 4242},
		{ID: "20261129T140932-3fa2c2", Module: "bench", Hook: "noop", Actor: "local:ann", Status: RunSucceeded, JailMode: "off", Started: t0, Deadline: t0.Add(time.Minute), Ended: &end, Exit: &zero, PID: 1},
		{ID: "20261129T140933-000000", Module: "m-x", Hook: "h", Actor: "", Status: RunFailed, JailMode: "bwrap", Started: t0.Truncate(time.Second), Deadline: t0, Ended: &end, Exit: &neg,
			Error: "exit status 1 é", Inputs: json.RawMessage(`{"a":["b",1.5,null]}`), Outputs: json.RawMessage(`"x"`), Network: "egress"},
		{ID: "20261129T140934-00000f", Module: "bench", Hook: "noop", Actor: "local:ann", Status: RunCancelled, JailMode: "bwrap", Started: t0, Deadline: t0, Ended: &end, Error: `said "no"`},
	}
}

// A page of runs reads the records the store writes without
// encoding/json when their bytes are canonical, and gets exactly what the
// strict codec gets; escaped ones go the strict codec; a damaged one is
// still a CorruptError naming its key.
func TestReadRunTakesCanonical(t *testing.T) {
	dir := newDir(t)
	s := openStore(t, dir)
	want := runSeeds()
	for i, r := range want {
		raw, err := encodeRecord(&r)
		if err != nil {
			t.Fatal(err)
		}
		var fast RunRecord
		canonical := decodeCanonicalRun(raw, &fast)
		if escaped := i == 3; canonical == escaped {
			t.Errorf("run %d: canonical path took it = %v, want %v:\n%s", i, canonical, !escaped, raw)
		}
		if canonical && !reflect.DeepEqual(fast, want[i]) {
			t.Errorf("run %d: canonical path read\n%#v\nwant\n%#v", i, fast, want[i])
		}
		if _, err := s.Update(func(tx *Tx) error { return tx.PutRun(r) }); err != nil {
			t.Fatal(err)
		}
	}
	var got []RunRecord
	if err := s.View(func(tx *Tx) (err error) { got, err = tx.RunsBefore("", 0); return err }); err != nil {
		t.Fatal(err)
	}
	for i, j := 0, len(got)-1; i < j; i, j = i+1, j-1 {
		got[i], got[j] = got[j], got[i]
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("page read\n%#v\nwant\n%#v", got, want)
	}
	s.Close()

	// A run whose status is not a status: neither path takes it.
	bad := rawGet(t, dir, bucketRuns, []byte(want[1].ID))
	bad = bytes.Replace(bad, []byte(`"status":"succeeded"`), []byte(`"status":"Succeeded"`), 1)
	rawPut(t, dir, bucketRuns, []byte(want[1].ID), bad)
	s = openStore(t, dir)
	defer s.Close()
	err := s.View(func(tx *Tx) error { _, err := tx.RunsBefore("", 0); return err })
	wantCorrupt(t, err, "runs", want[1].ID)
}

// FuzzReadRunFast: whatever the canonical path takes, the strict codec
// takes too and reads to the same RunRecord.
func FuzzReadRunFast(f *testing.F) {
	for _, r := range runSeeds() {
		raw, err := encodeRecord(&r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var fast RunRecord
		if !decodeCanonicalRun(raw, &fast) {
			return
		}
		var strict RunRecord
		if err := decodeRecord("runs", "k", raw, &strict); err != nil {
			t.Fatalf("canonical path took what the strict codec refuses (%v):\n%s", err, raw)
		}
		if !reflect.DeepEqual(fast, strict) {
			t.Fatalf("canonical path read\n%#v\nthe strict codec\n%#v\nfrom %s", fast, strict, raw)
		}
	})
}
