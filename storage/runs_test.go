package storage

import (
	"errors"
	"fmt"
	"slices"
	"strings"
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

// Pruning goes oldest first through the streams' own order (run ids sort
// by time), skips live runs, stops at the target, and keeps the stored
// total equal to what the streams hold.
func TestPruneStreamsOldestFirstSkipsLive(t *testing.T) {
	s := openStore(t, newDir(t))
	defer s.Close()
	now := time.Now()
	var ids []string
	for i := 0; i < 5; i++ {
		ids = append(ids, s.NewRunID(now))
	}
	if _, err := s.Update(func(tx *Tx) error {
		for i, id := range ids {
			r := testRun(id)
			if i == 0 {
				r.Status, r.Ended = RunRunning, nil // the oldest is still running
			}
			if err := tx.CreateRun(r); err != nil {
				return err
			}
			if _, _, err := tx.AppendLines(id, []Line{{At: now, Level: LevelInfo, Text: "0123456789"}}, 0); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	total := func() (n uint64, walked uint64) {
		s.View(func(tx *Tx) error {
			n = tx.StreamTotal()
			sizes, _ := tx.StreamSizes()
			for _, b := range sizes {
				walked += b
			}
			return nil
		})
		return
	}
	if n, w := total(); n != 50 || w != 50 {
		t.Fatalf("total %d, walk %d; want 50", n, w)
	}
	var freed uint64
	var done bool
	if _, err := s.Update(func(tx *Tx) (err error) {
		freed, done, err = tx.PruneStreams(25, 1) // a batch of one: not done yet
		return err
	}); err != nil || freed != 10 || done {
		t.Fatalf("first batch: freed %d done %v %v", freed, done, err)
	}
	if _, err := s.Update(func(tx *Tx) (err error) {
		freed, done, err = tx.PruneStreams(25, 10)
		return err
	}); err != nil || freed != 20 || !done {
		t.Fatalf("second batch: freed %d done %v %v", freed, done, err)
	}
	s.View(func(tx *Tx) error {
		for i, id := range ids {
			m, _ := tx.StreamMeta(id)
			if kept := m.Lines == 1; kept != (i == 0 || i == 4) {
				t.Errorf("stream %d (%s): kept=%v", i, id, kept)
			}
		}
		return nil
	})
	if n, w := total(); n != 20 || w != 20 {
		t.Errorf("after pruning: total %d, walk %d; want 20", n, w)
	}
	// Ending the live run takes it off the index; reconciling reads none.
	s.Update(func(tx *Tx) error { return tx.PutRun(testRun(ids[0])) })
	s.View(func(tx *Tx) error {
		if live, err := tx.LiveRuns(); err != nil || len(live) != 0 {
			t.Errorf("live runs after the last one ended: %+v %v", live, err)
		}
		return nil
	})
}

// Tokens come due at expiry or, sooner, at revocation; pruning reads and
// deletes only those due. A revoked token is kept as a tombstone, pruned
// with its whole day once that day has ended before the cutoff.
func TestPruneTokensByDueTime(t *testing.T) {
	s := openStore(t, newDir(t))
	defer s.Close()
	now := time.Now().UTC()
	tok := func(b byte, expires time.Duration) TokenRecord {
		return TokenRecord{ID: strings.Repeat(string("0123456789abcdef"[b]), 64), MAC: strings.Repeat("ab", 32), Subject: "m", Scope: "hook",
			Session: "s" + string("0123456789abcdef"[b]), Generation: 1, Created: now.Add(-time.Hour), Expires: now.Add(expires)}
	}
	expired, live, revoked := tok(1, -time.Minute), tok(2, time.Hour), tok(3, time.Hour)
	if _, err := s.Update(func(tx *Tx) error {
		for _, r := range []TokenRecord{expired, live, revoked} {
			if err := tx.PutToken(r); err != nil {
				return err
			}
		}
		at := now.Add(-time.Second)
		revoked.Revoked = &at
		return tx.PutToken(revoked) // leaves only its tombstone
	}); err != nil {
		t.Fatal(err)
	}
	s.View(func(tx *Tx) error {
		var notDue []string
		tx.EachTokenDueAfter(now, func(r TokenRecord) error { notDue = append(notDue, r.ID); return nil })
		if tx.TokenCount() != 3 || len(notDue) != 1 || notDue[0] != live.ID {
			t.Errorf("TokenCount %d, not yet due %v; want 3 and only the live one", tx.TokenCount(), notDue)
		}
		if got, err := tx.TokensOfSession(revoked.Session); err != nil || len(got) != 0 {
			t.Errorf("the revoked token is still in the session index: %+v %v", got, err)
		}
		return nil
	})
	prune := func(cutoff time.Time, want int) {
		t.Helper()
		var n int
		if _, err := s.Update(func(tx *Tx) (err error) {
			if !tx.TokensDue(cutoff) {
				t.Errorf("TokensDue(%s) says nothing is due", cutoff)
			}
			n, err = tx.PruneTokens(cutoff, 0)
			return err
		}); err != nil || n != want {
			t.Fatalf("PruneTokens(%s) = %d, %v; want %d", cutoff, n, err, want)
		}
	}
	// The expired record goes; today's tombstone stays until its day ends.
	prune(now, 1)
	s.View(func(tx *Tx) error {
		if _, err := tx.Token(expired.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("expired token not pruned: %v", err)
		}
		if got, _ := tx.TokensOfSession(expired.Session); len(got) != 0 {
			t.Errorf("pruned token still in the session index: %+v", got)
		}
		if _, err := tx.TokenTombstone(revoked.ID); err != nil {
			t.Errorf("today's tombstone pruned before its day ended: %v", err)
		}
		if _, err := tx.Token(live.ID); err != nil {
			t.Errorf("live token pruned: %v", err)
		}
		if tx.TokensDue(now) {
			t.Error("TokensDue after pruning")
		}
		return nil
	})
	// A day on, the tombstone's day has ended (and the live token expired).
	prune(now.Add(day), 2)
	s.View(func(tx *Tx) error {
		if _, err := tx.TokenTombstone(revoked.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("tombstone of a day that ended is kept: %v", err)
		}
		if tx.TokenCount() != 0 {
			t.Errorf("TokenCount %d after pruning everything", tx.TokenCount())
		}
		return nil
	})
}

// The index by session finds exactly a session's stored tokens: not
// another session whose name starts with it (even with a NUL), not one
// revoked, and it follows a token whose record is re-stored.
func TestTokensOfSession(t *testing.T) {
	s := openStore(t, newDir(t))
	defer s.Close()
	now := time.Now().UTC()
	n := 0
	tok := func(session string) TokenRecord {
		n++
		return TokenRecord{ID: fmt.Sprintf("%064x", n), MAC: strings.Repeat("ab", 32), Subject: "m", Scope: "hook",
			Session: session, Generation: 1, Created: now, Expires: now.Add(time.Hour)}
	}
	a1, a2, ab, anul, other, none := tok("a"), tok("a"), tok("ab"), tok("a\x00b"), tok("b"), tok("")
	gone := tok("a")
	if _, err := s.Update(func(tx *Tx) error {
		for _, r := range []TokenRecord{a1, a2, ab, anul, other, none, gone} {
			if err := tx.PutToken(r); err != nil {
				return err
			}
		}
		gone.Revoked = &now
		return tx.PutToken(gone)
	}); err != nil {
		t.Fatal(err)
	}
	ids := func(session string) []string {
		var out []string
		s.View(func(tx *Tx) error {
			rs, err := tx.TokensOfSession(session)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rs {
				out = append(out, r.ID)
			}
			return nil
		})
		slices.Sort(out)
		return out
	}
	for _, c := range []struct {
		session string
		want    []TokenRecord
	}{{"a", []TokenRecord{a1, a2}}, {"ab", []TokenRecord{ab}}, {"a\x00b", []TokenRecord{anul}}, {"b", []TokenRecord{other}}, {"c", nil}} {
		var want []string
		for _, r := range c.want {
			want = append(want, r.ID)
		}
		if got := ids(c.session); !slices.Equal(got, want) {
			t.Errorf("TokensOfSession(%q) = %v, want %v", c.session, got, want)
		}
	}
	// Deleting a record drops its entry.
	if _, err := s.Update(func(tx *Tx) error { return tx.DeleteToken(a2.ID) }); err != nil {
		t.Fatal(err)
	}
	if got := ids("a"); !slices.Equal(got, []string{a1.ID}) {
		t.Errorf("after deleting one: %v", got)
	}
}

// Pages by key range: each page starts where the last one ended, newest
// first, and together they are every run exactly once.
func TestRunsAndReceiptsByPage(t *testing.T) {
	s := openStore(t, newDir(t))
	defer s.Close()
	var ids []string
	if _, err := s.Update(func(tx *Tx) error {
		for i := 0; i < 25; i++ {
			id := s.NewRunID(time.Now())
			ids = append(ids, id)
			if err := tx.CreateRun(testRun(id)); err != nil {
				return err
			}
			if _, err := tx.AppendReceipt(Draft{Kind: "test.kind", Actor: "t"}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	s.View(func(tx *Tx) error {
		var got []string
		before := ""
		for page := 0; ; page++ {
			rs, err := tx.RunsBefore(before, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(rs) == 0 {
				break
			}
			for _, r := range rs {
				got = append(got, r.ID)
			}
			before = rs[len(rs)-1].ID
		}
		if len(got) != 25 {
			t.Fatalf("pages held %d runs, want 25", len(got))
		}
		for i, id := range got {
			if id != ids[24-i] {
				t.Fatalf("page order: run %d is %s, want %s", i, id, ids[24-i])
			}
		}
		rs, err := tx.Receipts(ReceiptFilter{Before: 11, Limit: 4})
		if err != nil || len(rs) != 4 || rs[0].Seq != 7 || rs[3].Seq != 10 {
			t.Errorf("receipts before 11, limit 4: %+v %v", rs, err)
		}
		rs, err = tx.Receipts(ReceiptFilter{Before: 3})
		if err != nil || len(rs) != 2 || rs[1].Seq != 2 {
			t.Errorf("receipts before 3, no limit: %+v %v", rs, err)
		}
		return nil
	})
}

// Tombstones are pruned a day at a time, oldest first: a batch stops at
// the day that reaches its limit, and a day still running is kept.
func TestPruneTombstonesByDay(t *testing.T) {
	s := openStore(t, newDir(t))
	defer s.Close()
	now := time.Now().UTC()
	var ids []string
	if _, err := s.Update(func(tx *Tx) error {
		for i := 0; i < 4; i++ { // revoked 3, 2, 1 and 0 days ago, two a day
			at := now.Add(-time.Duration(3-i) * day)
			for j := 0; j < 2; j++ {
				id := fmt.Sprintf("%02x%062x", 16*i+j, i)
				ids = append(ids, id)
				if err := tx.PutToken(TokenRecord{ID: id, MAC: strings.Repeat("ab", 32), Subject: "m", Scope: "hook", Session: "s",
					Generation: 2, Created: at.Add(-time.Minute), Expires: at.Add(time.Hour), Revoked: &at}); err != nil {
					return err
				}
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	kept := func() (n int) {
		s.View(func(tx *Tx) error {
			for _, id := range ids {
				if ts, err := tx.TokenTombstone(id); err == nil && ts.Generation == 2 {
					n++
				}
			}
			if c := tx.TokenCount(); c != n {
				t.Errorf("TokenCount %d, but %d tombstones read back", c, n)
			}
			return nil
		})
		return n
	}
	if n := kept(); n != 8 {
		t.Fatalf("%d tombstones stored, want 8", n)
	}
	for _, want := range []struct{ pruned, kept int }{{2, 6}, {2, 4}, {2, 2}, {0, 2}} {
		var n int
		s.Update(func(tx *Tx) (err error) { n, err = tx.PruneTokens(now, 1); return err })
		if n != want.pruned || kept() != want.kept {
			t.Fatalf("a batch of 1 pruned %d, left %d; want %d and %d", n, kept(), want.pruned, want.kept)
		}
	}
	s.View(func(tx *Tx) error {
		if _, err := tx.TokenTombstone(ids[7]); err != nil {
			t.Errorf("today's tombstone pruned: %v", err)
		}
		if _, err := tx.TokenTombstone(ids[0]); !errors.Is(err, ErrNotFound) {
			t.Errorf("the oldest tombstone kept: %v", err)
		}
		return nil
	})
}
