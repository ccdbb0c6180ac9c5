package storage

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	bolt "go.etcd.io/bbolt"
)

var bucketReceipts = []byte("receipts")

// GenesisPrev is the prev of the first receipt.
const GenesisPrev = "0000000000000000000000000000000000000000000000000000000000000000"

// Receipt is one entry of the append-only, hash-chained log (DESIGN
// section 8). Hash = SHA-256(Prev as its 64 ASCII hex chars || canonical
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

var (
	kindPattern = regexp.MustCompile(`^[a-z][a-z0-9_.-]{0,63}$`)
	hexHash     = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

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
	r := Receipt{
		Seq:     tx.head.Seq + 1,
		At:      time.Now().UTC(),
		Kind:    d.Kind,
		Actor:   d.Actor,
		Subject: d.Subject,
		Summary: d.Summary,
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
		for k, v := c.Last(); k != nil; k, v = c.Prev() {
			if bytesToU64(k) <= f.AfterSeq {
				break
			}
			var r Receipt
			if err := decodeRecord("receipts", seqKeyString(k), v, &r); err != nil {
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
	for k, v := c.Seek(u64key(f.AfterSeq + 1)); k != nil; k, v = c.Next() {
		var r Receipt
		if err := decodeRecord("receipts", seqKeyString(k), v, &r); err != nil {
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
}

// VerifyReceipts walks the whole chain: every record decodes strictly, its
// key matches its seq, seqs are contiguous from 1, each prev is the hash
// before it and each hash recomputes. It stops at the first broken link.
func (s *Store) VerifyReceipts() (Verification, error) {
	var v Verification
	err := s.View(func(tx *Tx) error {
		v = verifyChain(tx.bucket(bucketReceipts).Cursor())
		return nil
	})
	return v, err
}

func verifyChain(c *bolt.Cursor) Verification {
	prev := GenesisPrev
	var want uint64 = 1
	var r Receipt
	for k, raw := c.First(); k != nil; k, raw = c.Next() {
		seq := bytesToU64(k)
		broken := func(reason string) Verification {
			return Verification{Count: want - 1, BrokenSeq: seq, Reason: reason}
		}
		if len(k) != 8 {
			return broken("key is not an 8-byte seq")
		}
		if seq != want {
			return Verification{Count: want - 1, BrokenSeq: want, Reason: fmt.Sprintf("seq %d is missing (next stored is %d)", want, seq)}
		}
		r = Receipt{}
		if err := decodeStrict(raw, &r); err != nil {
			return broken("record unreadable: " + err.Error())
		}
		if err := r.validate(); err != nil {
			return broken("record malformed: " + err.Error())
		}
		if r.Seq != seq {
			return broken(fmt.Sprintf("record says seq %d", r.Seq))
		}
		if r.Prev != prev {
			return broken("prev does not match the hash of the receipt before it")
		}
		h, err := r.ComputeHash()
		if err != nil || h != r.Hash {
			return broken("hash does not match the content (the receipt was altered)")
		}
		// A re-encoding that differs from the stored bytes means bytes
		// outside the hashed fields changed (e.g. whitespace was added).
		if enc, err := marshalCanonical(&r); err != nil || !bytes.Equal(enc, raw) {
			return broken("stored bytes are not the canonical encoding of the receipt")
		}
		prev = r.Hash
		want++
	}
	return Verification{Count: want - 1, Intact: true}
}
