package storage

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"
)

// fuzzRecord holds decodeRecord to its contract on arbitrary bytes: it
// never panics, any refusal is a *CorruptError, and whatever it accepts
// re-encodes to bytes it accepts again, with a stable encoding.
func fuzzRecord[T any, P interface {
	*T
	record
}](t *testing.T, data []byte) {
	var v T
	err := decodeRecord("b", "k", data, P(&v))
	if err != nil {
		var ce *CorruptError
		if !errors.As(err, &ce) || ce.Bucket != "b" || ce.Key != "k" {
			t.Fatalf("refusal is not a *CorruptError naming the key: %T %v", err, err)
		}
		return
	}
	enc, err := encodeRecord(P(&v))
	if err != nil {
		t.Fatalf("accepted record does not re-encode: %v\ninput: %q", err, data)
	}
	var again T
	if err := decodeRecord("b", "k", enc, P(&again)); err != nil {
		t.Fatalf("re-encoded record refused: %v\ninput: %q\nencoded: %q", err, data, enc)
	}
	enc2, err := encodeRecord(P(&again))
	if err != nil || !bytes.Equal(enc, enc2) {
		t.Fatalf("encoding not stable: %q vs %q (%v)", enc, enc2, err)
	}
}

func FuzzDecodeReceipt(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRecord[Receipt](t, data) })
}

func FuzzDecodeToken(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRecord[TokenRecord](t, data) })
}

func FuzzDecodeSealed(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRecord[sealedRecord](t, data) })
}

// FuzzVerifyFastPath: verify's allocation-free path never vouches for a
// receipt the decoding path would refuse, and agrees with it on prev and
// hash when both accept. Seeds are real receipts, plain and escaped.
func FuzzVerifyFastPath(f *testing.F) {
	s, err := Open(Options{Dir: filepath.Join(f.TempDir(), "data"), NoSync: true})
	if err != nil {
		f.Fatal(err)
	}
	for _, d := range []Draft{
		{Kind: "hook.start", Actor: "local:ann", Subject: "m/h", Summary: "run 20261129T140932-3fa2c1 started", Details: map[string]any{"run": "x", "inputs": []string{"a"}, "n": 1.5}},
		{Kind: "secret.set", Actor: "run:r", Subject: `quote " and \ back`, Summary: "tab\there <&> \u2028 é"},
		{Kind: "a", Actor: "b", Details: map[string]any{"nested": map[string]any{"k": []any{nil, true, "s"}}}},
	} {
		r, err := s.AppendReceipt(d)
		if err != nil {
			f.Fatal(err)
		}
		raw, _ := encodeRecord(&r)
		f.Add(raw, r.Seq)
	}
	s.Close()
	f.Fuzz(func(t *testing.T, raw []byte, seq uint64) {
		c := newReceiptChecker()
		var prev, hash [64]byte
		if !c.fast(raw, seq, &prev, &hash) {
			return
		}
		p, h, ok := c.check(raw, seq)
		if !ok || p != string(prev[:]) || h != string(hash[:]) {
			t.Fatalf("fast path accepted what the decoding path refuses (ok=%v):\n%s", ok, raw)
		}
	})
}
