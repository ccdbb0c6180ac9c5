package storage

import (
	"encoding/json"
	"time"
)

// readReceipt decodes one stored receipt for a list (the console's
// receipts pane, `receipts list`): through decodeCanonical when its bytes
// are the canonical encoding the store writes, else through the strict
// codec. Both give the same Receipt for the same bytes
// (FuzzReadReceiptFast); the canonical path only skips encoding/json's
// reflection, which made reading the console's newest 100 receipts most
// of its first frame on a full store.
func readReceipt(key, raw []byte, r *Receipt) error {
	if decodeCanonical(raw, r) {
		return nil
	}
	*r = Receipt{}
	return decodeRecord("receipts", seqKeyString(key), raw, r)
}

// decodeCanonical fills r from raw when raw is, byte for byte, the
// canonical encoding (see receiptChecker.fast for the shape it takes) of
// a receipt that validates; otherwise it returns false and r is to be
// thrown away. Strings are taken as they stand (the scanner admits only
// strings with nothing to unescape), so what it accepts decodes to the
// same values through encoding/json.
func decodeCanonical(raw []byte, r *Receipt) bool {
	s := scanner{p: raw, ok: true}
	s.lit(`{"actor":`)
	actor := s.str()
	s.lit(`,"at":`)
	at, ok := parseCanonicalUTC(s.str())
	if !s.ok || !ok || len(actor) == 0 {
		return false
	}
	var details []byte
	if s.peek(`,"details":`) {
		s.lit(`,"details":`)
		rest := s.p
		s.value()
		if !s.ok {
			return false
		}
		details = rest[:len(rest)-len(s.p)]
		if string(details) == "null" { // encoding/json's handling of a null RawMessage is its own
			return false
		}
	}
	var hash, prev [64]byte
	s.lit(`,"hash":`)
	s.hex64(&hash)
	s.lit(`,"kind":`)
	kind := s.str()
	s.lit(`,"prev":`)
	s.hex64(&prev)
	s.lit(`,"seq":`)
	seq := s.uint()
	s.lit(`,"subject":`)
	subject := s.str()
	s.lit(`,"summary":`)
	summary := s.str()
	s.lit(`}`)
	if !s.ok || len(s.p) != 0 || seq == 0 || !validKind(kind) {
		return false
	}
	*r = Receipt{Actor: string(actor), At: at, Hash: string(hash[:]), Kind: string(kind), Prev: string(prev[:]),
		Seq: seq, Subject: string(subject), Summary: string(summary)}
	if details != nil {
		r.Details = json.RawMessage(append([]byte(nil), details...)) // raw is the store's memory, valid only in its transaction
	}
	return true
}

// parseCanonicalUTC parses a time that canonicalUTC vouches for into the
// value encoding/json would give (a UTC time).
func parseCanonicalUTC(b []byte) (time.Time, bool) {
	if !canonicalUTC(b) {
		return time.Time{}, false
	}
	num := func(i, n int) int {
		v := 0
		for _, c := range b[i : i+n] {
			v = v*10 + int(c-'0')
		}
		return v
	}
	nsec := 0
	if frac := b[19 : len(b)-1]; len(frac) > 0 {
		nsec = num(20, len(frac)-1)
		for range 9 - (len(frac) - 1) {
			nsec *= 10
		}
	}
	return time.Date(num(0, 4), time.Month(num(5, 2)), num(8, 2), num(11, 2), num(14, 2), num(17, 2), nsec, time.UTC), true
}
