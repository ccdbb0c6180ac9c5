package hooks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
)

// Kinds of hook input/output values.
const (
	KindString = "string"
	KindNumber = "number"
	KindBool   = "bool"
	KindObject = "object"
	KindArray  = "array"
	KindPath   = "path"
	KindNull   = "null"    // only from KindOf
	KindBad    = "invalid" // only from KindOf: not one JSON value
)

const typeSpellingList = "string, number, bool, object, array, path, path:rw"

// Type is the declared type of a hook input or output. RW is only valid
// with Kind "path" (spelled `path:rw`): the path is bound read-write into
// the jail instead of read-only.
type Type struct {
	Kind string
	RW   bool
}

// String gives back the manifest spelling: "string", ..., "path", "path:rw".
func (t Type) String() string {
	if t.RW {
		return t.Kind + ":rw"
	}
	return t.Kind
}

// Valid reports whether t is a type a manifest may declare.
func (t Type) Valid() bool {
	switch t.Kind {
	case KindString, KindNumber, KindBool, KindObject, KindArray:
		return !t.RW
	case KindPath:
		return true
	}
	return false
}

// JSONKind is the JSON kind a value of this type has on the wire (a path
// travels as a string).
func (t Type) JSONKind() string {
	if t.Kind == KindPath {
		return KindString
	}
	return t.Kind
}

// MarshalText gives the manifest spelling, so a Type encodes as a JSON string.
func (t Type) MarshalText() ([]byte, error) {
	if !t.Valid() {
		return nil, fmt.Errorf("invalid type %q", t.String())
	}
	return []byte(t.String()), nil
}

// UnmarshalText parses the manifest spelling.
func (t *Type) UnmarshalText(b []byte) error {
	v, err := ParseType(string(b))
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// ParseType parses a manifest type spelling.
func ParseType(s string) (Type, error) {
	if s == "path:rw" {
		return Type{Kind: KindPath, RW: true}, nil
	}
	t := Type{Kind: s}
	if !t.Valid() || strings.Contains(s, ":") {
		return Type{}, fmt.Errorf("unknown type %s (known: %s)", shortQuote(s), typeSpellingList)
	}
	return t, nil
}

// KindOf gives the JSON kind of raw: string, number, bool, object, array,
// null, or "invalid" when raw is not exactly one JSON value.
func KindOf(raw json.RawMessage) string {
	b := bytes.TrimLeft(raw, " \t\r\n")
	if len(b) == 0 || !json.Valid(raw) {
		return KindBad
	}
	switch b[0] {
	case '"':
		return KindString
	case '{':
		return KindObject
	case '[':
		return KindArray
	case 't', 'f':
		return KindBool
	case 'n':
		return KindNull
	default:
		return KindNumber
	}
}

func quoteNames(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}

func declaredList(what string, decl map[string]Type) string {
	if len(decl) == 0 {
		return "this hook declares no " + what + "s"
	}
	return "declared " + what + "s: " + strings.Join(slices.Sorted(maps.Keys(decl)), ", ")
}

// checkDeclaredNames refuses unknown names, then missing declared names
// (unknown first: a typo reads better as "unknown" than as "missing").
func checkDeclaredNames[V any](what string, decl map[string]Type, given map[string]V) error {
	var unknown, missing []string
	for k := range given {
		if _, ok := decl[k]; !ok {
			unknown = append(unknown, k)
		}
	}
	for k := range decl {
		if _, ok := given[k]; !ok {
			missing = append(missing, k)
		}
	}
	sort.Strings(unknown)
	sort.Strings(missing)
	switch {
	case len(unknown) == 1:
		return fmt.Errorf("unknown %s %q (%s)", what, unknown[0], declaredList(what, decl))
	case len(unknown) > 1:
		return fmt.Errorf("unknown %ss %s (%s)", what, quoteNames(unknown), declaredList(what, decl))
	case len(missing) == 1:
		return fmt.Errorf("%s %q missing (%s)", what, missing[0], declaredList(what, decl))
	case len(missing) > 1:
		return fmt.Errorf("%ss %s missing (%s)", what, quoteNames(missing), declaredList(what, decl))
	}
	return nil
}

// CheckPath checks that p is an absolute, canonical (clean, no symlinks)
// path that exists, as a `path` input must be.
func CheckPath(p string) error {
	if p == "" {
		return errors.New("expected an absolute path, got an empty string")
	}
	if !filepath.IsAbs(p) {
		return fmt.Errorf("path %q is not absolute", p)
	}
	if c := filepath.Clean(p); c != p {
		return fmt.Errorf("path %q is not canonical (use %q)", p, c)
	}
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		var pe interface{ Unwrap() error }
		if errors.As(err, &pe) {
			err = pe.Unwrap()
		}
		return fmt.Errorf("path %q: %v", p, err)
	}
	if r != p {
		return fmt.Errorf("path %q goes through a symlink (its real path is %q; pass that)", p, r)
	}
	return nil
}

// ParseInputs turns CLI `name=value` strings into typed values following
// decl: number -> float64, bool -> true/false, object/array -> decoded
// JSON of that kind, string as is, path -> checked with CheckPath. Every
// declared input must be given and nothing else.
func ParseInputs(decl map[string]Type, given map[string]string) (map[string]any, error) {
	if err := checkDeclaredNames("input", decl, given); err != nil {
		return nil, err
	}
	out := make(map[string]any, len(given))
	for _, name := range slices.Sorted(maps.Keys(given)) {
		t := decl[name]
		s := given[name]
		var v any
		switch t.Kind {
		case KindString:
			v = s
		case KindPath:
			if err := CheckPath(s); err != nil {
				return nil, fmt.Errorf("input %q: %v", name, err)
			}
			v = s
		case KindBool:
			switch s {
			case "true":
				v = true
			case "false":
				v = false
			default:
				return nil, fmt.Errorf("input %q: expected bool (true or false), got %s", name, shortQuote(s))
			}
		case KindNumber, KindObject, KindArray:
			raw := json.RawMessage(s)
			if k := KindOf(raw); k != t.Kind {
				if k == KindBad {
					return nil, fmt.Errorf("input %q: expected %s (as JSON), got %s which is not valid JSON", name, t.Kind, shortQuote(s))
				}
				return nil, fmt.Errorf("input %q: expected %s, got %s", name, t.Kind, k)
			}
			if t.Kind == KindNumber {
				var f float64
				if err := json.Unmarshal(raw, &f); err != nil {
					return nil, fmt.Errorf("input %q: number %s out of range", name, shortQuote(s))
				}
				v = f
			} else if err := json.Unmarshal(raw, &v); err != nil {
				return nil, fmt.Errorf("input %q: %v", name, err)
			}
		default:
			return nil, fmt.Errorf("input %q: declared with unknown type %q", name, t.String())
		}
		out[name] = v
	}
	return out, nil
}

// kindOfValue gives the JSON kind of a decoded Go value.
func kindOfValue(v any) string {
	switch x := v.(type) {
	case nil:
		return KindNull
	case string:
		return KindString
	case bool:
		return KindBool
	case json.Number:
		if KindOf(json.RawMessage(x)) == KindNumber {
			return KindNumber
		}
		return KindBad
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return KindBad
		}
		return KindNumber
	case float32:
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return KindBad
		}
		return KindNumber
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return KindNumber
	case map[string]any:
		return KindObject
	case []any:
		return KindArray
	case json.RawMessage:
		return KindOf(x)
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Map:
		if rv.Type().Key().Kind() == reflect.String {
			return KindObject
		}
	case reflect.Slice, reflect.Array:
		return KindArray
	case reflect.Pointer:
		if rv.IsNil() {
			return KindNull
		}
		return kindOfValue(rv.Elem().Interface())
	}
	return KindBad
}

// CheckInputs checks already-typed values (e.g. decoded from JSON or a
// form) against decl, with the same rules as ParseInputs.
func CheckInputs(decl map[string]Type, given map[string]any) error {
	if err := checkDeclaredNames("input", decl, given); err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(given)) {
		t := decl[name]
		if !t.Valid() {
			return fmt.Errorf("input %q: declared with unknown type %q", name, t.String())
		}
		v := given[name]
		if raw, ok := v.(json.RawMessage); ok {
			var dec any
			if json.Unmarshal(raw, &dec) == nil {
				v = dec
			}
		}
		k := kindOfValue(v)
		if k != t.JSONKind() {
			return fmt.Errorf("input %q: expected %s, got %s", name, t.Kind, k)
		}
		if t.Kind == KindPath {
			if err := CheckPath(v.(string)); err != nil {
				return fmt.Errorf("input %q: %v", name, err)
			}
		}
	}
	return nil
}

// CheckOutputs checks a hook's result outputs against decl: every declared
// output present with its type, and nothing undeclared.
func CheckOutputs(decl map[string]Type, got map[string]json.RawMessage) error {
	var missing, extra []string
	for k := range decl {
		if _, ok := got[k]; !ok {
			missing = append(missing, k)
		}
	}
	for k := range got {
		if _, ok := decl[k]; !ok {
			extra = append(extra, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	switch {
	case len(missing) == 1:
		return fmt.Errorf("output %q missing (%s)", missing[0], declaredList("output", decl))
	case len(missing) > 1:
		return fmt.Errorf("outputs %s missing (%s)", quoteNames(missing), declaredList("output", decl))
	}
	for _, name := range slices.Sorted(maps.Keys(decl)) {
		t := decl[name]
		raw := got[name]
		k := KindOf(raw)
		if k != t.JSONKind() {
			return fmt.Errorf("output %q: expected %s, got %s", name, t.Kind, k)
		}
		if t.Kind == KindPath {
			var p string
			if err := json.Unmarshal(raw, &p); err != nil {
				return fmt.Errorf("output %q: %v", name, err)
			}
			if !filepath.IsAbs(p) || filepath.Clean(p) != p {
				return fmt.Errorf("output %q: expected path (absolute and clean), got %s", name, shortQuote(p))
			}
		}
	}
	switch {
	case len(extra) == 1:
		return fmt.Errorf("undeclared output %q (%s)", extra[0], declaredList("output", decl))
	case len(extra) > 1:
		return fmt.Errorf("undeclared outputs %s (%s)", quoteNames(extra), declaredList("output", decl))
	}
	return nil
}
