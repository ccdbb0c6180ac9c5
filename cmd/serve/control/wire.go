package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/engine/hands"
)

// Version is the control protocol's version. A client says it in hello;
// a server speaking another one refuses the connection naming both.
const Version = 1

// Limits. A client's lines go through the same bounded reader as a hook's
// frames (protocol.MaxFrame); a server's replies may be longer (a page of
// receipts, a batch of stream lines), so clients read up to maxReply.
const (
	maxReply    = 256 << 20
	maxConns    = 64
	helloWithin = 5e9 // ns: a connection that says nothing is closed
	// Connections that have not said hello yet are counted apart from
	// maxConns, at most maxSilent in all and maxSilentPerPID from one
	// process: 64 silent connections (one process reconnecting as each
	// was closed) locked every real client out.
	maxSilent       = 32
	maxSilentPerPID = 4
	byeWithin       = 2e9 // ns: a client that will not take the goodbye is hung up on
)

// Ops, client to server.
const (
	opHello       = "hello"       // version
	opCall        = "call"        // id, method, args
	opCancel      = "cancel"      // id: cancel that call's context, or the run it started
	opAnswer      = "answer"      // id, ask, ok: an operator.confirm answered at the client's terminal
	opSubscribe   = "subscribe"   // id
	opUnsubscribe = "unsubscribe" // id
	opAttach      = "attach"      // id: AttachOperator
	opDetach      = "detach"      // id
)

// Ops, server to client.
const (
	opWelcome  = "welcome"  // version, pid, actor, data_dir
	opRefused  = "refused"  // error; the server then hangs up
	opReply    = "reply"    // id, results or error
	opEvent    = "event"    // id (the subscription), event
	opProgress = "progress" // id, step, detail: a hands init or finish step
	opAsk      = "ask"      // id, ask, message: operator.confirm for the client's terminal
	opUnask    = "unask"    // id, ask: that question was decided elsewhere; close its prompt
	opEnded    = "ended"    // id, outcome: the run StartRun (call id) started has ended
	opBye      = "bye"      // the server is letting go of the data dir; it hangs up next
)

// message is every line on a control socket, both ways: one JSON object
// with an op and the fields that op uses. The actor is never on the wire:
// the server knows who the peer is from the kernel (SO_PEERCRED).
type message struct {
	Op      string            `json:"op"`
	ID      uint64            `json:"id,omitempty"`
	Version int               `json:"version,omitempty"`
	Method  string            `json:"method,omitempty"`
	Args    []json.RawMessage `json:"args,omitempty"`
	Results []json.RawMessage `json:"results,omitempty"`
	Error   *wireError        `json:"error,omitempty"`
	Event   *engine.Event     `json:"event,omitempty"`
	Step    string            `json:"step,omitempty"`
	Detail  string            `json:"detail,omitempty"`
	Ask     uint64            `json:"ask,omitempty"`
	Message string            `json:"message,omitempty"`
	OK      bool              `json:"ok,omitempty"`
	Outcome *engine.Outcome   `json:"outcome,omitempty"`
	PID     int               `json:"pid,omitempty"`
	Actor   string            `json:"actor,omitempty"`
	DataDir string            `json:"data_dir,omitempty"`
}

// decodeMessage is strict: one object, known fields, nothing after it.
func decodeMessage(line []byte) (message, error) {
	var m message
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return message{}, fmt.Errorf("malformed control message: %v", err)
	}
	if dec.More() {
		return message{}, errors.New("malformed control message: data after the object")
	}
	if m.Op == "" {
		return message{}, errors.New(`malformed control message: no "op"`)
	}
	return m, nil
}

// lineWriter writes one message per Write, safe for concurrent use; after
// a failed write every later one fails (a torn line ends the connection).
type lineWriter struct {
	mu  sync.Mutex
	w   io.Writer
	err error
}

// send encodes m straight onto the connection: json.Encoder writes the
// whole line in one Write, so a message is never torn, and a big one (a
// page of stream lines, an event of them) is not copied once more into a
// buffer of its own first. The encoding runs under the lock: one
// connection's messages go out one at a time anyway.
func (w *lineWriter) send(m message) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	tw := &trackedWriter{w: w.w}
	enc := json.NewEncoder(tw)
	enc.SetEscapeHTML(false)
	err := enc.Encode(m)
	if tw.wrote { // an encoding error writes nothing and spoils nothing
		w.err = err
	}
	return err
}

// trackedWriter says whether a write was tried.
type trackedWriter struct {
	w     io.Writer
	wrote bool
}

func (t *trackedWriter) Write(p []byte) (int, error) {
	t.wrote = true
	return t.w.Write(p)
}

// errSaidBye is what a send after the goodbye gets: nothing follows it.
var errSaidBye = errors.New("control: the connection said goodbye")

// sendLast sends m as the last line: every send after it fails, so a
// relay or a reply racing the goodbye can never land behind it.
func (w *lineWriter) sendLast(m message) error {
	err := w.send(m)
	w.mu.Lock()
	if w.err == nil {
		w.err = errSaidBye
	}
	w.mu.Unlock()
	return err
}

// write writes one whole line.
func (w *lineWriter) write(line []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	_, w.err = w.w.Write(line)
	return w.err
}

// wireError carries an error across the socket so that the caller's
// errors.Is and errors.As see what they would see in-process: the typed
// errors callers act on keep their type and fields, sentinels stay
// matchable, and every message reads exactly as it did in the server.
type wireError struct {
	Code    string          `json:"code"`
	Message string          `json:"message"`
	Detail  json.RawMessage `json:"detail,omitempty"`
	// Fixes are what to do about it (hands.Fixes), so that a console
	// attached over the socket lists the same next steps as one that
	// holds the engine.
	Fixes []string `json:"fixes,omitempty"`
}

const (
	codeError           = "error"
	codeNotFound        = "not_found"
	codeForbidden       = "forbidden"
	codeConflict        = "conflict"
	codeHandsRoot       = "hands_root"
	codeHandsInitFailed = "hands_init_failed"
	codeAlreadyFinished = "already_finished"
	codeAlreadyDecided  = "already_decided"
	codeCanceled        = "canceled"
	codeDeadline        = "deadline"
	codeProtocol        = "protocol"
)

type initFailedDetail struct {
	Root     string                `json:"root"`
	Cause    string                `json:"cause"`
	Evidence hands.FailureEvidence `json:"evidence"`
	Fixes    []string              `json:"fixes,omitempty"` // the cause's
}

func encodeError(err error) *wireError {
	if err == nil {
		return nil
	}
	w := &wireError{Code: codeError, Message: err.Error(), Fixes: hands.Fixes(err)}
	detail := func(v any) {
		if b, jerr := json.Marshal(v); jerr == nil {
			w.Detail = b
		}
	}
	var (
		forbidden  *engine.ForbiddenError
		conflict   *engine.ConflictError
		rootErr    *engine.HandsRootError
		initFailed *engine.HandsInitFailedError
	)
	switch {
	case errors.As(err, &initFailed) && err == error(initFailed):
		w.Code = codeHandsInitFailed
		detail(initFailedDetail{Root: initFailed.Root, Cause: initFailed.Cause.Error(), Evidence: initFailed.Evidence, Fixes: hands.Fixes(initFailed.Cause)})
	case errors.As(err, &forbidden) && err == error(forbidden):
		w.Code = codeForbidden
		detail(forbidden)
	case errors.As(err, &conflict) && err == error(conflict):
		w.Code = codeConflict
		detail(conflict)
	case errors.As(err, &rootErr) && err == error(rootErr):
		w.Code = codeHandsRoot
		detail(rootErr)
	case errors.Is(err, engine.ErrNotFound):
		w.Code = codeNotFound
	case errors.Is(err, engine.ErrForbidden):
		w.Code = codeForbidden // wrapped: the message says it all
	case errors.Is(err, hands.ErrAlreadyFinished):
		w.Code = codeAlreadyFinished
	case errors.Is(err, engine.ErrAlreadyDecided):
		w.Code = codeAlreadyDecided
	case errors.Is(err, context.Canceled):
		w.Code = codeCanceled
	case errors.Is(err, context.DeadlineExceeded):
		w.Code = codeDeadline
	}
	return w
}

// remoteError is an error from the other side: its message verbatim,
// matching the sentinel its code stands for.
type remoteError struct {
	msg string
	is  error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.is }

// withFixes adds a remote error's fixes to what it matches, as
// *hands.FixError values, so that hands.Fixes finds them on this side.
func withFixes(is error, fixes []string) error {
	if len(fixes) == 0 {
		return is
	}
	errs := []error{is}
	for _, f := range fixes {
		errs = append(errs, &hands.FixError{Fix: f})
	}
	return errors.Join(errs...)
}

func decodeError(w *wireError) error {
	if w == nil {
		return nil
	}
	plain := func(is error) error { return &remoteError{msg: w.Message, is: withFixes(is, w.Fixes)} }
	switch w.Code {
	case codeNotFound:
		return plain(engine.ErrNotFound)
	case codeAlreadyFinished:
		return plain(hands.ErrAlreadyFinished)
	case codeAlreadyDecided:
		return plain(engine.ErrAlreadyDecided)
	case codeCanceled:
		return plain(context.Canceled)
	case codeDeadline:
		return plain(context.DeadlineExceeded)
	case codeForbidden:
		var f engine.ForbiddenError
		if len(w.Detail) > 0 && json.Unmarshal(w.Detail, &f) == nil {
			return &f
		}
		return plain(engine.ErrForbidden)
	case codeConflict:
		var c engine.ConflictError
		if json.Unmarshal(w.Detail, &c) == nil {
			return &c
		}
	case codeHandsRoot:
		var r engine.HandsRootError
		if json.Unmarshal(w.Detail, &r) == nil {
			return &r
		}
	case codeHandsInitFailed:
		var d initFailedDetail
		if json.Unmarshal(w.Detail, &d) == nil {
			return &engine.HandsInitFailedError{Root: d.Root, Cause: &remoteError{msg: d.Cause, is: withFixes(nil, d.Fixes)}, Evidence: d.Evidence}
		}
	}
	return plain(nil)
}
