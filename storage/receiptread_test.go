package storage

import (
	"bytes"
	"reflect"
	"testing"
)

// readSeeds appends receipts of every shape the store writes (with and
// without details, plain, escaped, non-ASCII) and returns them with their
// stored bytes.
func readSeeds(t testing.TB, s *Store) (rs []Receipt, raws [][]byte) {
	for _, d := range []Draft{
		{Kind: "hook.end", Actor: "local:ann", Subject: "m/h", Summary: "run x succeeded in 5ms (jail bwrap) é", Details: map[string]any{"run": "x", "exit": 0, "durationMs": 5}},
		{Kind: "trust.rotate", Actor: "local:ann"},
		{Kind: "stream.error", Actor: "engine", Summary: `said "no"`},
		{Kind: "secret.set", Actor: "run:r", Subject: `quote " and \ back`, Summary: "tab\there <&> \u2028 é"},
		{Kind: "a", Actor: "b", Details: map[string]any{"nested": map[string]any{"k": []any{nil, true, "s", 1.5}}}},
		{Kind: "perms.decide", Actor: "local:ann", Details: "just a string"},
	} {
		r, err := s.AppendReceipt(d)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := encodeRecord(&r)
		if err != nil {
			t.Fatal(err)
		}
		rs, raws = append(rs, r), append(raws, raw)
	}
	return rs, raws
}

// A list reads the receipts the store writes without encoding/json when
// their bytes are canonical, and gets exactly what the strict codec gets;
// receipts with escapes go the strict codec; a damaged one is still a
// CorruptError naming its key.
func TestReadReceiptTakesCanonical(t *testing.T) {
	dir := newDir(t)
	s := openStore(t, dir)
	want, raws := readSeeds(t, s)
	for i, raw := range raws {
		var fast Receipt
		canonical := decodeCanonical(raw, &fast)
		if escaped := i == 2 || i == 3; canonical == escaped {
			t.Errorf("receipt %d: canonical path took it = %v, want %v:\n%s", i, canonical, !escaped, raw)
		}
		if canonical && !reflect.DeepEqual(fast, want[i]) {
			t.Errorf("receipt %d: canonical path read\n%#v\nwant\n%#v", i, fast, want[i])
		}
	}
	var got []Receipt
	if err := s.View(func(tx *Tx) (err error) { got, err = tx.Receipts(ReceiptFilter{}); return err }); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("list read\n%#v\nwant\n%#v", got, want)
	}
	var page []Receipt
	if err := s.View(func(tx *Tx) (err error) { page, err = tx.Receipts(ReceiptFilter{Limit: 4}); return err }); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(page, want[2:]) {
		t.Errorf("page read\n%#v\nwant\n%#v", page, want[2:])
	}
	s.Close()

	// A receipt whose kind is not a kind: neither path takes it.
	bad := append([]byte(nil), raws[1]...)
	copy(bad[bytes.Index(bad, []byte(`"kind":"`))+len(`"kind":"`):], "T")
	rawPut(t, dir, bucketReceipts, u64key(want[1].Seq), bad)
	s = openStore(t, dir)
	defer s.Close()
	err := s.View(func(tx *Tx) error { _, err := tx.Receipts(ReceiptFilter{Limit: 100}); return err })
	wantCorrupt(t, err, "receipts", seqKeyString(u64key(want[1].Seq)))
}

// FuzzReadReceiptFast: whatever the canonical path takes, the strict
// codec takes too and reads to the same Receipt.
func FuzzReadReceiptFast(f *testing.F) {
	s := openStore(f, newDir(f))
	_, raws := readSeeds(f, s)
	s.Close()
	for _, raw := range raws {
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var fast Receipt
		if !decodeCanonical(raw, &fast) {
			return
		}
		var strict Receipt
		if err := decodeRecord("receipts", "k", raw, &strict); err != nil {
			t.Fatalf("canonical path took what the strict codec refuses (%v):\n%s", err, raw)
		}
		if !reflect.DeepEqual(fast, strict) {
			t.Fatalf("canonical path read\n%#v\nthe strict codec\n%#v\nfrom %s", fast, strict, raw)
		}
	})
}
