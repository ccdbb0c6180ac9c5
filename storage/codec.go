package storage

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// record is implemented by every type stored in the database. validate
// checks the shape beyond what JSON decoding can: required fields, ranges,
// patterns. A record that fails it is corrupt, never defaulted.
type record interface {
	validate() error
}

// decodeRecord is the strict codec every stored record goes through:
// exactly one JSON object, no unknown fields, no trailing bytes, and a
// shape that validates. Any failure is a *CorruptError naming bucket and key.
func decodeRecord(bucket, key string, data []byte, v record) error {
	if err := decodeStrict(data, v); err != nil {
		return &CorruptError{Bucket: bucket, Key: key, Err: err}
	}
	if err := v.validate(); err != nil {
		return &CorruptError{Bucket: bucket, Key: key, Err: err}
	}
	return nil
}

func decodeStrict(data []byte, v any) error {
	if len(data) == 0 || data[0] != '{' {
		return errors.New("not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("bad record: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("bad record: trailing data after the object")
	}
	return nil
}

// encodeRecord validates before writing so a bad record never lands.
func encodeRecord(v record) ([]byte, error) {
	if err := v.validate(); err != nil {
		return nil, fmt.Errorf("refusing to store invalid record: %w", err)
	}
	return marshalCanonical(v)
}

// marshalCanonical encodes compactly without HTML escaping, so stored bytes
// and hashed bytes are the plain JSON an outside verifier would produce.
func marshalCanonical(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// CanonicalJSON re-encodes arbitrary JSON with sorted object keys, compact
// and without HTML escaping. Numbers are normalised to how encoding/json
// writes a float64 (1.0 -> 1, 1E3 -> 1000; integers beyond 2^53 round), so
// a verifier that decodes into map[string]any and re-encodes gets the same
// bytes back. Pass values that must stay exact as strings.
func CanonicalJSON(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after JSON value")
	}
	return marshalCanonical(v) // maps encode with sorted keys
}
