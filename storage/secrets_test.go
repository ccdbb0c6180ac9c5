package storage

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

const plaintext = "hunter2-Plaintext-Secret-Value-0123456789"

func setSecret(t *testing.T, s *Store, module, name, value string) {
	t.Helper()
	if _, err := s.Update(func(tx *Tx) error { return tx.SecretSet(module, name, value) }); err != nil {
		t.Fatal(err)
	}
}

func getSecret(s *Store, module, name string) (v string, ok bool, err error) {
	s.View(func(tx *Tx) error {
		v, ok, err = tx.SecretGet(module, name)
		return nil
	})
	return
}

func storedSecret(t *testing.T, s *Store, module, name string) []byte {
	t.Helper()
	var out []byte
	s.View(func(tx *Tx) error {
		out = append([]byte(nil), tx.bucket(bucketSecrets).Get(nameKey(module, name))...)
		return nil
	})
	return out
}

func TestSecretRoundTrip(t *testing.T) {
	s := openStore(t, newDir(t))
	defer s.Close()
	if _, ok, err := getSecret(s, "mod", "a"); ok || err != nil {
		t.Fatalf("unset secret: %v %v", ok, err)
	}
	for _, v := range []string{plaintext, "", "\x00\xff binary", string(bytes.Repeat([]byte{'z'}, MaxValueSize))} {
		setSecret(t, s, "mod", "a", v)
		got, ok, err := getSecret(s, "mod", "a")
		if err != nil || !ok || got != v {
			t.Fatalf("round trip of %d bytes: ok=%v err=%v equal=%v", len(v), ok, err, got == v)
		}
	}
	if _, err := s.Update(func(tx *Tx) error { return tx.SecretSet("mod", "a", string(make([]byte, MaxValueSize+1))) }); err == nil {
		t.Error("oversized secret accepted")
	}
	if _, err := s.Update(func(tx *Tx) error { return tx.SecretSet("MOD", "a", "v") }); err == nil {
		t.Error("bad module accepted")
	}
	setSecret(t, s, "mod", "b", "x")
	setSecret(t, s, "mod2", "c", "x")
	s.View(func(tx *Tx) error {
		if n := tx.SecretNames("mod"); len(n) != 2 || n[0] != "a" || n[1] != "b" {
			t.Errorf("SecretNames = %v", n)
		}
		return nil
	})
	var existed bool
	s.Update(func(tx *Tx) (err error) { existed, err = tx.SecretDelete("mod", "a"); return })
	if _, ok, _ := getSecret(s, "mod", "a"); ok || !existed {
		t.Errorf("delete: existed=%v still there=%v", existed, ok)
	}
}

func TestSecretFreshNonce(t *testing.T) {
	s := openStore(t, newDir(t))
	defer s.Close()
	setSecret(t, s, "mod", "a", plaintext)
	first := storedSecret(t, s, "mod", "a")
	setSecret(t, s, "mod", "a", plaintext)
	second := storedSecret(t, s, "mod", "a")
	if bytes.Equal(first, second) {
		t.Fatal("the same value sealed twice gave identical stored bytes")
	}
	var a, b sealedRecord
	json.Unmarshal(first, &a)
	json.Unmarshal(second, &b)
	if bytes.Equal(a.Nonce, b.Nonce) || bytes.Equal(a.Sealed, b.Sealed) {
		t.Fatal("nonce or ciphertext reused")
	}
}

func TestSecretTamperedFailsToOpen(t *testing.T) {
	dir := newDir(t)
	s := openStore(t, dir)
	setSecret(t, s, "mod", "a", plaintext)
	s.Close()

	valid := rawGet(t, dir, bucketSecrets, nameKey("mod", "a"))
	for _, field := range []string{"sealed", "nonce"} {
		var r sealedRecord
		if err := json.Unmarshal(valid, &r); err != nil {
			t.Fatal(err)
		}
		if field == "sealed" {
			r.Sealed[len(r.Sealed)/2] ^= 0x01
		} else {
			r.Nonce[0] ^= 0x80
		}
		bad, _ := json.Marshal(&r)
		rawPut(t, dir, bucketSecrets, nameKey("mod", "a"), bad)
		s = openStore(t, dir)
		v, ok, err := getSecret(s, "mod", "a")
		s.Close()
		if err == nil || ok || v != "" {
			t.Fatalf("flipped %s: got %q ok=%v err=%v", field, v, ok, err)
		}
		wantCorrupt(t, err, "secrets", "mod/a")
		if !errors.Is(err, ErrUnseal) {
			t.Fatalf("flipped %s: error does not wrap ErrUnseal: %v", field, err)
		}
	}
	// A flipped byte of the stored text itself (breaking its base64) is
	// still a refusal, never a panic or a wrong value.
	bad := append([]byte(nil), valid...)
	i := bytes.Index(bad, []byte(`"sealed":"`)) + len(`"sealed":"`) + 2
	bad[i] = '!'
	rawPut(t, dir, bucketSecrets, nameKey("mod", "a"), bad)
	s = openStore(t, dir)
	_, ok, err := getSecret(s, "mod", "a")
	s.Close()
	if ok {
		t.Fatal("ok with a broken record")
	}
	wantCorrupt(t, err, "secrets", "mod/a")
}

func TestSecretMovedFailsToOpen(t *testing.T) {
	dir := newDir(t)
	s := openStore(t, dir)
	setSecret(t, s, "mod", "a", plaintext)
	s.Close()
	rawBolt(t, dir, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketSecrets)
		v := append([]byte(nil), b.Get([]byte("mod\x00a"))...)
		if err := b.Put([]byte("mod\x00b"), v); err != nil {
			return err
		}
		return tx.Bucket(bucketSecrets).Put([]byte("mod2\x00a"), v)
	})
	s = openStore(t, dir)
	defer s.Close()
	for _, mn := range [][2]string{{"mod", "b"}, {"mod2", "a"}} {
		_, ok, err := getSecret(s, mn[0], mn[1])
		if ok || !errors.Is(err, ErrUnseal) {
			t.Errorf("secret copied to %s/%s: ok=%v err=%v", mn[0], mn[1], ok, err)
		}
	}
	if v, ok, err := getSecret(s, "mod", "a"); !ok || err != nil || v != plaintext {
		t.Errorf("original: %v %v", ok, err)
	}
}

func TestSecretReplacedSealKey(t *testing.T) {
	dir := newDir(t)
	s := openStore(t, dir)
	setSecret(t, s, "mod", "a", plaintext)
	s.Close()
	if _, err := ReplaceKeyFile(dir, SealKeyFile); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir)
	defer s.Close()
	if _, _, err := getSecret(s, "mod", "a"); !errors.Is(err, ErrUnseal) {
		t.Errorf("secret under a new seal.key: %v", err)
	}
}

func TestSecretNeverOnDiskInClear(t *testing.T) {
	dir := newDir(t)
	s := openStore(t, dir)
	setSecret(t, s, "mod", "a", plaintext)
	setSecret(t, s, "mod", "a", plaintext) // the old page is freed, not scrubbed
	setSecret(t, s, "mod", "b", plaintext)
	if _, err := s.AppendReceipt(Draft{Kind: "store.secret_set", Actor: "t", Subject: "mod/a", Summary: "secret set"}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(raw, []byte(plaintext)) || bytes.Contains(raw, []byte("hunter2")) {
			t.Errorf("%s holds the secret in clear", e.Name())
		}
	}
	if raw, _ := os.ReadFile(filepath.Join(dir, DBFile)); !bytes.Contains(raw, []byte("mod\x00a")) {
		t.Error("sanity: the key name should be in the file")
	}
}
