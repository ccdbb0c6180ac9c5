package storage

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"sync"
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
	JailMode string          `json:"jailMode"` // "bwrap", "landlock" or "off"
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

var runIDPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9]{8}T[0-9]{6}-[0-9a-f]{6}$`) })

// ErrRunExists is returned by CreateRun for an id already stored.
var ErrRunExists = errors.New("a run with this id is already stored")

const (
	runIDTime    = "20060102T150405"
	runIDMaxN    = 1<<24 - 1
	runIDRandTop = 1 << 23 // a second's first suffix is random below this, leaving room to count up
)

// runIDs hands out run ids like 20261129T140932-3fa2c1: the start second,
// then a 24-bit suffix that begins at a random value each new second and
// counts up within it (the scheme of a monotonic ULID, in a shape an
// operator can read). Every id is greater than the last one handed out and
// than every id stored when the store was opened, so ids are unique within
// the store and sort by time, even when the clock steps back (the ids then
// run ahead of the clock until it catches up). Only one process opens a
// store, so one generator per Store is enough; CreateRun still refuses a
// stored id, so a collision can never overwrite a run.
type runIDs struct {
	mu  sync.Mutex
	sec time.Time // the second of the last id; zero before the first
	n   uint32    // the suffix of the last id
}

// seed makes the generator continue after last (a stored id; "" for none).
func (g *runIDs) seed(last string) {
	if !runIDPattern().MatchString(last) {
		return
	}
	sec, err := time.Parse(runIDTime, last[:15])
	n, err2 := strconv.ParseUint(last[16:], 16, 32)
	if err != nil || err2 != nil {
		return
	}
	g.sec, g.n = sec, uint32(n)
}

func (g *runIDs) next(now time.Time) string {
	sec := now.UTC().Truncate(time.Second)
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case sec.After(g.sec):
		g.sec, g.n = sec, randSuffix()
	case g.n < runIDMaxN:
		g.n++
	default: // 16M ids in one second: borrow the next one
		g.sec, g.n = g.sec.Add(time.Second), randSuffix()
	}
	return fmt.Sprintf("%s-%06x", g.sec.Format(runIDTime), g.n)
}

func randSuffix() uint32 {
	var b [4]byte
	rand.Read(b[:])
	return binary.BigEndian.Uint32(b[:]) % runIDRandTop
}

// NewRunID returns a run id unique within this store and greater than
// every run id it holds or handed out before.
func (s *Store) NewRunID(now time.Time) string { return s.runIDs.next(now) }

// ValidRunID reports whether id has the shape of a run id.
func ValidRunID(id string) bool { return runIDPattern().MatchString(id) }

func (r *RunRecord) validate() error {
	switch {
	case !runIDPattern().MatchString(r.ID):
		return fmt.Errorf("bad run id %q", r.ID)
	case !modulePattern().MatchString(r.Module):
		return errors.New("bad module id")
	case r.Hook == "":
		return errors.New("missing hook")
	case r.Status != RunRunning && r.Status != RunSucceeded && r.Status != RunFailed && r.Status != RunCancelled:
		return fmt.Errorf("bad status %q", r.Status)
	case r.JailMode != "bwrap" && r.JailMode != "landlock" && r.JailMode != "off":
		return fmt.Errorf("bad jail mode %q", r.JailMode)
	case r.Started.IsZero():
		return errors.New("missing start time")
	case r.Status != RunRunning && r.Ended == nil:
		return errors.New("finished run without end time")
	}
	return nil
}

// CreateRun stores a new run's record; ErrRunExists (changing nothing)
// when its id is already stored, so no run is ever overwritten.
func (tx *Tx) CreateRun(r RunRecord) error {
	if tx.bucket(bucketRuns).Get([]byte(r.ID)) != nil {
		return fmt.Errorf("run %s: %w", r.ID, ErrRunExists)
	}
	return tx.PutRun(r)
}

var bucketLiveRuns = []byte("runs.live")

// PutRun writes a run record, and keeps the index of live runs (those
// still "running") in the same transaction, so that reconciling at open
// reads only them, however many runs are stored.
func (tx *Tx) PutRun(r RunRecord) error {
	tx.bucket(bucketRuns).FillPercent = timeOrderedFill
	if err := putRecord(tx, bucketRuns, []byte(r.ID), &r); err != nil {
		return err
	}
	live := tx.bucket(bucketLiveRuns)
	if r.Status == RunRunning {
		return live.Put([]byte(r.ID), present)
	}
	return live.Delete([]byte(r.ID))
}

// LiveRuns returns the runs recorded as still running, oldest first.
func (tx *Tx) LiveRuns() ([]RunRecord, error) {
	var out []RunRecord
	err := tx.bucket(bucketLiveRuns).ForEach(func(k, _ []byte) error {
		r, err := tx.Run(string(k))
		if errors.Is(err, ErrNotFound) {
			return &CorruptError{Bucket: string(bucketLiveRuns), Key: string(k), Err: errors.New("indexes a run that is not stored")}
		}
		out = append(out, r)
		return err
	})
	return out, err
}

// runLive reports whether run is indexed as live.
func (tx *Tx) runLive(run string) bool { return tx.bucket(bucketLiveRuns).Get([]byte(run)) != nil }

// Run reads one run.
func (tx *Tx) Run(id string) (RunRecord, error) {
	var r RunRecord
	if !runIDPattern().MatchString(id) {
		return r, ErrNotFound
	}
	err := getRecord(tx, bucketRuns, []byte(id), id, &r)
	return r, err
}

// Runs lists runs newest first, at most limit (0 for all).
func (tx *Tx) Runs(limit int) ([]RunRecord, error) { return tx.RunsBefore("", limit) }

// RunsBefore lists the runs whose id sorts before before ("" for the
// newest), newest first, at most limit (0 for all): a page read by key
// range, costing what it returns.
func (tx *Tx) RunsBefore(before string, limit int) ([]RunRecord, error) {
	var out []RunRecord
	c := tx.bucket(bucketRuns).Cursor()
	k, v := c.Last()
	if before != "" {
		if k, _ = c.Seek([]byte(before)); k == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
	}
	for ; k != nil; k, v = c.Prev() {
		var r RunRecord
		if err := readRun(k, v, &r); err != nil {
			return nil, err
		}
		out = append(out, r)
		if limit > 0 && len(out) == limit {
			break
		}
	}
	return out, nil
}
