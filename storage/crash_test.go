package storage

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestCrashDuringAppends SIGKILLs a process in the middle of concurrent
// appends, again and again, and checks after each kill that the store opens
// (the dead holder's lock is gone), the chain is intact and nothing that was
// there before has gone.
func TestCrashDuringAppends(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test spawns 20 processes")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed>>1))
	dir := newDir(t)
	var prev uint64
	for iter := 0; iter < 20; iter++ {
		child := startHelper(t, "append", dir)
		wait := time.Duration(20+rng.IntN(181)) * time.Millisecond
		time.Sleep(wait)
		if err := child.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		child.cmd.Wait()
		if out := child.stderr.String(); out != "" {
			t.Fatalf("iteration %d: child failed before the kill: %s", iter, out)
		}

		s, err := Open(Options{Dir: dir})
		if err != nil {
			t.Fatalf("iteration %d (killed after %v): Open: %v", iter, wait, err)
		}
		v, err := s.VerifyReceipts()
		if err != nil || !v.Intact {
			s.Close()
			t.Fatalf("iteration %d (killed after %v): chain %+v %v", iter, wait, v, err)
		}
		if v.Count < prev {
			s.Close()
			t.Fatalf("iteration %d: count went from %d to %d", iter, prev, v.Count)
		}
		// The head the store resumes from is the last stored receipt.
		r, err := s.AppendReceipt(Draft{Kind: "crash.check", Actor: "parent"})
		if err != nil || r.Seq != v.Count+1 {
			s.Close()
			t.Fatalf("iteration %d: append after crash: seq %d (count %d) %v", iter, r.Seq, v.Count, err)
		}
		t.Logf("iteration %d: killed after %v, %d receipts (+%d)", iter, wait, v.Count, v.Count-prev)
		prev = v.Count + 1
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if prev <= 20 {
		t.Fatalf("the children made no progress: %d receipts after 20 kills", prev)
	}
}
