package storage

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Decision verdicts.
const (
	ApproveOnce   = "approve-once"
	ApproveAlways = "approve-always"
	Deny          = "deny"
)

// Requester is the run that asked.
type Requester struct {
	Run    string `json:"run"`
	Module string `json:"module"`
	Hook   string `json:"hook"`
}

// Decision is the operator's answer to a request.
type Decision struct {
	Verdict string    `json:"verdict"`
	By      string    `json:"by"`
	At      time.Time `json:"at"`
	Reason  string    `json:"reason,omitempty"`
}

// RequestRecord is a permission request (DESIGN section 7). Everything but
// Decision is immutable once written; Digest is SHA-256 of the canonical
// operation and content, so a retry claim matches only the identical one.
type RequestRecord struct {
	ID        uint64          `json:"id"`
	Subject   string          `json:"subject"`
	Requester Requester       `json:"requester"`
	Operation string          `json:"operation"`
	Content   json.RawMessage `json:"content"`
	Digest    string          `json:"digest"`
	Revision  uint64          `json:"revision"`
	Created   time.Time       `json:"created"`
	Expires   time.Time       `json:"expires"`
	Decision  *Decision       `json:"decision,omitempty"`
}

func (r *RequestRecord) validate() error {
	switch {
	case r.ID == 0:
		return errors.New("id must be positive")
	case r.Subject == "" || r.Operation == "":
		return errors.New("missing subject or operation")
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
	return nil
}

// NextRequestID reserves the next request id.
func (tx *Tx) NextRequestID() (uint64, error) { return tx.bucket(bucketRequests).NextSequence() }

// PutRequest writes a request. Callers keep it immutable but for Decision.
func (tx *Tx) PutRequest(r RequestRecord) error {
	return putRecord(tx, bucketRequests, u64key(r.ID), &r)
}

// Request reads one request.
func (tx *Tx) Request(id uint64) (RequestRecord, error) {
	var r RequestRecord
	err := getRecord(tx, bucketRequests, u64key(id), u64str(id), &r)
	return r, err
}

// Requests lists requests newest first, at most limit (0 for all).
func (tx *Tx) Requests(limit int) ([]RequestRecord, error) {
	var out []RequestRecord
	c := tx.bucket(bucketRequests).Cursor()
	for k, v := c.Last(); k != nil; k, v = c.Prev() {
		var r RequestRecord
		if err := decodeRecord("requests", seqKeyString(k), v, &r); err != nil {
			return nil, err
		}
		out = append(out, r)
		if limit > 0 && len(out) == limit {
			break
		}
	}
	return out, nil
}
