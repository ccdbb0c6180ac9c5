package storage

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"
	"unicode/utf8"
)

// LineFilter picks a stream's lines by level and text. It is applied to
// a chunk's stored bytes, before a line becomes a string: a level filter
// or a search over a million lines then costs a walk over bytes, not a
// million allocations (the console's filter and search answer from it).
type LineFilter struct {
	// Levels has bit 1<<Level set for every level that passes; 0 passes
	// every level.
	Levels uint8 `json:"levels,omitempty"`
	// Query is a substring a line must hold ("" passes every line).
	Query string `json:"query,omitempty"`
	// Fold matches Query without regard to case (Query is then lower
	// case).
	Fold bool `json:"fold,omitempty"`
}

// LevelBit is Level l's bit in LineFilter.Levels.
func LevelBit(l Level) uint8 { return 1 << l }

// matcher applies a LineFilter, with a buffer for case folding.
type matcher struct {
	f     *LineFilter
	q     []byte
	ascii bool
	buf   []byte
	// anchor is the index in q of a byte case cannot change (a digit,
	// a colon), or -1: a folded search then looks for that byte with
	// IndexByte and compares around it, instead of lowering each line.
	anchor int
}

func newMatcher(f *LineFilter) *matcher {
	m := &matcher{f: f, q: []byte(f.Query), ascii: true, anchor: -1}
	for i, c := range m.q {
		switch {
		case c >= 0x80:
			m.ascii = false
		case ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z'):
		case c == ' ':
			if m.anchor < 0 {
				m.anchor = i // a space is common: any other byte is better
			}
		case m.anchor < 0 || m.q[m.anchor] == ' ':
			m.anchor = i
		}
	}
	return m
}

func (m *matcher) pass(lvl Level, text []byte) bool {
	if m.f.Levels != 0 && m.f.Levels&LevelBit(lvl) == 0 {
		return false
	}
	if len(m.q) == 0 {
		return true
	}
	if !m.f.Fold {
		return bytes.Contains(text, m.q)
	}
	if !m.ascii {
		return bytes.Contains(bytes.ToLower(text), m.q)
	}
	if m.anchor >= 0 {
		k, c := m.anchor, m.q[m.anchor]
		for i := 0; i < len(text); {
			j := bytes.IndexByte(text[i:], c)
			if j < 0 {
				return false
			}
			if p := i + j - k; p >= 0 && p+len(m.q) <= len(text) && equalFoldASCII(text[p:p+len(m.q)], m.q) {
				return true
			}
			i += j + 1
		}
		return false
	}
	// Lower the line's ASCII into the buffer: then one bytes.Index,
	// which is fast on any line.
	m.buf = append(m.buf[:0], text...)
	for i, c := range m.buf {
		if 'A' <= c && c <= 'Z' {
			m.buf[i] = c + 'a' - 'A'
		}
	}
	return bytes.Contains(m.buf, m.q)
}

// equalFoldASCII reports whether a equals the lower-case b, ignoring
// ASCII case.
func equalFoldASCII(a, b []byte) bool {
	for i, c := range a {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != b[i] {
			return false
		}
	}
	return true
}

// ScanBytes bounds the text of the lines one ScanLines call returns (at
// least one line is returned whatever its size): a scan's reply crosses
// the control socket whole, and must stay within one reply's bound.
const ScanBytes = 4 << 20

// LineScan is what one ScanLines call found.
type LineScan struct {
	// Lines are the lines that passed, in stream order.
	Lines []Line `json:"lines"`
	// Next is where a later scan in the same direction goes on: forward,
	// the first line not looked at; backward, the lowest line looked at
	// (scan again before it).
	Next uint64 `json:"next"`
	// Scanned is how many lines were looked at.
	Scanned int `json:"scanned"`
	// Done is true when the scan reached the stream's edge: no line
	// further on in its direction is left to look at.
	Done bool `json:"done"`
}

// ScanLines looks at a run's stored lines from line from on (forward) or
// before line from (backward) and returns those that pass f: at most max
// of them (0: no bound) and ScanBytes of text, after looking at no more
// than about scan lines (0: no bound). Lines that do not pass are never
// made into strings.
func (tx *Tx) ScanLines(run string, from uint64, backward bool, f LineFilter, max, scan int) (LineScan, error) {
	out := LineScan{Next: from}
	b, err := tx.streamBucket(run, false)
	if err != nil || b == nil {
		out.Done = true
		return out, err
	}
	m := newMatcher(&f)
	size := 0
	full := func() bool {
		return (max > 0 && len(out.Lines) >= max) || (scan > 0 && out.Scanned >= scan) || size >= ScanBytes
	}
	c := b.Cursor()
	if !backward {
		k, v := c.Seek(u64key(from))
		if len(k) != 8 || bytesToU64(k) > from {
			if pk, pv := c.Prev(); len(pk) == 8 {
				k, v = pk, pv
			} else {
				k, v = c.Seek(u64key(from))
			}
		}
		for ; len(k) == 8; k, v = c.Next() {
			if full() {
				return out, nil
			}
			err := walkChunk(v, bytesToU64(k), func(n uint64, at int64, lvl Level, text []byte) (bool, error) {
				if n < from {
					return true, nil
				}
				if full() {
					return false, nil
				}
				out.Scanned++
				out.Next = n + 1
				if m.pass(lvl, text) {
					l, err := makeLine(n, at, lvl, text)
					if err != nil {
						return false, err
					}
					out.Lines = append(out.Lines, l)
					size += len(l.Text)
				}
				return true, nil
			})
			if err != nil {
				return LineScan{}, &CorruptError{Bucket: "streams", Key: run + "/" + seqKeyString(k), Err: err}
			}
		}
		out.Done = !full()
		return out, nil
	}
	// Backward: chunks from the one holding from-1 down.
	if from == 0 {
		out.Done = true
		return out, nil
	}
	k, v := c.Seek(u64key(from))
	if len(k) != 8 || bytesToU64(k) >= from {
		k, v = c.Prev()
	}
	var found [][]Line // per chunk, newest chunk first
	for ; len(k) == 8; k, v = c.Prev() {
		if full() {
			break
		}
		var got []Line
		lowest := out.Next
		err := walkChunk(v, bytesToU64(k), func(n uint64, at int64, lvl Level, text []byte) (bool, error) {
			if n >= from {
				return false, nil
			}
			if n < lowest {
				lowest = n
			}
			out.Scanned++
			if m.pass(lvl, text) {
				l, err := makeLine(n, at, lvl, text)
				if err != nil {
					return false, err
				}
				got = append(got, l)
			}
			return true, nil
		})
		if err != nil {
			return LineScan{}, &CorruptError{Bucket: "streams", Key: run + "/" + seqKeyString(k), Err: err}
		}
		out.Next = lowest
		if max > 0 && len(out.Lines)+len(got) > max {
			// Only the newest ones are wanted: the scan goes on before
			// the oldest kept.
			got = got[len(got)-(max-len(out.Lines)):]
			out.Next = got[0].N
		}
		keep := len(got)
		for keep > 0 && (size < ScanBytes || (len(out.Lines) == 0 && keep == len(got))) {
			keep--
			size += len(got[keep].Text)
		}
		if keep > 0 { // the byte bound: the newest that fit
			got = got[keep:]
			out.Next = got[0].N
		}
		out.Lines = append(out.Lines, got...) // counted here, ordered below
		found = append(found, got)
	}
	out.Done = len(k) != 8 && !full()
	if out.Done {
		out.Next = 0
	}
	out.Lines = out.Lines[:0]
	for i := len(found) - 1; i >= 0; i-- {
		out.Lines = append(out.Lines, found[i]...)
	}
	return out, nil
}

func makeLine(n uint64, at int64, lvl Level, text []byte) (Line, error) {
	if !utf8.Valid(text) {
		return Line{}, fmt.Errorf("%w: line %d: text is not UTF-8", errChunk, n)
	}
	return Line{N: n, At: time.Unix(0, at).UTC(), Level: lvl, Text: string(text)}, nil
}

// walkChunk calls fn with each line of an encoded chunk (its number,
// time in Unix nanoseconds, level and text bytes, which fn must not
// keep) until fn returns false. It checks the chunk's structure as
// decodeChunk does; a line's UTF-8 is checked when it becomes a Line
// (makeLine), so lines a filter passes over cost no check and no copy.
func walkChunk(b []byte, first uint64, fn func(n uint64, at int64, lvl Level, text []byte) (bool, error)) error {
	if len(b) < 12 || b[0] != 'W' || b[1] != 'S' || b[2] != 1 {
		return fmt.Errorf("%w: bad header", errChunk)
	}
	base := int64(binary.BigEndian.Uint64(b[3:11]))
	p := b[11:]
	count, n := binary.Uvarint(p)
	if n <= 0 || count == 0 || count > uint64(len(p)) {
		return fmt.Errorf("%w: bad count", errChunk)
	}
	p = p[n:]
	for i := uint64(0); i < count; i++ {
		d, n := binary.Uvarint(p)
		if n <= 0 || d > 1<<62 {
			return fmt.Errorf("%w: line %d: bad time", errChunk, i)
		}
		p = p[n:]
		if len(p) == 0 {
			return fmt.Errorf("%w: line %d: truncated", errChunk, i)
		}
		lvl := Level(p[0])
		if lvl < LevelDebug || lvl > LevelSuccess {
			return fmt.Errorf("%w: line %d: bad level %d", errChunk, i, p[0])
		}
		p = p[1:]
		l, n := binary.Uvarint(p)
		if n <= 0 || l > MaxLineBytes || l > uint64(len(p)-n) {
			return fmt.Errorf("%w: line %d: bad length", errChunk, i)
		}
		p = p[n:]
		more, err := fn(first+i, base+int64(d), lvl, p[:l])
		if err != nil || !more {
			return err
		}
		p = p[l:]
	}
	if len(p) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", errChunk, len(p))
	}
	return nil
}
