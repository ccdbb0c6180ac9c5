package hookkit

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/wardenhq/warden/engine/sdk/protocol"
)

// SendLog is Connect, Log and Close for a process that has one stream
// line to send (the shell helper's `warden hook log MSG`), in one round
// trip instead of two: hello and the log frame go out in one write,
// before the engine's answer to hello, and the sending side is closed
// with them. The engine checks the hello before it reads anything else,
// as it always does, so a refused hello is returned (an *Error, as from
// Connect) and the line is not taken; a line the engine refused after a
// good hello (e.g. run_ended) is returned as Close returns it.
func SendLog(level, message string) error {
	line, err := protocol.Encode(&protocol.Log{Level: level, Message: message}) // checks the level
	if err != nil {
		return err
	}
	conn, tok, err := dialEnv()
	if err != nil {
		return err
	}
	defer conn.Close()
	hello, err := protocol.Encode(&protocol.Hello{Protocol: protocol.Version, Token: tok})
	if err != nil {
		return err
	}
	_, werr := conn.Write(append(hello, line...))
	if werr == nil {
		werr = conn.CloseWrite()
	}
	r := protocol.NewReader(conn)
	// As in Dial: a refusal the engine sent says more than a failed write.
	wait := 30 * time.Second
	if werr != nil {
		wait = time.Second
	}
	conn.SetReadDeadline(time.Now().Add(wait))
	f, err := r.ReadFrame()
	if ref, ok := f.(*protocol.Refused); err == nil && ok {
		return &Error{Code: ref.Error.Code, Message: ref.Error.Message}
	}
	switch {
	case werr != nil:
		return fmt.Errorf("hookkit: hello: %w", werr)
	case err != nil:
		return fmt.Errorf("hookkit: reading the engine's answer to hello: %w", err)
	}
	if _, ok := f.(*protocol.Context); !ok {
		return fmt.Errorf("hookkit: the engine answered hello with %q", f.FrameType())
	}
	// Then, until the engine closes its side (at most 30 s, as Close
	// waits): the first failure it reported outside a call.
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	var async error
	for {
		f, err := r.ReadFrame()
		if err != nil {
			if async == nil && !errors.Is(err, io.EOF) && protocol.ErrorCode(err) != "" {
				async = err
			}
			return async
		}
		if t, ok := f.(*protocol.Throw); ok && t.ID == 0 && async == nil {
			async = &Error{Code: t.Error.Code, Name: t.Error.Name, Message: t.Error.Message}
		}
	}
}
