package storage

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// appendBulk appends n receipts in few commits (appendN commits each).
func appendBulk(t testing.TB, s *Store, n int) {
	t.Helper()
	for done := 0; done < n; {
		_, err := s.Update(func(tx *Tx) error {
			for i := 0; i < 5000 && done+i < n; i++ {
				if _, err := tx.AppendReceipt(Draft{Kind: "test.kind", Actor: "tester", Summary: fmt.Sprintf("receipt number %d", done+i+1)}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		done += min(5000, n-done)
	}
}

// A verify records a checkpoint every CheckpointEvery receipts; a verify
// since a checkpoint starts there (costing what came after) and still
// finds a break after it; only a full verify finds one before it, and a
// full verify finds a checkpoint that no longer matches the log.
func TestVerifyFromCheckpoints(t *testing.T) {
	dir := newDir(t)
	s := openStore(t, dir)
	appendBulk(t, s, 25_000)
	verify := func(since uint64, full bool) Verification {
		t.Helper()
		var v Verification
		var err error
		if full {
			v, err = s.VerifyReceipts()
		} else {
			v, err = s.VerifyReceiptsSince(since)
		}
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := verify(0, false); !v.Intact || v.From != 0 || v.Count != 25_000 {
		t.Fatalf("first verify, no checkpoints yet: %+v; want a full walk", v)
	}
	if v := verify(0, false); !v.Intact || v.From != 20_000 || v.Count != 5_000 {
		t.Fatalf("verify from the newest checkpoint: %+v", v)
	}
	if v := verify(15_000, false); !v.Intact || v.From != 10_000 || v.Count != 15_000 {
		t.Fatalf("verify --since 15000: %+v; want from the checkpoint at 10000", v)
	}
	if v := verify(9_999, false); !v.Intact || v.From != 0 || v.Count != 25_000 {
		t.Fatalf("verify --since 9999 (before every checkpoint): %+v", v)
	}
	s.Close()

	flip := func(raw []byte) []byte {
		i := bytes.Index(raw, []byte(`"summary":"`)) + len(`"summary":"`)
		raw[i] ^= 1 // r <-> s
		return raw
	}
	tamper(t, dir, 21_000, flip)
	s = openStore(t, dir)
	if v := verify(0, false); v.Intact || v.BrokenSeq != 21_000 || v.From != 20_000 {
		t.Errorf("a break after the checkpoint: %+v", v)
	}
	s.Close()
	tamper(t, dir, 21_000, flip) // put it back
	tamper(t, dir, 5_000, flip)
	s = openStore(t, dir)
	if v := verify(0, false); !v.Intact || v.From != 20_000 {
		t.Errorf("a break before the checkpoint is not what a checkpoint verify checks: %+v", v)
	}
	if v := verify(0, true); v.Intact || v.BrokenSeq != 5_000 || v.From != 0 {
		t.Errorf("--full past a break before the checkpoint: %+v", v)
	}
	s.Close()
	tamper(t, dir, 5_000, flip)
	rawPut(t, dir, bucketCheckpoints, u64key(10_000), []byte(strings.Repeat("0", 64)))
	s = openStore(t, dir)
	defer s.Close()
	if v := verify(0, true); v.Intact || v.BrokenSeq != 10_000 || !strings.Contains(v.Reason, "rewritten") {
		t.Errorf("--full with a checkpoint the log no longer matches: %+v", v)
	}
}

// Verify's fast path takes the receipts the store writes, with details and
// without, at no allocation per receipt; one with escapes in a string goes
// the decoding path and still passes.
func TestVerifyFastPathTakesStoredReceipts(t *testing.T) {
	s := openStore(t, newDir(t))
	defer s.Close()
	plain, err := s.AppendReceipt(Draft{Kind: "hook.end", Actor: "local:ann", Subject: "m/h", Summary: "run x succeeded in 5ms (jail bwrap) é",
		Details: map[string]any{"run": "x", "exit": 0, "durationMs": 5}})
	if err != nil {
		t.Fatal(err)
	}
	bare, _ := s.AppendReceipt(Draft{Kind: "trust.rotate", Actor: "local:ann"})
	escaped, _ := s.AppendReceipt(Draft{Kind: "stream.error", Actor: "engine", Summary: `said "no"`})
	c := newReceiptChecker()
	var prev, hash [64]byte
	for _, r := range []Receipt{plain, bare} {
		raw, _ := encodeRecord(&r)
		if !c.fast(raw, r.Seq, &prev, &hash) || string(hash[:]) != r.Hash || string(prev[:]) != r.Prev {
			t.Errorf("fast path refused stored receipt %d:\n%s", r.Seq, raw)
		}
	}
	raw, _ := encodeRecord(&plain)
	if n := testing.AllocsPerRun(100, func() { c.fast(raw, plain.Seq, &prev, &hash) }); n != 0 {
		t.Errorf("fast path: %v allocations per receipt, want 0", n)
	}
	raw, _ = encodeRecord(&escaped)
	if c.fast(raw, escaped.Seq, &prev, &hash) {
		t.Errorf("fast path took a receipt with escapes (it vouches only for escape-free strings)")
	}
	if v, err := s.VerifyReceipts(); err != nil || !v.Intact || v.Count != 3 {
		t.Errorf("verify: %+v %v", v, err)
	}
}
