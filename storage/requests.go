package storage

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Decision verdicts.
const (
	ApproveOnce   = "approve-once"
	ApproveAlways = "approve-always"
	Deny          = "deny"
)

// Requester is the run that asked, or, for an MCP tool call, the client
// and its session (Run is then empty; Hook holds the tool's name).
type Requester struct {
	Run     string `json:"run"`
	Module  string `json:"module"`
	Hook    string `json:"hook"`
	Client  string `json:"client,omitempty"`  // "mcp:<client>"
	Session string `json:"session,omitempty"` // the MCP serve session
}

// Decision is the operator's answer to a request.
type Decision struct {
	Verdict string    `json:"verdict"`
	By      string    `json:"by"`
	At      time.Time `json:"at"`
	Reason  string    `json:"reason,omitempty"`
}

// Claim is the single retry an approve-once decision issues. Only the
// identical operation (same subject, operation and digest) consumes it, and
// only once: Used flips to true with who consumed it and when.
type Claim struct {
	Used bool       `json:"used"`
	By   string     `json:"by,omitempty"` // the run that consumed it
	At   *time.Time `json:"at,omitempty"`
}

// RequestRecord is a permission request (docs/operating.md). Everything but
// Decision and the state of its Claim is immutable once written; Digest is
// SHA-256 of the canonical operation and content, so a retry claim matches
// only the identical one. Revision is the subject's policy revision the
// request was made against.
type RequestRecord struct {
	ID        uint64          `json:"id"`
	Subject   string          `json:"subject"`
	Requester Requester       `json:"requester"`
	Operation string          `json:"operation"`
	Content   json.RawMessage `json:"content"`
	// Warning is the engine's word on what approving would open that an
	// operator might not see in the content (an address on the egress
	// deny list, or of this host); "" for none.
	Warning  string    `json:"warning,omitempty"`
	Digest   string    `json:"digest"`
	Revision uint64    `json:"revision"`
	Created  time.Time `json:"created"`
	Expires  time.Time `json:"expires"`
	Decision *Decision `json:"decision,omitempty"`
	Claim    *Claim    `json:"claim,omitempty"`
}

// Pending reports whether the request still waits for a decision at now.
func (r *RequestRecord) Pending(now time.Time) bool {
	return r.Decision == nil && now.Before(r.Expires)
}

func (r *RequestRecord) validate() error {
	switch {
	case r.ID == 0:
		return errors.New("id must be positive")
	case r.Subject == "" || r.Operation == "":
		return errors.New("missing subject or operation")
	case strings.ContainsFunc(r.Subject+r.Operation, func(c rune) bool { return c < 0x20 || c == 0x7f }):
		return errors.New("control character in subject or operation")
	case !hexHash.MatchString(r.Digest):
		return errors.New("digest is not 64 hex chars")
	case r.Created.IsZero() || r.Expires.IsZero():
		return errors.New("missing created or expires")
	case len(r.Content) == 0 || !json.Valid(r.Content):
		return errors.New("content is not JSON")
	}
	if d := r.Decision; d != nil {
		if d.Verdict != ApproveOnce && d.Verdict != ApproveAlways && d.Verdict != Deny {
			return fmt.Errorf("bad verdict %q", d.Verdict)
		}
		if d.By == "" || d.At.IsZero() {
			return errors.New("decision without who or when")
		}
	}
	if c := r.Claim; c != nil {
		if r.Decision == nil || r.Decision.Verdict != ApproveOnce {
			return errors.New("a claim without an approve-once decision")
		}
		if c.Used != (c.By != "") || c.Used != (c.At != nil) {
			return errors.New("a claim must say by whom and when exactly when it is used")
		}
	}
	return nil
}

// bucketRequestIndex indexes the requests still pending and the claims
// still open, so neither the per-subject limit nor a claim lookup walks
// every request ever made. It is created on first write (readers treat a
// missing index as empty) and is derived data: PutRequest keeps it.
//
//	"p\x00" subject "\x00" id               a request without a decision
//	"c\x00" subject "\x00" op "\x00" digest "\x00" id   an unused claim
var bucketRequestIndex = []byte("request-index")

func pendingKey(subject string, id uint64) []byte {
	return append([]byte("p\x00"+subject+"\x00"), u64key(id)...)
}

func claimPrefix(subject, operation, digest string) []byte {
	return []byte("c\x00" + subject + "\x00" + operation + "\x00" + digest + "\x00")
}

func indexKeys(r *RequestRecord) [][]byte {
	var ks [][]byte
	if r.Decision == nil {
		ks = append(ks, pendingKey(r.Subject, r.ID))
	}
	if r.Claim != nil && !r.Claim.Used {
		ks = append(ks, append(claimPrefix(r.Subject, r.Operation, r.Digest), u64key(r.ID)...))
	}
	return ks
}

// NextRequestID reserves the next request id.
func (tx *Tx) NextRequestID() (uint64, error) { return tx.bucket(bucketRequests).NextSequence() }

// PutRequest writes a request and keeps the index. Callers keep it
// immutable but for Decision and Claim.
func (tx *Tx) PutRequest(r RequestRecord) error {
	idx, err := tx.btx.CreateBucketIfNotExists(bucketRequestIndex)
	if err != nil {
		return err
	}
	if raw := tx.bucket(bucketRequests).Get(u64key(r.ID)); raw != nil {
		var old RequestRecord
		if err := decodeRecord("requests", u64str(r.ID), raw, &old); err != nil {
			return err
		}
		if old.Subject != r.Subject || old.Operation != r.Operation || old.Digest != r.Digest || !bytes.Equal(old.Content, r.Content) ||
			old.Revision != r.Revision || !old.Created.Equal(r.Created) || !old.Expires.Equal(r.Expires) || old.Requester != r.Requester {
			return fmt.Errorf("request %d is immutable but for its decision and claim", r.ID)
		}
		if old.Decision != nil && !sameDecision(old.Decision, r.Decision) {
			return fmt.Errorf("request %d was already decided", r.ID)
		}
		for _, k := range indexKeys(&old) {
			if err := idx.Delete(k); err != nil {
				return err
			}
		}
	}
	if err := putRecord(tx, bucketRequests, u64key(r.ID), &r); err != nil {
		return err
	}
	for _, k := range indexKeys(&r) {
		if err := idx.Put(k, []byte{}); err != nil {
			return err
		}
	}
	return nil
}

// Request reads one request.
func (tx *Tx) Request(id uint64) (RequestRecord, error) {
	var r RequestRecord
	err := getRecord(tx, bucketRequests, u64key(id), u64str(id), &r)
	return r, err
}

// Requests lists requests newest first, at most limit (0 for all).
func (tx *Tx) Requests(limit int) ([]RequestRecord, error) {
	return tx.RequestsBefore(0, limit, nil)
}

// RequestsBefore lists the requests with an id below before (0: from the
// newest) that keep accepts (nil: all), newest first, at most limit (0
// for all): a page read by key range.
func (tx *Tx) RequestsBefore(before uint64, limit int, keep func(*RequestRecord) bool) ([]RequestRecord, error) {
	var out []RequestRecord
	c := tx.bucket(bucketRequests).Cursor()
	k, v := c.Last()
	if before > 0 {
		if k, _ = c.Seek(u64key(before)); k == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
	}
	for ; k != nil; k, v = c.Prev() {
		var r RequestRecord
		if err := decodeRecord("requests", seqKeyString(k), v, &r); err != nil {
			return nil, err
		}
		if keep != nil && !keep(&r) {
			continue
		}
		out = append(out, r)
		if limit > 0 && len(out) == limit {
			break
		}
	}
	return out, nil
}

// UndecidedRequests lists the requests without a decision, oldest first:
// of one subject, or of every subject when subject is "". Some may have
// expired without anyone recording it yet (see RequestRecord.Pending).
func (tx *Tx) UndecidedRequests(subject string) ([]RequestRecord, error) {
	prefix := []byte("p\x00")
	if subject != "" {
		prefix = []byte("p\x00" + subject + "\x00")
	}
	ids, err := tx.indexIDs(prefix)
	if err != nil {
		return nil, err
	}
	out := make([]RequestRecord, 0, len(ids))
	for _, id := range ids {
		r, err := tx.Request(id)
		if err != nil {
			return nil, fmt.Errorf("request index names request %d: %w", id, err)
		}
		out = append(out, r)
	}
	// Ids grow with time; across subjects the index is sorted by subject.
	sortRequestsByID(out)
	return out, nil
}

// OpenClaim finds the oldest unused claim for exactly this operation of
// this subject.
func (tx *Tx) OpenClaim(subject, operation, digest string) (RequestRecord, bool, error) {
	ids, err := tx.indexIDs(claimPrefix(subject, operation, digest))
	if err != nil || len(ids) == 0 {
		return RequestRecord{}, false, err
	}
	r, err := tx.Request(ids[0])
	if err != nil {
		return r, false, fmt.Errorf("claim index names request %d: %w", ids[0], err)
	}
	return r, true, nil
}

func (tx *Tx) indexIDs(prefix []byte) ([]uint64, error) {
	idx := tx.bucket(bucketRequestIndex)
	if idx == nil {
		return nil, nil
	}
	var ids []uint64
	c := idx.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		if len(k) < len(prefix)+8 {
			return nil, &CorruptError{Bucket: string(bucketRequestIndex), Key: fmt.Sprintf("%q", k), Err: errors.New("short index key")}
		}
		ids = append(ids, bytesToU64(k[len(k)-8:]))
	}
	return ids, nil
}

func sameDecision(a, b *Decision) bool {
	return b != nil && a.Verdict == b.Verdict && a.By == b.By && a.At.Equal(b.At) && a.Reason == b.Reason
}

func sortRequestsByID(rs []RequestRecord) {
	sort.Slice(rs, func(i, j int) bool { return rs[i].ID < rs[j].ID })
}
