package storage

import (
	"bytes"
	"errors"
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
