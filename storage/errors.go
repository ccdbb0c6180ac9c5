package storage

import (
	"errors"
	"fmt"
)

// ErrNotFound is returned when a record does not exist.
var ErrNotFound = errors.New("not found")

// ErrClosed is returned by operations on a closed store.
var ErrClosed = errors.New("store is closed")

// Mark returns an error whose text is the formatted message alone and
// which still matches sentinel (errors.Is): for messages that already say
// what the sentinel would, so they read "no receipt 9 (see `warden
// receipts list`)" and not "...: not found" after it.
func Mark(sentinel error, format string, args ...any) error {
	return &markedError{msg: fmt.Sprintf(format, args...), sentinel: sentinel}
}

type markedError struct {
	msg      string
	sentinel error
}

func (e *markedError) Error() string { return e.msg }
func (e *markedError) Unwrap() error { return e.sentinel }

// PolicyError says a file or directory of the data dir breaks the open
// policy of docs/operating.md, and how to fix it.
type PolicyError struct {
	Path    string
	Problem string
	Fix     string
}

func (e *PolicyError) Error() string {
	return fmt.Sprintf("%s: %s; fix: %s", e.Path, e.Problem, e.Fix)
}

// LockedError says another process holds the data dir.
type LockedError struct {
	Dir string
	PID int // 0 when the pid file could not be read
}

func (e *LockedError) Error() string {
	if e.PID == 0 {
		return fmt.Sprintf("data dir %s is in use by another warden process (no readable pid file); find it with `fuser %s/warden.db` and stop it, or use another --data-dir", e.Dir, e.Dir)
	}
	return fmt.Sprintf("data dir %s is in use by warden pid %d; see it with `ps -o pid,args -p %d`, stop it with `kill %d`, or use another --data-dir", e.Dir, e.PID, e.PID, e.PID)
}

// SchemaError says the store was written by a schema this build does not know.
type SchemaError struct {
	Found     int
	Supported int
}

func (e *SchemaError) Error() string {
	return fmt.Sprintf("warden.db has schema version %d but this warden supports up to %d: upgrade warden (or open a different --data-dir)", e.Found, e.Supported)
}

// CorruptError says the store is damaged: a stored record failed its
// strict codec (Bucket and Key name it; the value is never carried), or
// the file itself is (Path names it, Bucket is empty): shorter than its
// pages, no valid meta page, or a page bbolt could not read. warden never
// changes, moves or removes a damaged file: it stays where it is.
type CorruptError struct {
	Path   string
	Bucket string
	Key    string
	Err    error

	panicked bool // bbolt panicked or faulted: its locks may be held for good
}

func (e *CorruptError) Error() string {
	if e.Bucket == "" {
		return e.Problem() + "; fix: " + e.Fix()
	}
	return fmt.Sprintf("storage corrupt: bucket %q key %q: %v (run `warden doctor`; restore warden.db from a backup if it persists)", e.Bucket, e.Key, e.Err)
}

// Problem is what is wrong, without the fix.
func (e *CorruptError) Problem() string {
	if e.Bucket == "" {
		return fmt.Sprintf("storage corrupt: %s: %v; warden has left the file as it is", e.Path, e.Err)
	}
	return fmt.Sprintf("storage corrupt: bucket %q key %q: %v", e.Bucket, e.Key, e.Err)
}

// Fix is what the operator does about it: restore the newest backup,
// keeping the damaged file.
func (e *CorruptError) Fix() string {
	path := e.Path
	if path == "" {
		path = DBFile
	}
	return fmt.Sprintf("stop every warden process on this data dir, move the damaged file aside (`mv %s %s.damaged`: keep it), "+
		"then restore the newest backup of warden.db with its seal.key (warden has no backup or restore verb: copy both files back, 0600, "+
		"as docs/operating.md \"Backups\" says) and run `warden receipts verify --full`", path, path)
}

func (e *CorruptError) Unwrap() error { return e.Err }
