// Package protocol is the hook wire protocol v1 (docs/protocol.md): the
// frame types that travel between a hook and its run's broker, and a line
// codec that never buffers more than one MaxFrame.
//
// A frame is one JSON object in UTF-8 ending in '\n'. Decoding is strict
// (unknown or duplicate fields, trailing data and invalid UTF-8 are all
// refused) because the engine reads these frames from code it does not
// trust, and a lenient reader is where two parsers start to disagree.
package protocol

import (
	"encoding/json"
	"errors"
	"unicode/utf8"
)

// Version is the protocol version this package speaks. A hello naming any
// other version still decodes: the broker has to read it to answer
// version_mismatch naming both versions.
const Version = 1

// MaxFrame is the largest frame on the wire, counting its trailing '\n'.
const MaxFrame = 1 << 20

// Error codes carried by refused and throw frames, and by *Error.
const (
	CodeUnauthorized      = "unauthorized" // bad, unknown, expired or revoked token: one code for all
	CodeVersionMismatch   = "version_mismatch"
	CodeBadFrame          = "bad_frame"
	CodeFrameTooLarge     = "frame_too_large"
	CodeUndeclaredName    = "undeclared_name"
	CodeUnknownCapability = "unknown_capability"
	CodePermissionDenied  = "permission_denied"
	CodeRunEnded          = "run_ended"
	CodeResultAlreadySet  = "result_already_set"
	// CodeStorageFailed: the engine could not read or write its store (a
	// full disk, say). Nothing of the operation was applied; the hook did
	// nothing wrong, and the same call may work once the operator has
	// made room.
	CodeStorageFailed = "storage_failed"
)

// Error is a protocol failure with its wire code, so the broker can put it
// straight into a refused or throw frame.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// ErrorCode returns the protocol code carried by err (an *Error anywhere in
// its chain), or "" when err is not a protocol error.
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// Frame is one of the ten frame types below. The unexported methods keep
// the set closed: Encode and Decode know every frame there is.
type Frame interface {
	FrameType() string
	json.Marshaler
	wire() any    // the JSON shape, "type" first
	check() error // the rules Decode enforces, so Encode never emits what the peer refuses
}

// Log levels, in the order the console ranks them.
var levels = []string{"debug", "info", "warn", "error", "success"}

var (
	stores       = []string{"secrets", "config"}
	storeMethods = []string{"get", "set", "delete", "transaction"}
)

// ErrorBody is the "error" object of error, refused and throw frames. A hook
// error carries name and message, a refusal code and message, a throw all
// three.
type ErrorBody struct {
	Name    string `json:"name,omitempty"`
	Code    string `json:"code,omitempty"`
	Message string `json:"message"`
}

// Hello opens every connection from a hook.
type Hello struct {
	Protocol int
	Token    string
}

// Log is a stream line from the hook.
type Log struct {
	Level   string // debug|info|warn|error|success
	Message string
}

// Call invokes a capability method; the broker answers with a Return or a
// Throw carrying the same ID.
type Call struct {
	ID         int64
	Capability string
	Method     string
	Args       []json.RawMessage
}

// StoreOp reads or writes the module's secrets or config (type "store").
type StoreOp struct {
	ID     int64
	Store  string // secrets|config
	Method string // get|set|delete|transaction
	Args   []json.RawMessage
}

// Result carries the hook's declared outputs; at most one per run.
type Result struct {
	Outputs map[string]json.RawMessage
}

// HookError is the hook reporting its own failure (type "error").
type HookError struct {
	Error ErrorBody // Name and Message; no Code
}

// Context answers a good hello.
type Context struct {
	Protocol     int
	Run          string
	Module       string
	Hook         string
	Inputs       map[string]any
	Config       map[string]string
	Declared     Declared
	Capabilities map[string][]string // capability -> methods
}

// Declared lists the names a module declared in its manifest.
type Declared struct {
	Secrets []string
	Config  []string
}

// Refused answers a bad hello; the broker closes the connection after it.
type Refused struct {
	Error ErrorBody // Code and Message; no Name
}

// Return answers a call or store op. A nil Value is sent as JSON null.
type Return struct {
	ID    int64
	Value json.RawMessage
}

// Throw answers a call or store op that failed. ID 0 means the failure is
// not tied to a call (the frame that caused it had no readable id).
type Throw struct {
	ID    int64
	Error ErrorBody
}

// Refuse builds the refusal sent to a bad hello.
func Refuse(code, msg string) *Refused {
	return &Refused{Error: ErrorBody{Code: code, Message: msg}}
}

// ThrowErr builds the failure answer to call or store op id.
func ThrowErr(id int64, code, msg string) *Throw {
	return &Throw{ID: id, Error: ErrorBody{Code: code, Message: msg}}
}

func (Hello) FrameType() string     { return "hello" }
func (Log) FrameType() string       { return "log" }
func (Call) FrameType() string      { return "call" }
func (StoreOp) FrameType() string   { return "store" }
func (Result) FrameType() string    { return "result" }
func (HookError) FrameType() string { return "error" }
func (Context) FrameType() string   { return "context" }
func (Refused) FrameType() string   { return "refused" }
func (Return) FrameType() string    { return "return" }
func (Throw) FrameType() string     { return "throw" }

// Wire shapes. Empty collections go out as [] and {}, never null, so a
// decoder may insist on an array or object; Decode turns them back into nil.

func (f Hello) wire() any {
	return struct {
		Type     string `json:"type"`
		Protocol int    `json:"protocol"`
		Token    string `json:"token"`
	}{"hello", f.Protocol, f.Token}
}

func (f Log) wire() any {
	return struct {
		Type    string `json:"type"`
		Level   string `json:"level"`
		Message string `json:"message"`
	}{"log", f.Level, f.Message}
}

func (f Call) wire() any {
	return struct {
		Type       string            `json:"type"`
		ID         int64             `json:"id"`
		Capability string            `json:"capability"`
		Method     string            `json:"method"`
		Args       []json.RawMessage `json:"args"`
	}{"call", f.ID, f.Capability, f.Method, orEmpty(f.Args)}
}

func (f StoreOp) wire() any {
	return struct {
		Type   string            `json:"type"`
		ID     int64             `json:"id"`
		Store  string            `json:"store"`
		Method string            `json:"method"`
		Args   []json.RawMessage `json:"args"`
	}{"store", f.ID, f.Store, f.Method, orEmpty(f.Args)}
}

func (f Result) wire() any {
	out := f.Outputs
	if out == nil {
		out = map[string]json.RawMessage{}
	}
	return struct {
		Type    string                     `json:"type"`
		Outputs map[string]json.RawMessage `json:"outputs"`
	}{"result", out}
}

func (f HookError) wire() any {
	return struct {
		Type  string    `json:"type"`
		Error ErrorBody `json:"error"`
	}{"error", f.Error}
}

func (f Context) wire() any {
	in, cfg, caps := f.Inputs, f.Config, map[string][]string{}
	if in == nil {
		in = map[string]any{}
	}
	if cfg == nil {
		cfg = map[string]string{}
	}
	for k, v := range f.Capabilities {
		caps[k] = orEmpty(v)
	}
	type declared struct {
		Secrets []string `json:"secrets"`
		Config  []string `json:"config"`
	}
	return struct {
		Type         string              `json:"type"`
		Protocol     int                 `json:"protocol"`
		Run          string              `json:"run"`
		Module       string              `json:"module"`
		Hook         string              `json:"hook"`
		Inputs       map[string]any      `json:"inputs"`
		Config       map[string]string   `json:"config"`
		Declared     declared            `json:"declared"`
		Capabilities map[string][]string `json:"capabilities"`
	}{"context", f.Protocol, f.Run, f.Module, f.Hook, in, cfg,
		declared{orEmpty(f.Declared.Secrets), orEmpty(f.Declared.Config)}, caps}
}

func (f Refused) wire() any {
	return struct {
		Type  string    `json:"type"`
		Error ErrorBody `json:"error"`
	}{"refused", f.Error}
}

func (f Return) wire() any {
	return struct {
		Type  string          `json:"type"`
		ID    int64           `json:"id"`
		Value json.RawMessage `json:"value"` // nil marshals as null: never omitted
	}{"return", f.ID, f.Value}
}

func (f Throw) wire() any {
	return struct {
		Type  string    `json:"type"`
		ID    int64     `json:"id"`
		Error ErrorBody `json:"error"`
	}{"throw", f.ID, f.Error}
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// MarshalJSON gives each frame its wire shape, "type" included, so
// json.Marshal agrees with Encode (bar the newline and HTML escaping).
func (f Hello) MarshalJSON() ([]byte, error)     { return marshal(f) }
func (f Log) MarshalJSON() ([]byte, error)       { return marshal(f) }
func (f Call) MarshalJSON() ([]byte, error)      { return marshal(f) }
func (f StoreOp) MarshalJSON() ([]byte, error)   { return marshal(f) }
func (f Result) MarshalJSON() ([]byte, error)    { return marshal(f) }
func (f HookError) MarshalJSON() ([]byte, error) { return marshal(f) }
func (f Context) MarshalJSON() ([]byte, error)   { return marshal(f) }
func (f Refused) MarshalJSON() ([]byte, error)   { return marshal(f) }
func (f Return) MarshalJSON() ([]byte, error)    { return marshal(f) }
func (f Throw) MarshalJSON() ([]byte, error)     { return marshal(f) }

// Validation shared by Encode and Decode.

func (f Hello) check() error { return nil } // any version decodes; see Version

func (f Log) check() error {
	if !oneOf(f.Level, levels) {
		return badf("log", "unknown level %s (want debug|info|warn|error|success)", quote(f.Level))
	}
	return nil
}

func (f Call) check() error {
	switch {
	case f.ID <= 0:
		return badf("call", "id must be a positive integer")
	case f.Capability == "":
		return badf("call", "missing capability")
	case f.Method == "":
		return badf("call", "missing method")
	}
	return nil
}

func (f StoreOp) check() error {
	switch {
	case f.ID <= 0:
		return badf("store", "id must be a positive integer")
	case !oneOf(f.Store, stores):
		return badf("store", "unknown store %s (want secrets|config)", quote(f.Store))
	case !oneOf(f.Method, storeMethods):
		return badf("store", "unknown method %s (want get|set|delete|transaction)", quote(f.Method))
	}
	return nil
}

func (f Result) check() error { return nil }

func (f HookError) check() error {
	switch {
	case f.Error.Code != "":
		return badf("error", "a hook error carries no code")
	case f.Error.Name == "" && f.Error.Message == "":
		return badf("error", "error needs a name or a message")
	}
	return nil
}

func (f Context) check() error {
	switch {
	case f.Run == "":
		return badf("context", "missing run")
	case f.Module == "":
		return badf("context", "missing module")
	case f.Hook == "":
		return badf("context", "missing hook")
	}
	return nil
}

func (f Refused) check() error {
	switch {
	case f.Error.Code == "":
		return badf("refused", "missing error code")
	case f.Error.Name != "":
		return badf("refused", "a refusal carries no name")
	}
	return nil
}

func (f Return) check() error {
	if f.ID <= 0 {
		return badf("return", "id must be a positive integer")
	}
	return nil
}

func (f Throw) check() error {
	switch {
	case f.ID < 0:
		return badf("throw", "id must not be negative")
	case f.Error.Code == "" && f.Error.Message == "":
		return badf("throw", "error needs a code or a message")
	}
	return nil
}

func oneOf(s string, set []string) bool {
	for _, v := range set {
		if s == v {
			return true
		}
	}
	return false
}

// quote renders untrusted text for an error message, cut to a few dozen
// bytes so a hostile frame cannot fill logs or the console through it.
func quote(s string) string {
	return `"` + clip(s, 40) + `"`
}

// clip cuts s to at most n bytes on a rune boundary, escaping what would
// not print, and marks the cut.
func clip(s string, n int) string {
	cut := len(s) > n
	if cut {
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n]
	}
	q := []byte{}
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			q = append(q, '\\', byte(r))
		case r < 0x20 || r == 0x7f || r == utf8.RuneError:
			q = append(q, '?')
		default:
			q = utf8.AppendRune(q, r)
		}
	}
	if cut {
		q = append(q, "..."...)
	}
	return string(q)
}
