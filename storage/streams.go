package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"
)

// Level is a stream line's level.
type Level uint8

// Levels, in the order of docs/protocol.md.
const (
	LevelDebug Level = iota + 1
	LevelInfo
	LevelWarn
	LevelError
	LevelSuccess
)

var levelNames = [...]string{"", "debug", "info", "warn", "error", "success"}

func (l Level) String() string {
	if l >= LevelDebug && l <= LevelSuccess {
		return levelNames[l]
	}
	return fmt.Sprintf("level(%d)", uint8(l))
}

// ParseLevel reads a level name.
func ParseLevel(s string) (Level, bool) {
	for i := LevelDebug; i <= LevelSuccess; i++ {
		if levelNames[i] == s {
			return i, true
		}
	}
	return 0, false
}

// Line is one stream line of a run. N numbers the run's lines from 0 in
// the order they were stored.
type Line struct {
	N     uint64
	At    time.Time
	Level Level
	Text  string
}

// MaxLineBytes bounds one stored line; longer text is cut by the ingester.
const MaxLineBytes = 1 << 20

// StreamMeta is a run's stream bookkeeping.
type StreamMeta struct {
	Lines   uint64 `json:"lines"`   // lines ever stored (the next N)
	First   uint64 `json:"first"`   // first line still stored
	Bytes   uint64 `json:"bytes"`   // text bytes still stored
	Dropped uint64 `json:"dropped"` // lines dropped by retention
}

func (m *StreamMeta) validate() error {
	if m.First > m.Lines || m.Dropped > m.Lines {
		return errors.New("stream meta counts out of order")
	}
	return nil
}

var streamMetaKey = []byte("m")

// Chunk encoding (strict, binary: JSON would cost more than the pipe):
//
//	'W' 'S' 1 | base unix-nano (8 bytes BE) | uvarint count |
//	count × ( uvarint nanos since base | level byte | uvarint len | text )
//
// Text must be valid UTF-8 and at most MaxLineBytes; nothing may trail.
func encodeChunk(lines []Line) []byte {
	size := 3 + 8 + binary.MaxVarintLen64
	for i := range lines {
		size += 2*binary.MaxVarintLen64 + 1 + len(lines[i].Text)
	}
	b := make([]byte, 0, size)
	b = append(b, 'W', 'S', 1)
	base := lines[0].At.UnixNano()
	b = binary.BigEndian.AppendUint64(b, uint64(base))
	b = binary.AppendUvarint(b, uint64(len(lines)))
	for i := range lines {
		d := lines[i].At.UnixNano() - base
		if d < 0 {
			d = 0 // clocks may step back; order is kept by N, not time
		}
		b = binary.AppendUvarint(b, uint64(d))
		b = append(b, byte(lines[i].Level))
		b = binary.AppendUvarint(b, uint64(len(lines[i].Text)))
		b = append(b, lines[i].Text...)
	}
	return b
}

var errChunk = errors.New("bad stream chunk")

// decodeChunk is the strict decoder for a chunk whose first line is first.
func decodeChunk(b []byte, first uint64) ([]Line, error) {
	if len(b) < 12 || b[0] != 'W' || b[1] != 'S' || b[2] != 1 {
		return nil, fmt.Errorf("%w: bad header", errChunk)
	}
	base := int64(binary.BigEndian.Uint64(b[3:11]))
	p := b[11:]
	count, n := binary.Uvarint(p)
	if n <= 0 || count == 0 || count > uint64(len(p)) {
		return nil, fmt.Errorf("%w: bad count", errChunk)
	}
	p = p[n:]
	lines := make([]Line, 0, count)
	for i := uint64(0); i < count; i++ {
		d, n := binary.Uvarint(p)
		if n <= 0 || d > 1<<62 {
			return nil, fmt.Errorf("%w: line %d: bad time", errChunk, i)
		}
		p = p[n:]
		if len(p) == 0 {
			return nil, fmt.Errorf("%w: line %d: truncated", errChunk, i)
		}
		lvl := Level(p[0])
		if lvl < LevelDebug || lvl > LevelSuccess {
			return nil, fmt.Errorf("%w: line %d: bad level %d", errChunk, i, p[0])
		}
		p = p[1:]
		l, n := binary.Uvarint(p)
		if n <= 0 || l > MaxLineBytes || l > uint64(len(p)-n) {
			return nil, fmt.Errorf("%w: line %d: bad length", errChunk, i)
		}
		p = p[n:]
		text := p[:l]
		if !utf8.Valid(text) {
			return nil, fmt.Errorf("%w: line %d: text is not UTF-8", errChunk, i)
		}
		p = p[l:]
		lines = append(lines, Line{N: first + i, At: time.Unix(0, base+int64(d)).UTC(), Level: lvl, Text: string(text)})
	}
	if len(p) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", errChunk, len(p))
	}
	return lines, nil
}

func (tx *Tx) streamBucket(run string, create bool) (*bolt.Bucket, error) {
	if !runIDPattern().MatchString(run) {
		return nil, fmt.Errorf("bad run id %q", run)
	}
	if create {
		parent := tx.bucket(bucketStreams)
		parent.FillPercent = timeOrderedFill
		return parent.CreateBucketIfNotExists([]byte(run))
	}
	return tx.bucket(bucketStreams).Bucket([]byte(run)), nil
}

// StreamMeta reads a run's stream counts (zero when it has none).
func (tx *Tx) StreamMeta(run string) (StreamMeta, error) {
	var m StreamMeta
	b, err := tx.streamBucket(run, false)
	if err != nil || b == nil {
		return m, err
	}
	raw := b.Get(streamMetaKey)
	if raw == nil {
		return m, nil
	}
	err = decodeRecord("streams", run+"/m", raw, &m)
	return m, err
}

// keyStreamBytes is the running total of stream text bytes stored across
// runs (8 bytes, big-endian), kept by AppendLines and DeleteStream in the
// transactions that change it, so nobody walks the streams to know it.
var keyStreamBytes = []byte("streams.bytes")

// StreamTotal is the stream text bytes stored across all runs.
func (tx *Tx) StreamTotal() uint64 {
	if v := tx.bucket(bucketMeta).Get(keyStreamBytes); len(v) == 8 {
		return bytesToU64(v)
	}
	return 0
}

func (tx *Tx) addStreamTotal(added, removed uint64) error {
	n := tx.StreamTotal() + added
	n -= min(n, removed)
	return tx.bucket(bucketMeta).Put(keyStreamBytes, u64key(n))
}

// AppendLines stores lines as one chunk, numbering them, and enforces the
// run's retention: while the stored text exceeds limit bytes, the oldest
// chunks are deleted and counted as dropped. It returns the lines as
// numbered and the new meta.
func (tx *Tx) AppendLines(run string, lines []Line, limit uint64) ([]Line, StreamMeta, error) {
	var m StreamMeta
	if len(lines) == 0 {
		m, err := tx.StreamMeta(run)
		return nil, m, err
	}
	b, err := tx.streamBucket(run, true)
	if err != nil {
		return nil, m, err
	}
	// Chunks only ever go on the end (and come off the front): pack pages full.
	b.FillPercent = 1.0
	if m, err = tx.StreamMeta(run); err != nil {
		return nil, m, err
	}
	before := m.Bytes
	for i := range lines {
		if len(lines[i].Text) > MaxLineBytes || !utf8.ValidString(lines[i].Text) {
			return nil, m, fmt.Errorf("line %d: text must be UTF-8 of at most %d bytes", i, MaxLineBytes)
		}
		if lines[i].Level < LevelDebug || lines[i].Level > LevelSuccess {
			return nil, m, fmt.Errorf("line %d: bad level", i)
		}
		lines[i].N = m.Lines + uint64(i)
		m.Bytes += uint64(len(lines[i].Text))
	}
	if err := b.Put(u64key(m.Lines), encodeChunk(lines)); err != nil {
		return nil, m, err
	}
	m.Lines += uint64(len(lines))
	if limit > 0 && m.Bytes > limit {
		c := b.Cursor()
		for k, v := c.First(); k != nil && m.Bytes > limit; k, v = c.First() {
			if len(k) != 8 {
				break // only the meta key is left
			}
			old, err := decodeChunk(v, bytesToU64(k))
			if err != nil {
				return nil, m, &CorruptError{Bucket: "streams", Key: run + "/" + seqKeyString(k), Err: err}
			}
			if bytesToU64(k) == m.Lines-uint64(len(lines)) {
				break // never drop the chunk being written
			}
			for _, l := range old {
				m.Bytes -= uint64(len(l.Text))
			}
			m.Dropped += uint64(len(old))
			m.First = bytesToU64(k) + uint64(len(old))
			if err := c.Delete(); err != nil {
				return nil, m, err
			}
		}
	}
	raw, err := encodeRecord(&m)
	if err != nil {
		return nil, m, err
	}
	if err := b.Put(streamMetaKey, raw); err != nil {
		return nil, m, err
	}
	return lines, m, tx.addStreamTotal(m.Bytes, before)
}

// ReadLines returns up to max stored lines with N >= from, in order.
func (tx *Tx) ReadLines(run string, from uint64, max int) ([]Line, error) {
	b, err := tx.streamBucket(run, false)
	if err != nil || b == nil {
		return nil, err
	}
	c := b.Cursor()
	k, v := c.Seek(u64key(from))
	if len(k) != 8 || bytesToU64(k) > from {
		// The chunk holding from starts before it.
		if pk, pv := c.Prev(); len(pk) == 8 {
			k, v = pk, pv
		} else if k, v = c.Seek(u64key(from)); len(k) != 8 {
			return nil, nil
		}
	}
	var out []Line
	for ; len(k) == 8 && (max <= 0 || len(out) < max); k, v = c.Next() {
		lines, err := decodeChunk(v, bytesToU64(k))
		if err != nil {
			return nil, &CorruptError{Bucket: "streams", Key: run + "/" + seqKeyString(k), Err: err}
		}
		for _, l := range lines {
			if l.N >= from && (max <= 0 || len(out) < max) {
				out = append(out, l)
			}
		}
	}
	return out, nil
}

// ReadLinesBefore returns up to max stored lines with N < before, in order
// (the page above a view), so scrolling back costs what it shows.
func (tx *Tx) ReadLinesBefore(run string, before uint64, max int) ([]Line, error) {
	if max <= 0 || before == 0 {
		return nil, nil
	}
	from := uint64(0)
	if before > uint64(max) {
		from = before - uint64(max)
	}
	lines, err := tx.ReadLines(run, from, int(before-from))
	if err != nil {
		return nil, err
	}
	return lines, nil
}

// DeleteStream removes a run's stored lines (retention across runs).
func (tx *Tx) DeleteStream(run string) error {
	_, err := tx.deleteStream([]byte(run))
	return err
}

func (tx *Tx) deleteStream(run []byte) (uint64, error) {
	b := tx.bucket(bucketStreams).Bucket(run)
	if b == nil {
		return 0, nil
	}
	var m StreamMeta
	if raw := b.Get(streamMetaKey); raw != nil {
		if err := decodeRecord("streams", string(run)+"/m", raw, &m); err != nil {
			return 0, err
		}
	}
	if err := tx.bucket(bucketStreams).DeleteBucket(run); err != nil {
		return 0, err
	}
	return m.Bytes, tx.addStreamTotal(0, m.Bytes)
}

// PruneStreams deletes whole streams, oldest first, until the stored
// total is at most target, deleting at most max streams (a bounded batch:
// the caller commits and comes back for more). The streams bucket is
// keyed by run id, and run ids sort by start time, so it is its own index
// by age: the walk reads no run record, and stops at the first streams it
// does not need. Streams of live runs are skipped (still being written).
// It returns the bytes freed and whether the total is now within target.
func (tx *Tx) PruneStreams(target uint64, max int) (freed uint64, done bool, err error) {
	total := tx.StreamTotal()
	if total <= target {
		return 0, true, nil
	}
	var victims [][]byte
	c := tx.bucket(bucketStreams).Cursor()
	for k, _ := c.First(); k != nil && len(victims) < max; k, _ = c.Next() {
		if tx.runLive(string(k)) {
			continue
		}
		victims = append(victims, append([]byte(nil), k...))
	}
	for _, run := range victims {
		if total <= target {
			return freed, true, nil
		}
		n, err := tx.deleteStream(run)
		if err != nil {
			return freed, false, err
		}
		freed += n
		total -= min(total, n)
	}
	// Done when within target, or when nothing more can go (all live).
	return freed, total <= target || len(victims) < max, nil
}

// StreamSizes reports each run's stored stream bytes. It walks every
// stream: for checks and tests, never on a hot path.
func (tx *Tx) StreamSizes() (map[string]uint64, error) {
	out := map[string]uint64{}
	err := tx.bucket(bucketStreams).ForEachBucket(func(k []byte) error {
		m, err := tx.StreamMeta(string(k))
		if err != nil {
			return err
		}
		out[string(k)] = m.Bytes
		return nil
	})
	return out, err
}
