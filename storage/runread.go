package storage

import (
	"encoding/json"
	"time"
)

// readRun decodes one stored run record for a page of runs (the
// console's runs list, `hook runs`): through decodeCanonicalRun when its
// bytes are the canonical encoding the store writes, else through the
// strict codec. Both give the same RunRecord for the same bytes
// (FuzzReadRunFast); the canonical path only skips encoding/json's
// reflection, the larger part of reading the console's first page.
func readRun(key, raw []byte, r *RunRecord) error {
	if decodeCanonicalRun(raw, r) {
		return nil
	}
	*r = RunRecord{}
	return decodeRecord("runs", string(key), raw, r)
}

// decodeCanonicalRun fills r from raw when raw is, byte for byte, a run
// record as encoding/json writes one (RunRecord's fields in order, the
// omitempty ones present or not), every string free of escapes (see
// scanner.str), every time a non-zero UTC time as time.Time writes it,
// and the record validates; otherwise it returns false and r is to be
// thrown away.
func decodeCanonicalRun(raw []byte, r *RunRecord) bool {
	s := scanner{p: raw, ok: true}
	str := func(name string) string {
		s.lit(name)
		return string(s.str())
	}
	tm := func(name string) time.Time {
		s.lit(name)
		t, ok := parseCanonicalUTC(s.str())
		s.ok = s.ok && ok
		return t
	}
	// An omitempty member: present only when it follows.
	has := func(name string) bool {
		if s.peek(name) {
			s.lit(name)
			return true
		}
		return false
	}
	rawValue := func() json.RawMessage {
		rest := s.p
		s.value()
		v := rest[:len(rest)-len(s.p)]
		if !s.ok || string(v) == "null" { // encoding/json's handling of a null RawMessage is its own
			s.ok = false
			return nil
		}
		return append(json.RawMessage(nil), v...) // raw is the store's memory, valid only in its transaction
	}
	*r = RunRecord{}
	r.ID = str(`{"id":`)
	r.Module = str(`,"module":`)
	r.Hook = str(`,"hook":`)
	r.Actor = str(`,"actor":`)
	r.Status = str(`,"status":`)
	r.JailMode = str(`,"jailMode":`)
	r.Started = tm(`,"started":`)
	r.Deadline = tm(`,"deadline":`)
	if s.peek(`,"ended":`) {
		t := tm(`,"ended":`)
		r.Ended = &t
	}
	if has(`,"exit":`) {
		n := s.int()
		r.Exit = &n
	}
	if s.peek(`,"error":`) {
		r.Error = str(`,"error":`)
	}
	if has(`,"inputs":`) {
		r.Inputs = rawValue()
	}
	if has(`,"outputs":`) {
		r.Outputs = rawValue()
	}
	if has(`,"pid":`) {
		r.PID = s.int()
	}
	if s.peek(`,"network":`) {
		r.Network = str(`,"network":`)
	}
	s.lit(`}`)
	return s.ok && len(s.p) == 0 && r.validate() == nil
}

// int reads a JSON integer as encoding/json writes an int: an optional
// minus, no leading zeros, and well inside an int.
func (s *scanner) int() int {
	if !s.ok {
		return 0
	}
	neg := len(s.p) > 0 && s.p[0] == '-'
	if neg {
		s.p = s.p[1:]
	}
	if len(s.p) > 0 && s.p[0] == '0' {
		if neg || len(s.p) > 1 && s.p[1] >= '0' && s.p[1] <= '9' {
			s.ok = false
			return 0
		}
		s.p = s.p[1:]
		return 0
	}
	u := s.uint()
	if u > 1<<62 { // past what this path vouches fits an int
		s.ok = false
		return 0
	}
	n := int(u)
	if len(s.p) > 0 && (s.p[0] == '.' || s.p[0] == 'e' || s.p[0] == 'E') {
		s.ok = false // a float: encoding/json refuses it for an int
	}
	if neg {
		n = -n
	}
	return n
}
