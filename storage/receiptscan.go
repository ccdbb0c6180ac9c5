package storage

import (
	"encoding/hex"
	"encoding/json"
	"unicode/utf8"
)

// fast is verify's allocation-free path. It accepts a receipt only when
// its stored bytes are, byte for byte, the canonical encoding the store
// writes:
//
//	{"actor":S,"at":T,["details":V,]"hash":H,"kind":S,"prev":H,"seq":N,"subject":S,"summary":S}
//
// where every S is a string with no escapes at all (encoding/json would
// write the same bytes), T an RFC 3339 time as time.Time writes it, V
// compact valid JSON, H 64 lowercase hex and N the key's seq; and then
// only when the hash recomputes. Anything else returns false without a
// verdict, and the caller tries check (the decoding path): a receipt with
// an escaped quote in its summary is canonical but not this path's, so it
// never fails here for being unusual, only for being wrong there.
func (c *receiptChecker) fast(raw []byte, seq uint64, prev, hash *[64]byte) bool {
	s := scanner{p: raw, ok: true}
	s.lit(`{"actor":`)
	if actor := s.str(); len(actor) == 0 {
		return false
	}
	s.lit(`,"at":`)
	at := s.str()
	if !s.ok || !canonicalUTC(at) {
		return false
	}
	if s.peek(`,"details":`) {
		s.lit(`,"details":`)
		s.value()
	}
	hashStart := len(raw) - len(s.p) + 1 // after the comma: the member is `"hash":"…",`
	s.lit(`,"hash":`)
	s.hex64(hash)
	hashEnd := len(raw) - len(s.p) + 1 // through the next comma
	s.lit(`,"kind":`)
	if !validKind(s.str()) {
		return false
	}
	s.lit(`,"prev":`)
	s.hex64(prev)
	s.lit(`,"seq":`)
	if n := s.uint(); n != seq || n == 0 {
		return false
	}
	s.lit(`,"subject":`)
	s.str()
	s.lit(`,"summary":`)
	s.str()
	s.lit(`}`)
	if !s.ok || len(s.p) != 0 {
		return false
	}
	c.h.Reset()
	c.h.Write(prev[:])
	c.h.Write(raw[:hashStart])
	c.h.Write(raw[hashEnd:])
	hex.Encode(c.hex[:], c.h.Sum(c.sum[:0]))
	return c.hex == *hash
}

// scanner walks canonical receipt bytes; ok turns false at the first
// thing it cannot vouch for, and every later step is then a no-op.
type scanner struct {
	p  []byte
	ok bool
}

func (s *scanner) peek(lit string) bool {
	return s.ok && len(s.p) >= len(lit) && string(s.p[:len(lit)]) == lit
}

func (s *scanner) lit(lit string) {
	if s.peek(lit) {
		s.p = s.p[len(lit):]
	} else {
		s.ok = false
	}
}

// str reads a string with no escapes: printable ASCII but '"' and '\',
// or valid UTF-8 beyond ASCII other than U+2028 and U+2029 (which
// encoding/json escapes).
func (s *scanner) str() []byte {
	if !s.ok || len(s.p) == 0 || s.p[0] != '"' {
		s.ok = false
		return nil
	}
	for i := 1; i < len(s.p); {
		c := s.p[i]
		switch {
		case c == '"':
			out := s.p[1:i]
			s.p = s.p[i+1:]
			return out
		case c < 0x20 || c == '\\':
			s.ok = false
			return nil
		case c < utf8.RuneSelf:
			i++
		default:
			r, n := utf8.DecodeRune(s.p[i:])
			if r == utf8.RuneError || r == '\u2028' || r == '\u2029' {
				s.ok = false
				return nil
			}
			i += n
		}
	}
	s.ok = false
	return nil
}

func (s *scanner) hex64(dst *[64]byte) {
	if !s.ok || len(s.p) < 66 || s.p[0] != '"' || s.p[65] != '"' {
		s.ok = false
		return
	}
	for i := 1; i <= 64; i++ {
		if !lowerHex[s.p[i]] {
			s.ok = false
			return
		}
	}
	copy(dst[:], s.p[1:65])
	s.p = s.p[66:]
}

func (s *scanner) uint() uint64 {
	if !s.ok || len(s.p) == 0 || s.p[0] < '1' || s.p[0] > '9' {
		s.ok = false
		return 0
	}
	var n uint64
	i := 0
	for ; i < len(s.p) && s.p[i] >= '0' && s.p[i] <= '9'; i++ {
		if i >= 19 { // beyond what fits: not a seq this store wrote
			s.ok = false
			return 0
		}
		n = n*10 + uint64(s.p[i]-'0')
	}
	s.p = s.p[i:]
	return n
}

// value reads one compact JSON value (no whitespace outside strings, as
// encoding/json writes a json.RawMessage) and checks it is valid.
func (s *scanner) value() {
	if !s.ok {
		return
	}
	depth, inStr, esc := 0, false, false
	for i, c := range s.p {
		switch {
		case inStr:
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		case c == '"':
			inStr = true
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			if depth == 0 { // the receipt's own closing brace: a scalar ended
				s.finishValue(i)
				return
			}
			depth--
		case c == ',' && depth == 0:
			s.finishValue(i)
			return
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			s.ok = false
			return
		}
		if depth == 0 && !inStr && (c == '}' || c == ']' || c == '"') {
			s.finishValue(i + 1)
			return
		}
	}
	s.ok = false
}

func (s *scanner) finishValue(end int) {
	if end == 0 || !json.Valid(s.p[:end]) {
		s.ok = false
		return
	}
	s.p = s.p[end:]
}

func validKind(k []byte) bool {
	if len(k) < 1 || len(k) > 64 || k[0] < 'a' || k[0] > 'z' {
		return false
	}
	for _, c := range k[1:] {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// canonicalUTC reports whether b is a non-zero UTC time exactly as
// time.Time's MarshalJSON writes it (2026-11-29T14:09:32.5Z: RFC 3339, a
// fraction without trailing zeros). It parses by hand: time.Parse would
// cost an allocation per receipt. Other offsets go the decoding path.
func canonicalUTC(b []byte) bool {
	if len(b) < 20 || b[4] != '-' || b[7] != '-' || b[10] != 'T' || b[13] != ':' || b[16] != ':' || b[len(b)-1] != 'Z' {
		return false
	}
	num := func(i, n int) int {
		v := 0
		for _, c := range b[i : i+n] {
			if c < '0' || c > '9' {
				return -1
			}
			v = v*10 + int(c-'0')
		}
		return v
	}
	year, month, day, hour, min, sec := num(0, 4), num(5, 2), num(8, 2), num(11, 2), num(14, 2), num(17, 2)
	if year < 0 || month < 1 || month > 12 || day < 1 || hour < 0 || hour > 23 || min < 0 || min > 59 || sec < 0 || sec > 59 {
		return false
	}
	if day > daysIn(month, year) {
		return false
	}
	frac := b[19 : len(b)-1]
	if len(frac) > 0 {
		if len(frac) < 2 || len(frac) > 10 || frac[0] != '.' || frac[len(frac)-1] == '0' || num(20, len(frac)-1) < 0 {
			return false
		}
	}
	// 0001-01-01T00:00:00Z is the zero time, which validate refuses.
	return !(year == 1 && month == 1 && day == 1 && hour == 0 && min == 0 && sec == 0 && len(frac) == 0)
}

func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}
