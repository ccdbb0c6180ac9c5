package engine

import (
	"github.com/wardenhq/warden/engine/hooks"
	"github.com/wardenhq/warden/storage"
)

// Re-exported for the console: tui never imports storage, nor the
// engine's parts (engine/hooks, engine/hands); what it shows of them is
// named here and in hands_ui.go.
type (
	// Hook is one hook of a module's manifest (Module.Manifest.Hooks).
	Hook = hooks.Hook
	// InputType is a hook input's or output's declared type ("string",
	// "number", "path:rw", ...), as the inputs form validates it.
	InputType = hooks.Type

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

// LevelBit is level l's bit in LineFilter.Levels.
func LevelBit(l Level) uint8 { return storage.LevelBit(l) }
