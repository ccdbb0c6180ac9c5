package storage

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestGroupCommitConcurrentAppends(t *testing.T) {
	s := openStore(t, newDir(t))
	defer s.Close()
	const goroutines, each = 64, 50
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		seen = map[uint64]string{}
	)
	errs := make(chan error, goroutines)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				r, err := s.AppendReceipt(Draft{Kind: "test.group", Actor: fmt.Sprintf("g%d", g), Summary: fmt.Sprintf("%d/%d", g, i)})
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				if prev, dup := seen[r.Seq]; dup {
					mu.Unlock()
					errs <- fmt.Errorf("seq %d returned twice (%s and %s)", r.Seq, prev, r.Summary)
					return
				}
				seen[r.Seq] = r.Summary
				mu.Unlock()
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(seen) != goroutines*each {
		t.Fatalf("%d distinct seqs returned", len(seen))
	}
	var rs []Receipt
	if err := s.View(func(tx *Tx) (err error) { rs, err = tx.Receipts(ReceiptFilter{}); return }); err != nil {
		t.Fatal(err)
	}
	if len(rs) != goroutines*each {
		t.Fatalf("%d receipts stored", len(rs))
	}
	for i, r := range rs {
		if r.Seq != uint64(i+1) || seen[r.Seq] != r.Summary {
			t.Fatalf("receipt %d: seq %d summary %q (returned %q)", i+1, r.Seq, r.Summary, seen[r.Seq])
		}
	}
	v, err := s.VerifyReceipts()
	if err != nil || !v.Intact || v.Count != goroutines*each {
		t.Fatalf("VerifyReceipts = %+v %v", v, err)
	}
}

// TestGroupCommitFailedWriterIsolated holds the committer busy so that a
// crowd of writers, one of them failing, queue up and share one batch.
func TestGroupCommitFailedWriterIsolated(t *testing.T) {
	s := openStore(t, newDir(t))
	defer s.Close()
	release := make(chan struct{})
	blocked := make(chan struct{})
	first := make(chan error, 1)
	go func() {
		_, err := s.Update(func(tx *Tx) error {
			select {
			case <-blocked:
			default:
				close(blocked)
			}
			<-release
			_, err := tx.AppendReceipt(Draft{Kind: "test.first", Actor: "t"})
			return err
		})
		first <- err
	}()
	<-blocked

	errBad := errors.New("writer refuses")
	const n = 20
	type result struct {
		i   int
		rs  []Receipt
		err error
	}
	results := make(chan result, n+1)
	runs := make([]int, n+1)
	var runsMu sync.Mutex
	for i := 0; i <= n; i++ {
		go func(i int) {
			rs, err := s.Update(func(tx *Tx) error {
				runsMu.Lock()
				runs[i]++
				runsMu.Unlock()
				if err := tx.ConfigSet("mod", fmt.Sprintf("k%d", i), "v"); err != nil {
					return err
				}
				if _, err := tx.AppendReceipt(Draft{Kind: "test.batch", Actor: "t", Subject: fmt.Sprint(i)}); err != nil {
					return err
				}
				if i == n/2 {
					return fmt.Errorf("writer %d: %w", i, errBad)
				}
				return nil
			})
			results <- result{i, rs, err}
		}(i)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(s.commits) < n+1 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d writers queued", len(s.commits))
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for j := 0; j <= n; j++ {
		r := <-results
		if r.i == n/2 {
			if !errors.Is(r.err, errBad) || r.rs != nil {
				t.Errorf("failing writer got %v, %v", r.rs, r.err)
			}
			continue
		}
		if r.err != nil || len(r.rs) != 1 || r.rs[0].Subject != fmt.Sprint(r.i) {
			t.Errorf("writer %d: %+v %v", r.i, r.rs, r.err)
		}
	}
	s.View(func(tx *Tx) error {
		for i := 0; i <= n; i++ {
			_, ok, err := tx.ConfigGet("mod", fmt.Sprintf("k%d", i))
			if err != nil || ok != (i != n/2) {
				t.Errorf("k%d: landed=%v err=%v", i, ok, err)
			}
		}
		rs, _ := tx.Receipts(ReceiptFilter{Kind: "test.batch"})
		if len(rs) != n {
			t.Errorf("%d batch receipts landed, want %d", len(rs), n)
		}
		for _, r := range rs {
			if r.Subject == fmt.Sprint(n/2) {
				t.Error("the failing writer's receipt landed")
			}
		}
		return nil
	})
	// It ran once in the shared batch and once alone to get its own error.
	if runs[n/2] != 2 {
		t.Errorf("failing writer ran %d times, want 2 (runs: %v)", runs[n/2], runs)
	}
	v, err := s.VerifyReceipts()
	if err != nil || !v.Intact || v.Count != n+1 {
		t.Fatalf("VerifyReceipts = %+v %v", v, err)
	}
}

func TestUpdateAfterCloseAndConcurrentClose(t *testing.T) {
	s := openStore(t, newDir(t))
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				_, err := s.AppendReceipt(Draft{Kind: "test.close", Actor: "t"})
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if _, err := s.Update(func(*Tx) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Errorf("Update after Close: %v", err)
	}
	s = openStore(t, s.Dir())
	defer s.Close()
	if v, _ := s.VerifyReceipts(); !v.Intact || v.Count == 0 {
		t.Errorf("after concurrent close: %+v", v)
	}
}

func TestUpdateReturnsOnlyCommittedReceipts(t *testing.T) {
	s := openStore(t, newDir(t))
	defer s.Close()
	rs, err := s.Update(func(tx *Tx) error {
		for i := 0; i < 3; i++ {
			if _, err := tx.AppendReceipt(Draft{Kind: "test.multi", Actor: "t"}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil || len(rs) != 3 || rs[0].Seq != 1 || rs[2].Seq != 3 || rs[1].Prev != rs[0].Hash {
		t.Fatalf("Update = %+v %v", rs, err)
	}
	rs, err = s.Update(func(tx *Tx) error {
		tx.AppendReceipt(Draft{Kind: "test.multi", Actor: "t"})
		return errors.New("no")
	})
	if err == nil || rs != nil {
		t.Fatalf("failed Update = %+v %v", rs, err)
	}
	r, err := s.AppendReceipt(Draft{Kind: "test.multi", Actor: "t"})
	if err != nil || r.Seq != 4 {
		t.Fatalf("after a failed Update: %+v %v", r, err)
	}
}

// TestAfterCommitRunsOnceCommittedAndNeverOtherwise: AfterCommit's fns
// run after their transaction lands and before its Update returns, once
// even when a failing batch mate made the batch run again, and never for
// a transaction that failed.
func TestAfterCommitRunsOnceCommittedAndNeverOtherwise(t *testing.T) {
	s := openStore(t, newDir(t))
	defer s.Close()
	var mu sync.Mutex
	ran := map[string]int{}
	note := func(name string) func() {
		return func() { mu.Lock(); ran[name]++; mu.Unlock() }
	}
	count := func(name string) int { mu.Lock(); defer mu.Unlock(); return ran[name] }

	if _, err := s.Update(func(tx *Tx) error {
		tx.AfterCommit(note("alone"))
		return tx.ConfigSet("mod", "a", "1")
	}); err != nil || count("alone") != 1 {
		t.Fatalf("a committed update: err %v, its fn ran %d times", err, count("alone"))
	}
	if _, err := s.Update(func(tx *Tx) error {
		tx.AfterCommit(note("failed"))
		return errors.New("refused")
	}); err == nil || count("failed") != 0 {
		t.Fatalf("a failed update: err %v, its fn ran %d times", err, count("failed"))
	}

	// Many at once share batches; the failing one makes its batch run again.
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.Update(func(tx *Tx) error {
				tx.AfterCommit(note(fmt.Sprint(i)))
				if err := tx.ConfigSet("mod", fmt.Sprint("k", i), "v"); err != nil {
					return err
				}
				if i == 7 {
					return errors.New("writer 7 refuses")
				}
				return nil
			})
			if want := map[bool]int{true: 0, false: 1}[i == 7]; count(fmt.Sprint(i)) != want {
				t.Errorf("writer %d's fn ran %d times when its Update returned, want %d", i, count(fmt.Sprint(i)), want)
			}
		}()
	}
	wg.Wait()
}

// TestConfigGenerationMovesWithConfigWrites: a committed config set or
// delete moves ConfigGeneration; a failed one and other writes do not.
func TestConfigGenerationMovesWithConfigWrites(t *testing.T) {
	s := openStore(t, newDir(t))
	defer s.Close()
	g := s.ConfigGeneration()
	step := func(what string, moves bool, fn func(*Tx) error) {
		t.Helper()
		s.Update(fn)
		if now := s.ConfigGeneration(); (now != g) != moves {
			t.Errorf("%s: generation %d -> %d, want moved=%v", what, g, now, moves)
		}
		g = s.ConfigGeneration()
	}
	step("config set", true, func(tx *Tx) error { return tx.ConfigSet("mod", "a", "1") })
	step("config delete", true, func(tx *Tx) error { _, err := tx.ConfigDelete("mod", "a"); return err })
	step("a failed config set", false, func(tx *Tx) error {
		if err := tx.ConfigSet("mod", "a", "2"); err != nil {
			return err
		}
		return errors.New("refused")
	})
	step("a secret set", false, func(tx *Tx) error { return tx.SecretSet("mod", "s", "v") })
}
