package storage

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// badVariants derives broken encodings from a valid canonical record:
// an unknown field, a wrong type, trailing garbage, not an object, and a
// missing required field.
func badVariants(t *testing.T, valid []byte, wrongTypeField, requiredField string) map[string][]byte {
	t.Helper()
	mutate := func(f func(m map[string]any)) []byte {
		var m map[string]any
		if err := json.Unmarshal(valid, &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return map[string][]byte{
		"unknown field":    mutate(func(m map[string]any) { m["extra"] = 1 }),
		"wrong type":       mutate(func(m map[string]any) { m[wrongTypeField] = []any{"x"} }),
		"trailing garbage": append(append([]byte(nil), valid...), "garbage"...),
		"trailing object":  append(append([]byte(nil), valid...), "{}"...),
		"not an object":    []byte(`["a","b"]`),
		"null":             []byte(`null`),
		"empty":            {},
		"truncated":        valid[:len(valid)/2],
		"missing field":    mutate(func(m map[string]any) { delete(m, requiredField) }),
	}
}

func TestCodecRefusesBadReceipts(t *testing.T) {
	dir := newDir(t)
	s := openStore(t, dir)
	for i := 0; i < 2; i++ {
		if _, err := s.AppendReceipt(Draft{Kind: "test.codec", Actor: "t", Summary: "ok"}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	valid := rawGet(t, dir, bucketReceipts, u64key(1))
	for name, bad := range badVariants(t, valid, "seq", "actor") {
		t.Run(name, func(t *testing.T) {
			rawPut(t, dir, bucketReceipts, u64key(1), bad)
			s := openStore(t, dir)
			defer s.Close()
			err := s.View(func(tx *Tx) error {
				_, err := tx.Receipt(1)
				wantCorrupt(t, err, "receipts", "1")
				if strings.Contains(err.Error(), "garbage") {
					t.Errorf("error carries the value: %v", err)
				}
				_, err = tx.Receipts(ReceiptFilter{})
				wantCorrupt(t, err, "receipts", "1")
				_, err = tx.Receipts(ReceiptFilter{Limit: 5})
				wantCorrupt(t, err, "receipts", "1")
				if _, err := tx.Receipt(2); err != nil {
					t.Errorf("good neighbour unreadable: %v", err)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			v, err := s.VerifyReceipts()
			if err != nil || v.Intact || v.BrokenSeq != 1 || v.Reason == "" {
				t.Errorf("VerifyReceipts = %+v, %v", v, err)
			}
		})
	}
}

func TestCorruptLastReceipt(t *testing.T) {
	dir := newDir(t)
	s := openStore(t, dir)
	for i := 0; i < 3; i++ {
		if _, err := s.AppendReceipt(Draft{Kind: "test.codec", Actor: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	rawPut(t, dir, bucketReceipts, u64key(3), []byte(`{"seq":"3"}`))
	// The store still opens, so verify can name the broken link and the
	// rest of the data stays reachable, but nothing is chained onto it.
	s = openStore(t, dir)
	defer s.Close()
	v, err := s.VerifyReceipts()
	if err != nil || v.Intact || v.BrokenSeq != 3 || v.Count != 2 {
		t.Errorf("VerifyReceipts = %+v, %v", v, err)
	}
	_, err = s.AppendReceipt(Draft{Kind: "test.codec", Actor: "t"})
	wantCorrupt(t, err, "receipts", "3")
	if err := s.View(func(tx *Tx) error { _, err := tx.Receipt(2); return err }); err != nil {
		t.Error(err)
	}
	// Other writes still work.
	if _, err := s.Update(func(tx *Tx) error { return tx.ConfigSet("m", "k", "v") }); err != nil {
		t.Error(err)
	}
}

func TestCodecRefusesBadTrust(t *testing.T) {
	dir := newDir(t)
	s := openStore(t, dir)
	if err := s.View(func(tx *Tx) error {
		if _, ok, err := tx.Trust(); ok || err != nil {
			t.Errorf("Trust before any = %v, %v", ok, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	rec := TrustRecord{Generation: 3, Fingerprint: strings.Repeat("ab", 32), Since: time.Unix(1700000000, 0).UTC()}
	if _, err := s.Update(func(tx *Tx) error { return tx.PutTrust(rec) }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(func(tx *Tx) error { return tx.PutTrust(TrustRecord{Fingerprint: "x"}) }); err == nil {
		t.Error("invalid trust record stored")
	}
	s.View(func(tx *Tx) error {
		got, ok, err := tx.Trust()
		if !ok || err != nil || got != rec {
			t.Errorf("Trust = %+v %v %v", got, ok, err)
		}
		return nil
	})
	s.Close()
	valid := rawGet(t, dir, bucketMeta, keyTrust)
	for name, bad := range badVariants(t, valid, "generation", "fingerprint") {
		t.Run(name, func(t *testing.T) {
			rawPut(t, dir, bucketMeta, keyTrust, bad)
			s := openStore(t, dir)
			defer s.Close()
			s.View(func(tx *Tx) error {
				_, ok, err := tx.Trust()
				if ok {
					t.Error("ok with a corrupt record")
				}
				wantCorrupt(t, err, "meta", "trust")
				return nil
			})
		})
	}
}

func testToken(id string) TokenRecord {
	return TokenRecord{ID: id, MAC: strings.Repeat("cd", 32), Subject: "mod", Scope: "hook", Session: "run-1", Generation: 1,
		Created: time.Unix(1700000000, 0).UTC(), Expires: time.Unix(1700003600, 0).UTC()}
}

func TestCodecRefusesBadTokens(t *testing.T) {
	dir := newDir(t)
	s := openStore(t, dir)
	id := strings.Repeat("0f", 32)
	other := strings.Repeat("1e", 32)
	tok := testToken(id)
	rev := time.Unix(1700000100, 0).UTC()
	tok2 := testToken(other)
	tok2.Revoked = &rev
	if _, err := s.Update(func(tx *Tx) error {
		if err := tx.PutToken(tok); err != nil {
			return err
		}
		return tx.PutToken(tok2)
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(func(tx *Tx) error { return tx.PutToken(TokenRecord{ID: id}) }); err == nil {
		t.Error("invalid token stored")
	}
	s.View(func(tx *Tx) error {
		got, err := tx.Token(id)
		if err != nil || got.ID != id || got.Session != "run-1" || got.Revoked != nil {
			t.Errorf("Token = %+v %v", got, err)
		}
		if _, err := tx.Token("nothex"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Token(bad id) = %v", err)
		}
		if _, err := tx.Token(strings.Repeat("00", 32)); !errors.Is(err, ErrNotFound) {
			t.Errorf("Token(absent) = %v", err)
		}
		// The revoked one is kept only as its tombstone.
		n := 0
		if err := tx.EachToken(func(TokenRecord) error { n++; return nil }); err != nil || n != 1 {
			t.Errorf("EachToken = %d %v; want only the token not revoked", n, err)
		}
		if _, err := tx.Token(other); !errors.Is(err, ErrNotFound) {
			t.Errorf("revoked token's record still stored: %v", err)
		}
		if ts, err := tx.TokenTombstone(other); err != nil || ts.Generation != 1 || !ts.Revoked.Equal(time.Unix(1699920000, 0)) {
			t.Errorf("revoked token's tombstone = %+v %v; want generation 1, revoked on its day", ts, err)
		}
		if _, err := tx.TokenTombstone(id); !errors.Is(err, ErrNotFound) {
			t.Errorf("a token not revoked has a tombstone: %v", err)
		}
		return nil
	})
	s.Close()
	valid := rawGet(t, dir, bucketTokens, []byte(id))
	if bytes.Contains(valid, []byte("revoked")) {
		t.Errorf("unrevoked token stores revoked: %s", valid)
	}
	for name, bad := range badVariants(t, valid, "generation", "mac") {
		t.Run(name, func(t *testing.T) {
			rawPut(t, dir, bucketTokens, []byte(id), bad)
			s := openStore(t, dir)
			defer s.Close()
			s.View(func(tx *Tx) error {
				_, err := tx.Token(id)
				wantCorrupt(t, err, "tokens", id)
				err = tx.EachToken(func(TokenRecord) error { return nil })
				wantCorrupt(t, err, "tokens", id)
				return nil
			})
		})
	}
	// A damaged tombstone is corrupt, never read as some generation.
	day := u64key(dayOf(rev))
	for name, bad := range map[string][]byte{"truncated": {0x80}, "generation 0": {0}, "trailing": {1, 1}} {
		t.Run("tombstone "+name, func(t *testing.T) {
			rawBolt(t, dir, func(tx *bolt.Tx) error {
				k, _ := tombstoneKey(other)
				return tx.Bucket(bucketTokenRevoked).Bucket(day).Put(k, bad)
			})
			s := openStore(t, dir)
			defer s.Close()
			s.View(func(tx *Tx) error {
				_, err := tx.TokenTombstone(other)
				wantCorrupt(t, err, "tokens.revoked", other)
				return nil
			})
		})
	}
	// Deleting prunes it.
	s = openStore(t, dir)
	defer s.Close()
	if _, err := s.Update(func(tx *Tx) error { return tx.DeleteToken(id) }); err != nil {
		t.Fatal(err)
	}
	s.View(func(tx *Tx) error {
		if _, err := tx.Token(id); !errors.Is(err, ErrNotFound) {
			t.Errorf("deleted token: %v", err)
		}
		return nil
	})
}

func TestCodecRefusesBadConfig(t *testing.T) {
	dir := newDir(t)
	s := openStore(t, dir)
	if _, err := s.Update(func(tx *Tx) error { return tx.ConfigSet("mod", "a", "<v&>") }); err != nil {
		t.Fatal(err)
	}
	s.Close()
	valid := rawGet(t, dir, bucketConfig, nameKey("mod", "a"))
	if string(valid) != `{"value":"<v&>"}` {
		t.Errorf("stored %s", valid)
	}
	for name, bad := range badVariants(t, valid, "value", "value") {
		t.Run(name, func(t *testing.T) {
			rawPut(t, dir, bucketConfig, nameKey("mod", "a"), bad)
			s := openStore(t, dir)
			defer s.Close()
			s.View(func(tx *Tx) error {
				_, _, err := tx.ConfigGet("mod", "a")
				wantCorrupt(t, err, "config", "mod/a")
				_, err = tx.ConfigAll("mod")
				wantCorrupt(t, err, "config", "mod/a")
				return nil
			})
		})
	}
}

func TestConfigAndNames(t *testing.T) {
	s := openStore(t, newDir(t))
	defer s.Close()
	if _, err := s.Update(func(tx *Tx) error {
		for _, n := range []string{"b", "a", "c_1"} {
			if err := tx.ConfigSet("mod", n, "v-"+n); err != nil {
				return err
			}
		}
		if err := tx.ConfigSet("mod-2", "a", "other"); err != nil {
			return err
		}
		return tx.ConfigSet("mo", "z", "prefix")
	}); err != nil {
		t.Fatal(err)
	}
	s.View(func(tx *Tx) error {
		all, err := tx.ConfigAll("mod")
		if err != nil || len(all) != 3 || all["a"] != "v-a" || all["c_1"] != "v-c_1" {
			t.Errorf("ConfigAll = %v %v", all, err)
		}
		if _, ok, err := tx.ConfigGet("mod", "zz"); ok || err != nil {
			t.Errorf("absent = %v %v", ok, err)
		}
		return nil
	})
	for _, bad := range [][2]string{{"Mod", "a"}, {"mod", "A"}, {"mod", "a\x00b"}, {"", "a"}, {"mod", ""}, {"mod/x", "a"}} {
		if _, err := s.Update(func(tx *Tx) error { return tx.ConfigSet(bad[0], bad[1], "v") }); err == nil {
			t.Errorf("ConfigSet(%q,%q) accepted", bad[0], bad[1])
		}
	}
	if _, err := s.Update(func(tx *Tx) error { return tx.ConfigSet("mod", "big", strings.Repeat("x", MaxValueSize+1)) }); err == nil {
		t.Error("oversized value accepted")
	}
	var existed bool
	s.Update(func(tx *Tx) error {
		var err error
		existed, err = tx.ConfigDelete("mod", "a")
		return err
	})
	if !existed {
		t.Error("delete: not existed")
	}
	s.Update(func(tx *Tx) error {
		var err error
		existed, err = tx.ConfigDelete("mod", "a")
		return err
	})
	if existed {
		t.Error("second delete: existed")
	}
}
