package storage

import (
	"errors"
	"testing"
	"time"
)

func testRun(id string) RunRecord {
	now := time.Now().UTC()
	return RunRecord{ID: id, Module: "m", Hook: "h", Actor: "local:t", Status: RunSucceeded, JailMode: "off",
		Started: now, Deadline: now.Add(time.Minute), Ended: &now}
}

// A burst of run starts in one second (the 270 runs/s that collided 1 in
// 40,000 with random suffixes) gets distinct ids that sort in the order
// they were handed out, and so does a clock that steps back.
func TestRunIDsUniqueAndOrdered(t *testing.T) {
	s := openStore(t, newDir(t))
	defer s.Close()
	at := time.Date(2026, 11, 29, 14, 9, 32, 0, time.UTC)
	prev := ""
	for i := 0; i < 200_000; i++ {
		now := at.Add(time.Duration(i%1000) * time.Microsecond) // all within one second
		if i == 100_000 {
			at = at.Add(-time.Hour) // the clock steps back an hour
		}
		id := s.NewRunID(now)
		if !ValidRunID(id) {
			t.Fatalf("id %d: %q is not a valid run id", i, id)
		}
		if id <= prev {
			t.Fatalf("id %d: %q does not sort after %q", i, id, prev)
		}
		prev = id
	}
	if next := s.NewRunID(at.Add(2 * time.Hour)); next[:15] != "20261129T150932" {
		t.Errorf("a clock past the last id's second starts that second: %s", next)
	}
}

// A reopened store continues after the newest stored id, even one from a
// clock that was ahead.
func TestRunIDsContinueAfterStored(t *testing.T) {
	dir := newDir(t)
	s := openStore(t, dir)
	future := "20990101T000000-fffff0"
	if _, err := s.Update(func(tx *Tx) error { return tx.CreateRun(testRun(future)) }); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openStore(t, dir)
	defer s.Close()
	for i := 0; i < 40; i++ { // past the suffix's end: the next second
		if id := s.NewRunID(time.Now()); id <= future {
			t.Fatalf("new id %s does not sort after the stored %s", id, future)
		} else {
			future = id
		}
	}
}

// CreateRun never overwrites: a second run under a stored id is refused
// and the stored run is untouched.
func TestCreateRunRefusesStoredID(t *testing.T) {
	s := openStore(t, newDir(t))
	defer s.Close()
	first := testRun("20261129T140932-3fa2c1")
	first.Hook = "first"
	if _, err := s.Update(func(tx *Tx) error { return tx.CreateRun(first) }); err != nil {
		t.Fatal(err)
	}
	second := testRun(first.ID)
	second.Hook = "second"
	_, err := s.Update(func(tx *Tx) error { return tx.CreateRun(second) })
	if !errors.Is(err, ErrRunExists) {
		t.Fatalf("CreateRun over a stored id: %v, want ErrRunExists", err)
	}
	s.View(func(tx *Tx) error {
		got, err := tx.Run(first.ID)
		if err != nil || got.Hook != "first" {
			t.Errorf("stored run after the refused create: %+v %v", got, err)
		}
		return nil
	})
}
