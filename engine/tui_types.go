package engine

import "github.com/wardenhq/warden/storage"

// Re-exported for the console (tui never imports storage).
type (
	// Level is a stream line's level.
	Level = storage.Level
	// StreamMeta is a run's stream bookkeeping.
	StreamMeta = storage.StreamMeta
	// Decision is the answer to a request.
	Decision = storage.Decision
)

// Stream line levels.
const (
	LevelDebug   = storage.LevelDebug
	LevelInfo    = storage.LevelInfo
	LevelWarn    = storage.LevelWarn
	LevelError   = storage.LevelError
	LevelSuccess = storage.LevelSuccess
)

// Run states.
const (
	RunRunning   = storage.RunRunning
	RunSucceeded = storage.RunSucceeded
	RunFailed    = storage.RunFailed
	RunCancelled = storage.RunCancelled
)

// JailReady reports whether the default jail (bubblewrap) can be used on
// this host; the console shows it in its header.
func (e *Engine) JailReady() error {
	_, err := e.jail()
	return err
}

// LevelBit is level l's bit in LineFilter.Levels.
func LevelBit(l Level) uint8 { return storage.LevelBit(l) }
