package storage

import (
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"

	"golang.org/x/crypto/chacha20poly1305"
)

var (
	bucketSecrets = []byte("secrets")
	bucketConfig  = []byte("config")
)

var (
	modulePattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`) })
	namePattern   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`) })
)

// MaxValueSize bounds one secret or config value.
const MaxValueSize = 64 << 10

// CheckName validates a module id and a secret/config name.
func CheckName(module, name string) error {
	if !modulePattern().MatchString(module) {
		return fmt.Errorf("bad module id %q (want [a-z0-9][a-z0-9-]{0,62})", module)
	}
	if !namePattern().MatchString(name) {
		return fmt.Errorf("bad name %q (want [a-z][a-z0-9_]{0,62})", name)
	}
	return nil
}

// sealer seals secret values with XChaCha20-Poly1305 under seal.key. The
// associated data binds module and name, so a sealed value copied to
// another key fails to open.
type sealer struct{ aead cipher.AEAD }

func newSealer(key []byte) (*sealer, error) {
	aead, err := chacha20poly1305.NewX(key)
	if err != nil {
		return nil, err
	}
	return &sealer{aead: aead}, nil
}

// sealAD binds a sealed value to its module and name. The prefix is a
// fixed domain label, not the Go module path: every stored secret opens
// with it, so it never changes.
func sealAD(module, name string) []byte {
	return []byte("warden/secret/v1\x00" + module + "\x00" + name)
}

func (s *sealer) seal(module, name string, value []byte) *sealedRecord {
	nonce := make([]byte, chacha20poly1305.NonceSizeX)
	if _, err := rand.Read(nonce); err != nil {
		panic("crypto/rand failed: " + err.Error()) // never returns an error on Linux
	}
	return &sealedRecord{V: 1, Nonce: nonce, Sealed: s.aead.Seal(nil, nonce, value, sealAD(module, name))}
}

// ErrUnseal means a sealed value failed authentication: it was altered,
// moved under another name, or seal.key changed.
var ErrUnseal = errors.New("sealed value failed to open (altered, moved, or seal.key replaced)")

func (s *sealer) open(module, name string, r *sealedRecord) ([]byte, error) {
	v, err := s.aead.Open(nil, r.Nonce, r.Sealed, sealAD(module, name))
	if err != nil {
		return nil, ErrUnseal
	}
	return v, nil
}

type sealedRecord struct {
	V      int    `json:"v"`
	Nonce  []byte `json:"nonce"`
	Sealed []byte `json:"sealed"`
}

func (r *sealedRecord) validate() error {
	switch {
	case r.V != 1:
		return fmt.Errorf("unknown sealing version %d", r.V)
	case len(r.Nonce) != chacha20poly1305.NonceSizeX:
		return fmt.Errorf("nonce is %d bytes, want %d", len(r.Nonce), chacha20poly1305.NonceSizeX)
	case len(r.Sealed) < chacha20poly1305.Overhead:
		return errors.New("sealed value too short")
	}
	return nil
}

type configRecord struct {
	Value *string `json:"value"`
}

func (r *configRecord) validate() error {
	if r.Value == nil {
		return errors.New("missing value")
	}
	return nil
}

func shownNameKey(module, name string) string { return module + "/" + name }

// SecretGet opens a secret; ok is false when it is not set.
func (tx *Tx) SecretGet(module, name string) (value string, ok bool, err error) {
	if err := CheckName(module, name); err != nil {
		return "", false, err
	}
	var r sealedRecord
	if err := getRecord(tx, bucketSecrets, nameKey(module, name), shownNameKey(module, name), &r); err != nil {
		if errors.Is(err, ErrNotFound) {
			return "", false, nil
		}
		return "", false, err
	}
	v, err := tx.s.seal.open(module, name, &r)
	if err != nil {
		return "", false, &CorruptError{Bucket: "secrets", Key: shownNameKey(module, name), Err: err}
	}
	return string(v), true, nil
}

// SecretSet seals and stores value with a fresh nonce.
func (tx *Tx) SecretSet(module, name, value string) error {
	if err := CheckName(module, name); err != nil {
		return err
	}
	if len(value) > MaxValueSize {
		return fmt.Errorf("secret %s/%s: value is %d bytes, limit %d", module, name, len(value), MaxValueSize)
	}
	return putRecord(tx, bucketSecrets, nameKey(module, name), tx.s.seal.seal(module, name, []byte(value)))
}

// SecretDelete removes a secret; existed reports whether it was set.
func (tx *Tx) SecretDelete(module, name string) (existed bool, err error) {
	return tx.deleteName(bucketSecrets, module, name)
}

// SecretNames lists a module's secret names, sorted. Values are not read.
func (tx *Tx) SecretNames(module string) []string { return tx.names(bucketSecrets, module) }

// ConfigGet reads a config value; ok is false when it is not set.
func (tx *Tx) ConfigGet(module, name string) (value string, ok bool, err error) {
	if err := CheckName(module, name); err != nil {
		return "", false, err
	}
	var r configRecord
	if err := getRecord(tx, bucketConfig, nameKey(module, name), shownNameKey(module, name), &r); err != nil {
		if errors.Is(err, ErrNotFound) {
			return "", false, nil
		}
		return "", false, err
	}
	return *r.Value, true, nil
}

// ConfigSet stores a config value.
func (tx *Tx) ConfigSet(module, name, value string) error {
	if err := CheckName(module, name); err != nil {
		return err
	}
	if len(value) > MaxValueSize {
		return fmt.Errorf("config %s/%s: value is %d bytes, limit %d", module, name, len(value), MaxValueSize)
	}
	tx.AfterCommit(tx.s.configChanged)
	return putRecord(tx, bucketConfig, nameKey(module, name), &configRecord{Value: &value})
}

// ConfigDelete removes a config value; existed reports whether it was set.
func (tx *Tx) ConfigDelete(module, name string) (existed bool, err error) {
	tx.AfterCommit(tx.s.configChanged)
	return tx.deleteName(bucketConfig, module, name)
}

// ConfigAll returns a module's config, strictly decoded.
func (tx *Tx) ConfigAll(module string) (map[string]string, error) {
	out := map[string]string{}
	for _, n := range tx.names(bucketConfig, module) {
		v, _, err := tx.ConfigGet(module, n)
		if err != nil {
			return nil, err
		}
		out[n] = v
	}
	return out, nil
}

func (tx *Tx) deleteName(bucket []byte, module, name string) (bool, error) {
	if err := CheckName(module, name); err != nil {
		return false, err
	}
	b := tx.bucket(bucket)
	k := nameKey(module, name)
	if b.Get(k) == nil {
		return false, nil
	}
	return true, b.Delete(k)
}

func (tx *Tx) names(bucket []byte, module string) []string {
	prefix := []byte(module + "\x00")
	var out []string
	c := tx.bucket(bucket).Cursor()
	for k, _ := c.Seek(prefix); k != nil && strings.HasPrefix(string(k), string(prefix)); k, _ = c.Next() {
		out = append(out, string(k[len(prefix):]))
	}
	sort.Strings(out)
	return out
}
