package storage

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func appendN(t testing.TB, s *Store, n int, kind func(i int) string) []Receipt {
	t.Helper()
	var out []Receipt
	for i := 1; i <= n; i++ {
		r, err := s.AppendReceipt(Draft{Kind: kind(i), Actor: "tester", Subject: fmt.Sprintf("subj-%d", i), Summary: fmt.Sprintf("receipt number %d", i),
			Details: map[string]any{"i": i}})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func sameKind(string) func(int) string { return func(int) string { return "test.kind" } }

func TestReceiptChainIntact(t *testing.T) {
	s := openStore(t, newDir(t))
	defer s.Close()
	v, err := s.VerifyReceipts()
	if err != nil || !v.Intact || v.Count != 0 {
		t.Fatalf("empty chain: %+v %v", v, err)
	}
	rs := appendN(t, s, 10, sameKind(""))
	prev := GenesisPrev
	for i, r := range rs {
		if r.Seq != uint64(i+1) || r.Prev != prev || r.At.IsZero() || r.At.Location() != time.UTC {
			t.Fatalf("receipt %d: %+v", i+1, r)
		}
		h, _ := r.ComputeHash()
		if h != r.Hash {
			t.Fatalf("receipt %d: hash %s, recomputed %s", i+1, r.Hash, h)
		}
		prev = r.Hash
	}
	v, err = s.VerifyReceipts()
	if err != nil || !v.Intact || v.Count != 10 || v.BrokenSeq != 0 {
		t.Fatalf("VerifyReceipts = %+v %v", v, err)
	}
	// What Receipt/Receipts read back equals what Append returned.
	s.View(func(tx *Tx) error {
		got, err := tx.Receipt(7)
		if err != nil || !receiptEqual(got, rs[6]) {
			t.Errorf("Receipt(7) = %+v %v, want %+v", got, err, rs[6])
		}
		if _, err := tx.Receipt(11); !errors.Is(err, ErrNotFound) {
			t.Errorf("Receipt(11) = %v", err)
		}
		return nil
	})
}

func receiptEqual(a, b Receipt) bool {
	return a.Seq == b.Seq && a.At.Equal(b.At) && a.Kind == b.Kind && a.Actor == b.Actor && a.Subject == b.Subject &&
		a.Summary == b.Summary && bytes.Equal(a.Details, b.Details) && a.Prev == b.Prev && a.Hash == b.Hash
}

func TestReceiptChainSurvivesReopen(t *testing.T) {
	dir := newDir(t)
	s := openStore(t, dir)
	rs := appendN(t, s, 3, sameKind(""))
	s.Close()
	s = openStore(t, dir)
	defer s.Close()
	r, err := s.AppendReceipt(Draft{Kind: "test.kind", Actor: "a"})
	if err != nil || r.Seq != 4 || r.Prev != rs[2].Hash {
		t.Fatalf("append after reopen: %+v %v", r, err)
	}
	if v, _ := s.VerifyReceipts(); !v.Intact || v.Count != 4 {
		t.Fatalf("%+v", v)
	}
}

// tamper rewrites the stored bytes of one receipt with raw bbolt.
func tamper(t *testing.T, dir string, seq uint64, f func(raw []byte) []byte) {
	t.Helper()
	rawBolt(t, dir, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketReceipts)
		raw := append([]byte(nil), b.Get(u64key(seq))...)
		return b.Put(u64key(seq), f(raw))
	})
}

func TestReceiptChainBroken(t *testing.T) {
	cases := []struct {
		name   string
		seq    uint64
		change func(raw []byte) []byte
		want   uint64
		reason string
	}{
		{"summary byte", 5, func(raw []byte) []byte {
			i := bytes.Index(raw, []byte(`"summary":"receipt`)) + len(`"summary":"`)
			raw[i] = 'R' // still valid JSON, different content
			return raw
		}, 5, "hash"},
		{"json byte", 5, func(raw []byte) []byte {
			i := bytes.Index(raw, []byte(`"summary":"`)) + len(`"summary":`)
			raw[i] = '{' // the string's opening quote: no longer JSON
			return raw
		}, 5, "unreadable"},
		{"whitespace", 5, func(raw []byte) []byte {
			return bytes.Replace(raw, []byte(`,"kind"`), []byte(`, "kind"`), 1)
		}, 5, "canonical"},
		{"rehashed", 5, func(raw []byte) []byte {
			// A forger who recomputes the hash still breaks the next link.
			var r Receipt
			json.Unmarshal(raw, &r)
			r.Summary = "forged"
			r.Hash, _ = r.ComputeHash()
			out, _ := marshalCanonical(&r)
			return out
		}, 6, "prev"},
		{"seq field", 5, func(raw []byte) []byte {
			return bytes.Replace(raw, []byte(`"seq":5`), []byte(`"seq":50`), 1)
		}, 5, "seq"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := newDir(t)
			s := openStore(t, dir)
			appendN(t, s, 10, sameKind(""))
			s.Close()
			tamper(t, dir, c.seq, c.change)
			s = openStore(t, dir)
			defer s.Close()
			v, err := s.VerifyReceipts()
			if err != nil {
				t.Fatal(err)
			}
			if v.Intact || v.BrokenSeq != c.want || v.Count != c.want-1 || !strings.Contains(v.Reason, c.reason) {
				t.Fatalf("VerifyReceipts = %+v, want broken at %d (%s)", v, c.want, c.reason)
			}
		})
	}
	t.Run("deleted", func(t *testing.T) {
		dir := newDir(t)
		s := openStore(t, dir)
		appendN(t, s, 10, sameKind(""))
		s.Close()
		rawBolt(t, dir, func(tx *bolt.Tx) error { return tx.Bucket(bucketReceipts).Delete(u64key(3)) })
		s = openStore(t, dir)
		defer s.Close()
		v, _ := s.VerifyReceipts()
		if v.Intact || v.BrokenSeq != 3 || !strings.Contains(v.Reason, "missing") || !strings.Contains(v.Reason, "3") {
			t.Fatalf("VerifyReceipts = %+v", v)
		}
	})
	t.Run("stray key", func(t *testing.T) {
		dir := newDir(t)
		s := openStore(t, dir)
		appendN(t, s, 3, sameKind(""))
		s.Close()
		rawBolt(t, dir, func(tx *bolt.Tx) error {
			return tx.Bucket(bucketReceipts).Put([]byte{0, 0, 0, 0, 0, 0, 0, 2, 0}, []byte("{}"))
		})
		s = openStore(t, dir)
		defer s.Close()
		v, _ := s.VerifyReceipts()
		if v.Intact || v.BrokenSeq != 3 || v.Count != 2 || !strings.Contains(v.Reason, "stray key") {
			t.Fatalf("VerifyReceipts = %+v", v)
		}
	})
}

func TestReceiptFilters(t *testing.T) {
	s := openStore(t, newDir(t))
	defer s.Close()
	kinds := func(i int) string {
		if i%3 == 0 {
			return "hook.run"
		}
		if i%3 == 1 {
			return "token.issue"
		}
		return "hook.end"
	}
	rs := appendN(t, s, 12, kinds)
	seqs := func(rs []Receipt) string {
		var b strings.Builder
		for _, r := range rs {
			fmt.Fprintf(&b, "%d,", r.Seq)
		}
		return b.String()
	}
	list := func(f ReceiptFilter) string {
		var out []Receipt
		if err := s.View(func(tx *Tx) (err error) { out, err = tx.Receipts(f); return }); err != nil {
			t.Fatal(err)
		}
		return seqs(out)
	}
	check := func(f ReceiptFilter, want string) {
		t.Helper()
		if got := list(f); got != want {
			t.Errorf("Receipts(%+v) = %s, want %s", f, got, want)
		}
	}
	check(ReceiptFilter{}, "1,2,3,4,5,6,7,8,9,10,11,12,")
	check(ReceiptFilter{Kind: "hook.run"}, "3,6,9,12,")
	check(ReceiptFilter{Kind: "hook."}, "2,3,5,6,8,9,11,12,")
	check(ReceiptFilter{Kind: "hook"}, "")
	check(ReceiptFilter{Limit: 3}, "10,11,12,")
	check(ReceiptFilter{Limit: 100}, "1,2,3,4,5,6,7,8,9,10,11,12,")
	check(ReceiptFilter{Kind: "token.issue", Limit: 2}, "7,10,")
	check(ReceiptFilter{AfterSeq: 9}, "10,11,12,")
	check(ReceiptFilter{AfterSeq: 9, Limit: 10}, "10,11,12,")
	check(ReceiptFilter{AfterSeq: 12}, "")
	since := rs[7].At
	var want strings.Builder
	for _, r := range rs {
		if !r.At.Before(since) {
			fmt.Fprintf(&want, "%d,", r.Seq)
		}
	}
	check(ReceiptFilter{Since: since}, want.String())
	check(ReceiptFilter{Since: time.Now().Add(time.Hour)}, "")
	check(ReceiptFilter{Since: rs[0].At.Add(-time.Hour), Limit: 2}, "11,12,")
}

func TestReceiptSinceDistinctTimes(t *testing.T) {
	s := openStore(t, newDir(t))
	defer s.Close()
	appendN(t, s, 3, sameKind(""))
	time.Sleep(5 * time.Millisecond)
	mid := time.Now()
	time.Sleep(5 * time.Millisecond)
	appendN(t, s, 2, sameKind(""))
	var out []Receipt
	s.View(func(tx *Tx) (err error) { out, err = tx.Receipts(ReceiptFilter{Since: mid}); return })
	if len(out) != 2 || out[0].Seq != 4 || out[1].Seq != 5 {
		t.Fatalf("since: %+v", out)
	}
}

// outsideHash is what a verifier outside this package does with a listed
// receipt: marshal it, decode into a map, drop "hash", re-encode with
// sorted keys and no HTML escaping, and hash prev || that.
func outsideHash(t *testing.T, r Receipt) string {
	t.Helper()
	listed, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(listed, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "hash")
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(append([]byte(m["prev"].(string)), bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...))
	return hex.EncodeToString(sum[:])
}

type detailStruct struct {
	Zeta  string `json:"zeta"`
	Alpha int    `json:"alpha"`
}

func TestReceiptDetailsCanonical(t *testing.T) {
	dir := newDir(t)
	s := openStore(t, dir)
	drafts := []Draft{
		{Kind: "a.b", Actor: "x", Details: map[string]any{"b": 1, "a": "<x&y>", "nested": map[string]any{"z": 1, "y": []any{"<", 2.5}}}},
		{Kind: "a.b", Actor: "x", Details: detailStruct{Zeta: "z", Alpha: 1}},
		{Kind: "a.b", Actor: "x", Details: json.RawMessage(`{ "k" : [ 1 , 2 ], "a":null }`)},
		{Kind: "a.b", Actor: "x", Details: map[string]any{"big": uint64(1<<60 + 1), "neg": int64(-(1<<62 + 3)), "ns": int64(1732890000123456789)}},
		{Kind: "a.b", Actor: "x", Details: map[string]any{"f": 0.1, "e": 1e21, "tiny": 5e-324, "one": json.Number("1.0"), "exp": json.Number("1E3")}},
		{Kind: "a.b", Actor: "<actor&>", Subject: "sub\u2028ject", Summary: "bad utf8 \xff and \"quotes\" and \\", Details: []any{"é", "\u00e9", "日本"}},
		{Kind: "a.b", Actor: "x", Details: nil},
		{Kind: "a.b", Actor: "x", Details: map[string]any{}},
		{Kind: "a.b", Actor: "x", Details: "just a string"},
		{Kind: "a.b", Actor: "x", Details: 42},
	}
	for _, d := range drafts {
		if _, err := s.AppendReceipt(d); err != nil {
			t.Fatalf("append %+v: %v", d, err)
		}
	}
	var rs []Receipt
	s.View(func(tx *Tx) (err error) { rs, err = tx.Receipts(ReceiptFilter{}); return })
	if len(rs) != len(drafts) {
		t.Fatalf("%d receipts", len(rs))
	}
	if got := string(rs[0].Details); got != `{"a":"<x&y>","b":1,"nested":{"y":["<",2.5],"z":1}}` {
		t.Errorf("details 1 = %s", got)
	}
	if got := string(rs[1].Details); got != `{"alpha":1,"zeta":"z"}` {
		t.Errorf("details 2 = %s", got)
	}
	if got := string(rs[2].Details); got != `{"a":null,"k":[1,2]}` {
		t.Errorf("details 3 = %s", got)
	}
	if rs[6].Details != nil || rs[7].Details != nil {
		t.Errorf("empty details stored: %s / %s", rs[6].Details, rs[7].Details)
	}
	for _, r := range rs {
		if h := outsideHash(t, r); h != r.Hash {
			t.Errorf("seq %d: outside verifier computes %s, stored %s (details %s)", r.Seq, h, r.Hash, r.Details)
		}
	}
	if v, _ := s.VerifyReceipts(); !v.Intact || v.Count != uint64(len(drafts)) {
		t.Errorf("VerifyReceipts = %+v", v)
	}
	s.Close()
	raw := rawGet(t, dir, bucketReceipts, u64key(1))
	if !bytes.Contains(raw, []byte(`"a":"<x&y>"`)) || bytes.Contains(raw, []byte(`\u003c`)) {
		t.Errorf("stored receipt escapes HTML: %s", raw)
	}
	// The stored bytes are exactly the canonical encoding of the listed receipt.
	var m map[string]any
	json.Unmarshal(raw, &m)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(m)
	if got := bytes.TrimSuffix(buf.Bytes(), []byte("\n")); !bytes.Equal(got, raw) {
		t.Errorf("stored bytes not canonical:\n%s\n%s", raw, got)
	}
}

func TestReceiptDraftValidation(t *testing.T) {
	s := openStore(t, newDir(t))
	defer s.Close()
	for _, d := range []Draft{
		{Kind: "", Actor: "a"},
		{Kind: "Bad", Actor: "a"},
		{Kind: "ok", Actor: ""},
		{Kind: "ok", Actor: "a", Details: func() {}},
	} {
		if _, err := s.AppendReceipt(d); err == nil {
			t.Errorf("draft %+v accepted", d)
		}
	}
	if v, _ := s.VerifyReceipts(); !v.Intact || v.Count != 0 {
		t.Errorf("refused drafts left receipts: %+v", v)
	}
	if err := s.View(func(tx *Tx) error {
		_, err := tx.AppendReceipt(Draft{Kind: "ok", Actor: "a"})
		return err
	}); err == nil {
		t.Error("AppendReceipt in a read transaction")
	}
}

// TestVerifyLongChain crosses verify's batch boundaries and stops early.
func TestVerifyLongChain(t *testing.T) {
	dir := newDir(t)
	s := openStore(t, dir)
	const n = 1800
	if _, err := s.Update(func(tx *Tx) error {
		for i := 0; i < n; i++ {
			if _, err := tx.AppendReceipt(Draft{Kind: "test.long", Actor: "t", Summary: fmt.Sprintf("receipt number %d", i+1)}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if v, _ := s.VerifyReceipts(); !v.Intact || v.Count != n {
		t.Fatalf("VerifyReceipts = %+v", v)
	}
	s.Close()
	tamper(t, dir, 1700, func(raw []byte) []byte { return bytes.Replace(raw, []byte("receipt"), []byte("Receipt"), 1) })
	tamper(t, dir, 1300, func(raw []byte) []byte { return bytes.Replace(raw, []byte("receipt"), []byte("Receipt"), 1) })
	s = openStore(t, dir)
	if v, _ := s.VerifyReceipts(); v.Intact || v.BrokenSeq != 1300 || v.Count != 1299 {
		t.Fatalf("VerifyReceipts = %+v", v)
	}
	s.Close()
	rawBolt(t, dir, func(tx *bolt.Tx) error { return tx.Bucket(bucketReceipts).Delete(u64key(513)) })
	s = openStore(t, dir)
	defer s.Close()
	if v, _ := s.VerifyReceipts(); v.Intact || v.BrokenSeq != 513 || v.Count != 512 || !strings.Contains(v.Reason, "missing") {
		t.Fatalf("VerifyReceipts = %+v", v)
	}
}

func TestMatchersAgreeWithPatterns(t *testing.T) {
	kindRe := regexp.MustCompile(`^[a-z][a-z0-9_.-]{0,63}$`)
	hexRe := regexp.MustCompile(`^[0-9a-f]{64}$`)
	h := strings.Repeat("0123456789abcdef", 4)
	for _, s := range []string{"", "a", "hook.run", "a-b_c.9", "A", "1a", "a b", "a/b", "é", strings.Repeat("a", 64), strings.Repeat("a", 65),
		h, h[:63], h + "0", strings.ToUpper(h), h[:63] + "g", h[:63] + "\x00"} {
		if kindPattern.MatchString(s) != kindRe.MatchString(s) {
			t.Errorf("kind %q: %v", s, kindPattern.MatchString(s))
		}
		if hexHash.MatchString(s) != hexRe.MatchString(s) {
			t.Errorf("hex %q: %v", s, hexHash.MatchString(s))
		}
	}
}
