package engine

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/wardenhq/warden/storage"
)

// ControlSocket is the name, in the data dir, of the socket on which the
// process holding the store serves the facade to other warden processes.
const ControlSocket = "control.sock"

// ResolveDataDir returns the data dir a command means, as an absolute
// path: dir when given, else $WARDEN_DATA_DIR, else the XDG default.
func ResolveDataDir(dir string) (string, error) {
	if dir == "" {
		d, err := storage.DefaultDir()
		if err != nil {
			return "", err
		}
		dir = d
	}
	return filepath.Abs(dir)
}

// RecordRefusedAttach receipts a control socket connection that was
// refused (kind "control.refused"): who tried, from which process, and why.
func (e *Engine) RecordRefusedAttach(uid, pid int, why string) error {
	actor := fmt.Sprintf("uid:%d", uid)
	_, err := e.store.AppendReceipt(storage.Draft{Kind: storage.KindControlRefused, Actor: actor, Subject: ControlSocket,
		Summary: fmt.Sprintf("refused a control connection from uid %d (pid %d): %s", uid, pid, why),
		Details: map[string]any{"uid": uid, "pid": pid, "why": why}})
	return err
}

// ErrEngineGone ends a subscription (and every call in flight) of a
// process attached to another one's engine when that process goes away:
// the data dir is free to be taken over. The error is an *EngineGoneError.
var ErrEngineGone = errors.New("the warden process serving this data dir went away")

// EngineGoneError says which process went away and how: Closed is true
// when it let go of the data dir on purpose (a command that finished, a
// serve that was stopped) and said goodbye, false when it died.
type EngineGoneError struct {
	DataDir string
	PID     int
	Closed  bool
}

func (e *EngineGoneError) Error() string {
	if e.Closed {
		return fmt.Sprintf("the engine stopped on purpose: the warden process serving %s (pid %d) let go of it", e.DataDir, e.PID)
	}
	return fmt.Sprintf("the warden process serving %s (pid %d) went away without saying goodbye (it crashed or was killed)", e.DataDir, e.PID)
}

// Is makes errors.Is(err, ErrEngineGone) true.
func (e *EngineGoneError) Is(target error) bool { return target == ErrEngineGone }
