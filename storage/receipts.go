package storage

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"runtime"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

var (
	bucketReceipts = []byte("receipts")
	// bucketCheckpoints holds, for every checkpointEvery-th seq a full
	// verify has passed, the hash of that receipt (see VerifyReceipts).
	bucketCheckpoints = []byte("receipts.checkpoints")
)

// GenesisPrev is the prev of the first receipt.
const GenesisPrev = "0000000000000000000000000000000000000000000000000000000000000000"

// Receipt is one entry of the append-only, hash-chained log
// (docs/operating.md). Hash = SHA-256(Prev as its 64 ASCII hex chars || canonical
// JSON of the receipt without "hash"), where canonical JSON is compact,
// object keys sorted, no HTML escaping. Field order below is the sorted
// key order, so encoding the struct is already canonical.
type Receipt struct {
	Actor   string          `json:"actor"`
	At      time.Time       `json:"at"`
	Details json.RawMessage `json:"details,omitempty"`
	Hash    string          `json:"hash"`
	Kind    string          `json:"kind"`
	Prev    string          `json:"prev"`
	Seq     uint64          `json:"seq"`
	Subject string          `json:"subject"`
	Summary string          `json:"summary"`
}

// unhashed is Receipt without Hash, in canonical key order.
type unhashed struct {
	Actor   string          `json:"actor"`
	At      time.Time       `json:"at"`
	Details json.RawMessage `json:"details,omitempty"`
	Kind    string          `json:"kind"`
	Prev    string          `json:"prev"`
	Seq     uint64          `json:"seq"`
	Subject string          `json:"subject"`
	Summary string          `json:"summary"`
}

// Draft is what a caller supplies; seq, time, prev and hash are assigned.
// Details must never carry secret values.
type Draft struct {
	Kind    string
	Actor   string
	Subject string
	Summary string
	Details any // marshalled to canonical JSON; nil for none
}

// kindPattern matches ^[a-z][a-z0-9_.-]{0,63}$ and hexHash ^[0-9a-f]{64}$.
// They are hand-written rather than regexps because VerifyReceipts runs
// them for every receipt, and the regexps cost it about 15%.
var (
	kindPattern kindMatcher
	hexHash     hex64Matcher
)

type kindMatcher struct{}

func (kindMatcher) MatchString(s string) bool {
	if len(s) < 1 || len(s) > 64 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

type hex64Matcher struct{}

var lowerHex = [256]bool{'0': true, '1': true, '2': true, '3': true, '4': true, '5': true, '6': true, '7': true, '8': true, '9': true,
	'a': true, 'b': true, 'c': true, 'd': true, 'e': true, 'f': true}

func (hex64Matcher) MatchString(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !lowerHex[s[i]] {
			return false
		}
	}
	return true
}

func (r *Receipt) validate() error {
	switch {
	case r.Seq == 0:
		return errors.New("seq must be positive")
	case !kindPattern.MatchString(r.Kind):
		return fmt.Errorf("bad kind %q", r.Kind)
	case r.Actor == "":
		return errors.New("missing actor")
	case r.At.IsZero():
		return errors.New("missing time")
	case !hexHash.MatchString(r.Prev):
		return errors.New("prev is not 64 hex chars")
	case !hexHash.MatchString(r.Hash):
		return errors.New("hash is not 64 hex chars")
	}
	if len(r.Details) > 0 && !json.Valid(r.Details) {
		return errors.New("details are not valid JSON")
	}
	return nil
}

// ComputeHash returns the chain hash of r (ignoring r.Hash).
func (r *Receipt) ComputeHash() (string, error) {
	body, err := marshalCanonical(unhashed{r.Actor, r.At, r.Details, r.Kind, r.Prev, r.Seq, r.Subject, r.Summary})
	if err != nil {
		return "", err
	}
	h := sha256.New()
	h.Write([]byte(r.Prev))
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil)), nil
}

type chainHead struct {
	Seq  uint64
	Hash string
}

func loadHead(tx *bolt.Tx) (chainHead, error) {
	k, v := tx.Bucket(bucketReceipts).Cursor().Last()
	if k == nil {
		return chainHead{Seq: 0, Hash: GenesisPrev}, nil
	}
	var r Receipt
	if err := decodeRecord("receipts", seqKeyString(k), v, &r); err != nil {
		return chainHead{}, err
	}
	return chainHead{Seq: r.Seq, Hash: r.Hash}, nil
}

func seqKeyString(k []byte) string {
	if len(k) != 8 {
		return hex.EncodeToString(k)
	}
	return u64str(bytesToU64(k))
}

func bytesToU64(k []byte) uint64 {
	var n uint64
	for _, b := range k {
		n = n<<8 | uint64(b)
	}
	return n
}

// AppendReceipt adds d to the chain inside this write transaction. The
// receipt becomes visible (and is returned by Store.Update) only if the
// transaction commits.
func (tx *Tx) AppendReceipt(d Draft) (Receipt, error) {
	if !tx.writable() || tx.head == nil {
		return Receipt{}, errors.New("AppendReceipt needs a write transaction from Store.Update")
	}
	if tx.s.headErr != nil {
		return Receipt{}, tx.s.headErr
	}
	// encoding/json writes invalid UTF-8 as the escape \ufffd but reads it
	// back as the rune itself, so such a receipt would never re-hash.
	// Store the replacement rune up front.
	r := Receipt{
		Seq:     tx.head.Seq + 1,
		At:      time.Now().UTC(),
		Kind:    d.Kind,
		Actor:   strings.ToValidUTF8(d.Actor, "\uFFFD"),
		Subject: strings.ToValidUTF8(d.Subject, "\uFFFD"),
		Summary: strings.ToValidUTF8(d.Summary, "\uFFFD"),
		Prev:    tx.head.Hash,
	}
	if d.Details != nil {
		raw, err := json.Marshal(d.Details)
		if err != nil {
			return Receipt{}, fmt.Errorf("receipt details: %w", err)
		}
		if string(raw) != "null" && string(raw) != "{}" {
			if r.Details, err = CanonicalJSON(raw); err != nil {
				return Receipt{}, err
			}
		}
	}
	var err error
	if r.Hash, err = r.ComputeHash(); err != nil {
		return Receipt{}, err
	}
	// Receipts only ever go on the end: pack pages full (bbolt's default
	// of half-full pages doubled the file and every verify's reads).
	tx.bucket(bucketReceipts).FillPercent = 1.0
	if err := putRecord(tx, bucketReceipts, u64key(r.Seq), &r); err != nil {
		return Receipt{}, err
	}
	*tx.head = chainHead{Seq: r.Seq, Hash: r.Hash}
	tx.appended = append(tx.appended, r)
	return r, nil
}

// AppendReceipt is the one-receipt convenience over Update.
func (s *Store) AppendReceipt(d Draft) (Receipt, error) {
	rs, err := s.Update(func(tx *Tx) error {
		_, err := tx.AppendReceipt(d)
		return err
	})
	if err != nil {
		return Receipt{}, err
	}
	return rs[0], nil
}

// Receipt reads one receipt by seq.
func (tx *Tx) Receipt(seq uint64) (Receipt, error) {
	var r Receipt
	err := getRecord(tx, bucketReceipts, u64key(seq), u64str(seq), &r)
	return r, err
}

// ReceiptFilter selects receipts for listing.
type ReceiptFilter struct {
	Kind     string    // exact kind, or a prefix ending in "." (e.g. "hook.")
	Since    time.Time // at or after
	AfterSeq uint64    // seq strictly greater
	Before   uint64    // seq strictly less; 0 for no bound (a page above one already shown)
	Limit    int       // the newest Limit matches; 0 for all
}

func (f ReceiptFilter) match(r *Receipt) bool {
	if f.Kind != "" {
		if f.Kind[len(f.Kind)-1] == '.' {
			if len(r.Kind) < len(f.Kind) || r.Kind[:len(f.Kind)] != f.Kind {
				return false
			}
		} else if r.Kind != f.Kind {
			return false
		}
	}
	return f.Since.IsZero() || !r.At.Before(f.Since)
}

// Receipts returns matching receipts in ascending seq order. With a limit
// it walks backwards from the newest, so the cost is bounded by what is
// returned, not by the log's length.
func (tx *Tx) Receipts(f ReceiptFilter) ([]Receipt, error) {
	c := tx.bucket(bucketReceipts).Cursor()
	var out []Receipt
	if f.Limit > 0 {
		k, v := c.Last()
		if f.Before > 0 {
			if k, _ = c.Seek(u64key(f.Before)); k == nil {
				k, v = c.Last()
			} else {
				k, v = c.Prev()
			}
		}
		for ; k != nil; k, v = c.Prev() {
			if bytesToU64(k) <= f.AfterSeq {
				break
			}
			var r Receipt
			if err := readReceipt(k, v, &r); err != nil {
				return nil, err
			}
			if f.match(&r) {
				out = append(out, r)
				if len(out) == f.Limit {
					break
				}
			}
		}
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
		return out, nil
	}
	for k, v := c.Seek(u64key(f.AfterSeq + 1)); k != nil && (f.Before == 0 || bytesToU64(k) < f.Before); k, v = c.Next() {
		var r Receipt
		if err := readReceipt(k, v, &r); err != nil {
			return nil, err
		}
		if f.match(&r) {
			out = append(out, r)
		}
	}
	return out, nil
}

// Verification is the outcome of walking the chain.
type Verification struct {
	Count     uint64 // receipts checked
	Intact    bool
	BrokenSeq uint64 // first broken seq when not intact
	Reason    string
	// From is the checkpoint the walk started after: 0 for a full walk
	// from the first receipt, else the seq whose hash a full verify
	// recorded (receipts up to it were taken as checked then).
	From uint64
}

// CheckpointEvery is how often (in receipts) a verify records the hash it
// reached, so later verifies can start there.
const CheckpointEvery = 10_000

// VerifyReceipts walks the whole chain: every record decodes strictly, its
// key matches its seq, seqs are contiguous from 1, each prev is the hash
// before it and each hash recomputes. It stops at the first broken link.
// Every CheckpointEvery-th hash it passes is recorded as a checkpoint; one
// already recorded that differs means the log was rewritten since, and is
// reported as the break.
func (s *Store) VerifyReceipts() (Verification, error) { return s.verify(0, true) }

// VerifyReceiptsSince checks the chain from the newest checkpoint at or
// before seq (seq 0: the newest checkpoint of all) to the end, starting
// from the hash recorded there; with no such checkpoint it walks the
// whole chain. It costs what was appended since the checkpoint, not the
// log's length, and trusts the checkpoints as much as the store they are
// in: VerifyReceipts re-checks everything.
func (s *Store) VerifyReceiptsSince(seq uint64) (Verification, error) {
	return s.verify(seq, false)
}

type checkpoint struct {
	seq  uint64
	hash string
}

func (s *Store) verify(since uint64, full bool) (Verification, error) {
	var v Verification
	// The chain is only as sound as the pages under it, and Open does
	// not walk them.
	if err := s.CheckTree(); err != nil {
		return v, err
	}
	var fresh []checkpoint
	err := s.View(func(tx *Tx) error {
		start, prev := uint64(0), GenesisPrev
		if !full {
			start, prev = tx.checkpointAtOrBefore(since)
		}
		var marks []checkpoint
		var err error
		if v, marks, err = verifyChain(tx.s.db.Path(), tx.bucket(bucketReceipts).Cursor(), start, prev); err != nil {
			return err
		}
		cps := tx.bucket(bucketCheckpoints)
		for _, m := range marks {
			switch old := cps.Get(u64key(m.seq)); {
			case old == nil:
				fresh = append(fresh, m)
			case string(old) != m.hash:
				v = Verification{Count: m.seq - start - 1, BrokenSeq: m.seq, From: start,
					Reason: fmt.Sprintf("the hash at seq %d is not the one a verify recorded for it: the log was rewritten up to here", m.seq)}
				fresh = nil
				return nil
			}
		}
		return nil
	})
	if err != nil || len(fresh) == 0 {
		return v, err
	}
	_, err = s.Update(func(tx *Tx) error {
		for _, m := range fresh {
			if err := tx.bucket(bucketCheckpoints).Put(u64key(m.seq), []byte(m.hash)); err != nil {
				return err
			}
		}
		return nil
	})
	return v, err
}

// checkpointAtOrBefore is the newest checkpoint at or before seq (any,
// for 0), or the genesis when there is none.
func (tx *Tx) checkpointAtOrBefore(seq uint64) (uint64, string) {
	c := tx.bucket(bucketCheckpoints).Cursor()
	var k, v []byte
	if seq == 0 {
		k, v = c.Last()
	} else if k, v = c.Seek(u64key(seq)); k == nil || bytesToU64(k) > seq {
		k, v = c.Prev()
	}
	if len(k) != 8 || !hexHash.MatchString(string(v)) {
		return 0, GenesisPrev
	}
	return bytesToU64(k), string(v)
}

// verifyChain checks the receipts after start (whose hash is prev) on
// every core: a producer walks the cursor in batches, workers check each
// receipt on its own (decode, canonical bytes, hash), and the caller links
// the results in seq order (contiguous keys, prev = hash before). The
// first failure is re-examined on the slow path to say why. It returns
// the hashes it passed at every CheckpointEvery-th seq. A panic or fault
// on any of its goroutines (a damaged page of path) is returned as a
// *CorruptError, never a verdict: what was not read was not checked.
func verifyChain(path string, c *bolt.Cursor, start uint64, prevHex string) (Verification, []checkpoint, error) {
	const batchSize = 512
	type result struct {
		prev, hash [64]byte
		ok         bool
	}
	type batch struct {
		keys, raws [][]byte
		res        []result
		err        error // a worker's panic on this batch
		done       chan struct{}
	}
	workers := min(runtime.GOMAXPROCS(0), 8)
	jobs := make(chan *batch, workers)
	ordered := make(chan *batch, 2*workers)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			chk := newReceiptChecker()
			for b := range jobs {
				b.err = guarded(path, func() error {
					for i, k := range b.keys {
						if len(k) == 8 {
							r, seq := &b.res[i], bytesToU64(k)
							if r.ok = chk.fast(b.raws[i], seq, &r.prev, &r.hash); !r.ok {
								var p, h string
								if p, h, r.ok = chk.check(b.raws[i], seq); r.ok {
									copy(r.prev[:], p)
									copy(r.hash[:], h)
								}
							}
						}
					}
					return nil
				})
				close(b.done)
			}
		}()
	}
	// walkErr is the producer's panic, set before it closes ordered: the
	// caller reads it after ordered is drained, so an interrupted walk is
	// never taken for the end of the chain.
	var walkErr error
	go func() { // the producer: the only user of the cursor
		defer close(ordered)
		defer close(jobs)
		walkErr = guarded(path, func() error {
			b := &batch{done: make(chan struct{})}
			send := func() bool {
				b.res = make([]result, len(b.keys))
				select {
				case ordered <- b:
				case <-stop:
					return false
				}
				jobs <- b
				b = &batch{done: make(chan struct{})}
				return true
			}
			for k, v := c.Seek(u64key(start + 1)); k != nil; k, v = c.Next() {
				b.keys, b.raws = append(b.keys, k), append(b.raws, v)
				if len(b.keys) == batchSize && !send() {
					return nil
				}
			}
			if len(b.keys) > 0 {
				send()
			}
			return nil
		})
	}()

	want := start + 1
	var prev [64]byte
	copy(prev[:], prevHex)
	out := Verification{Intact: true, From: start}
	var marks []checkpoint
	var batchErr error
	stopWalk := func() {
		close(stop)
		for range ordered { // let the producer finish with the cursor
		}
	}
chain:
	for b := range ordered {
		<-b.done
		if b.err != nil {
			batchErr = b.err
			stopWalk()
			break
		}
		for i, k := range b.keys {
			if len(k) != 8 {
				out = Verification{BrokenSeq: want, From: start, Reason: fmt.Sprintf("stray key %x among the receipts", k)}
			} else if seq := bytesToU64(k); seq != want {
				out = Verification{BrokenSeq: want, From: start, Reason: fmt.Sprintf("seq %d is missing (next stored is %d)", want, seq)}
			} else if r := b.res[i]; !r.ok || r.prev != prev {
				out = Verification{BrokenSeq: seq, From: start, Reason: explainBroken(b.raws[i], seq, string(prev[:]))}
			} else {
				prev = r.hash
				if seq%CheckpointEvery == 0 {
					marks = append(marks, checkpoint{seq, string(r.hash[:])})
				}
				want++
				continue
			}
			stopWalk()
			break chain
		}
	}
	wg.Wait() // workers read the transaction's pages: done before it closes
	out.Count = want - 1 - start
	// ordered is closed and drained: the producer has returned, so its
	// error is visible here, and it outranks any verdict.
	if walkErr != nil {
		return Verification{}, nil, walkErr
	}
	if batchErr != nil {
		return Verification{}, nil, batchErr
	}
	return out, marks, nil
}

// receiptChecker is the fast path of verifyChain. A receipt passes when it
// decodes, validates, carries the seq of its key, is byte for byte
// the canonical encoding of what it decodes to, and its hash recomputes.
// Because the stored bytes are canonical, the hashed body is those bytes
// without the "hash" member, so nothing is encoded twice.
type receiptChecker struct {
	buf bytes.Buffer
	enc *json.Encoder
	h   hash.Hash
	sum [sha256.Size]byte
	hex [2 * sha256.Size]byte
}

func newReceiptChecker() *receiptChecker {
	c := &receiptChecker{h: sha256.New()}
	c.enc = json.NewEncoder(&c.buf)
	c.enc.SetEscapeHTML(false)
	return c
}

// check returns the receipt's prev and hash; the caller checks the link.
func (c *receiptChecker) check(raw []byte, seq uint64) (string, string, bool) {
	var r Receipt
	// json.Unmarshal is laxer than decodeStrict (unknown or case-folded
	// keys), but anything it lets through fails the byte comparison below.
	if json.Unmarshal(raw, &r) != nil || r.validate() != nil || r.Seq != seq {
		return "", "", false
	}
	c.buf.Reset()
	if c.enc.Encode(&r) != nil || !bytes.Equal(bytes.TrimSuffix(c.buf.Bytes(), []byte("\n")), raw) {
		return "", "", false
	}
	member := `"hash":"` + r.Hash + `",`
	i := bytes.LastIndex(raw, []byte(member))
	if i < 0 {
		return "", "", false
	}
	c.h.Reset()
	c.h.Write([]byte(r.Prev))
	c.h.Write(raw[:i])
	c.h.Write(raw[i+len(member):])
	hex.Encode(c.hex[:], c.h.Sum(c.sum[:0]))
	if string(c.hex[:]) != r.Hash {
		return "", "", false
	}
	return r.Prev, r.Hash, true
}

// explainBroken is the slow path: it says why a receipt failed the check.
func explainBroken(raw []byte, seq uint64, prev string) string {
	var r Receipt
	if err := decodeStrict(raw, &r); err != nil {
		return "record unreadable: " + err.Error()
	}
	if err := r.validate(); err != nil {
		return "record malformed: " + err.Error()
	}
	if r.Seq != seq {
		return fmt.Sprintf("record says seq %d", r.Seq)
	}
	if r.Prev != prev {
		return "prev does not match the hash of the receipt before it"
	}
	if h, err := r.ComputeHash(); err != nil || h != r.Hash {
		return "hash does not match the content (the receipt was altered)"
	}
	// A re-encoding that differs from the stored bytes means bytes
	// outside the hashed fields changed (e.g. whitespace was added).
	return "stored bytes are not the canonical encoding of the receipt"
}
