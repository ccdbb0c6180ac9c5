package storage

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"
)

// Run statuses.
const (
	RunRunning   = "running"
	RunSucceeded = "succeeded"
	RunFailed    = "failed"
	RunCancelled = "cancelled"
)

// RunRecord is one hook run, from preflight to outcome.
type RunRecord struct {
	ID       string          `json:"id"`
	Module   string          `json:"module"`
	Hook     string          `json:"hook"`
	Actor    string          `json:"actor"`
	Status   string          `json:"status"`
	JailMode string          `json:"jailMode"` // "bwrap" or "off"
	Started  time.Time       `json:"started"`
	Deadline time.Time       `json:"deadline"`
	Ended    *time.Time      `json:"ended,omitempty"`
	Exit     *int            `json:"exit,omitempty"`
	Error    string          `json:"error,omitempty"`
	Inputs   json.RawMessage `json:"inputs,omitempty"`
	Outputs  json.RawMessage `json:"outputs,omitempty"`
	PID      int             `json:"pid,omitempty"` // the engine process that ran it

	// Network is "host" (the host's whole network: loud), "egress" (a
	// list, through the run's proxy) or "" (none).
	Network string `json:"network,omitempty"`
}

var runIDPattern = regexp.MustCompile(`^[0-9]{8}T[0-9]{6}-[0-9a-f]{6}$`)

// NewRunID makes a run id that sorts by start time: 20261129T140932-3fa2c1.
func NewRunID(now time.Time) string {
	var b [3]byte
	rand.Read(b[:])
	return now.UTC().Format("20060102T150405") + "-" + hex.EncodeToString(b[:])
}

// ValidRunID reports whether id has the shape of a run id.
func ValidRunID(id string) bool { return runIDPattern.MatchString(id) }

func (r *RunRecord) validate() error {
	switch {
	case !runIDPattern.MatchString(r.ID):
		return fmt.Errorf("bad run id %q", r.ID)
	case !modulePattern.MatchString(r.Module):
		return errors.New("bad module id")
	case r.Hook == "":
		return errors.New("missing hook")
	case r.Status != RunRunning && r.Status != RunSucceeded && r.Status != RunFailed && r.Status != RunCancelled:
		return fmt.Errorf("bad status %q", r.Status)
	case r.JailMode != "bwrap" && r.JailMode != "off":
		return fmt.Errorf("bad jail mode %q", r.JailMode)
	case r.Started.IsZero():
		return errors.New("missing start time")
	case r.Status != RunRunning && r.Ended == nil:
		return errors.New("finished run without end time")
	}
	return nil
}

// PutRun writes a run record.
func (tx *Tx) PutRun(r RunRecord) error { return putRecord(tx, bucketRuns, []byte(r.ID), &r) }

// Run reads one run.
func (tx *Tx) Run(id string) (RunRecord, error) {
	var r RunRecord
	if !runIDPattern.MatchString(id) {
		return r, ErrNotFound
	}
	err := getRecord(tx, bucketRuns, []byte(id), id, &r)
	return r, err
}

// Runs lists runs newest first, at most limit (0 for all).
func (tx *Tx) Runs(limit int) ([]RunRecord, error) {
	var out []RunRecord
	c := tx.bucket(bucketRuns).Cursor()
	for k, v := c.Last(); k != nil; k, v = c.Prev() {
		var r RunRecord
		if err := decodeRecord("runs", string(k), v, &r); err != nil {
			return nil, err
		}
		out = append(out, r)
		if limit > 0 && len(out) == limit {
			break
		}
	}
	return out, nil
}
