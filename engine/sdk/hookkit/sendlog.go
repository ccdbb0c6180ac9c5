package hookkit

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
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
//
// It talks over a blocking socket, not a net.Conn: a process that makes
// one call then never starts the runtime's network poller (epoll, a
// parked goroutine and the wakeup that ends it), which would be a sixth
// of a shell hook's helper call. The read deadlines are the
// socket's own (SO_RCVTIMEO).
func SendLog(level, message string) error {
	line, err := protocol.EncodeLog(level, message) // checks the level
	if err != nil {
		return err
	}
	sock, dialer, tok, err := engineEnv()
	if err != nil {
		return err
	}
	hello, err := protocol.EncodeHello(tok)
	if err != nil {
		return err
	}
	frames := append(hello, line...)
	conn, err := dialBlocking(sock, dialer)
	if err != nil {
		return err
	}
	defer conn.Close()
	_, werr := conn.Write(frames)
	if werr == nil {
		werr = conn.closeWrite()
	}
	r := protocol.NewReader(conn)
	if werr != nil {
		conn.setTimeouts(time.Second) // only a refusal is left to read
	}
	// The answer to hello, without decoding the context it carries: this
	// call needs only to know that its line was taken.
	if line, err := r.ReadLine(); err != nil || werr != nil || !protocol.IsContext(line) {
		var f protocol.Frame
		if err == nil {
			f, err = protocol.Decode(line)
		}
		if _, err := helloAnswer(f, err, werr); err != nil {
			return err
		}
	}
	// Then, until the engine closes its side (at most 30 s, as Close
	// waits): the first failure it reported outside a call.
	conn.setTimeouts(30 * time.Second) // set once already: cannot fail now
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

// blockingConn is a connected stream socket in blocking mode, read and
// written with plain system calls (an *os.File over a blocking
// descriptor is never handed to the poller).
type blockingConn struct {
	*os.File
	fd int
}

func (c blockingConn) closeWrite() error {
	return os.NewSyscallError("shutdown", syscall.Shutdown(c.fd, syscall.SHUT_WR))
}

// setTimeouts bounds each read and each write from now on; one that
// waits longer fails with EAGAIN, which Read and Write say as a timeout.
func (c blockingConn) setTimeouts(d time.Duration) error {
	tv := syscall.NsecToTimeval(d.Nanoseconds())
	if err := syscall.SetsockoptTimeval(c.fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv); err != nil {
		return os.NewSyscallError("setsockopt SO_RCVTIMEO", err)
	}
	return os.NewSyscallError("setsockopt SO_SNDTIMEO", syscall.SetsockoptTimeval(c.fd, syscall.SOL_SOCKET, syscall.SO_SNDTIMEO, &tv))
}

func (c blockingConn) Read(p []byte) (int, error) {
	n, err := c.File.Read(p)
	return n, timedOut(err)
}

func (c blockingConn) Write(p []byte) (int, error) {
	n, err := c.File.Write(p)
	return n, timedOut(err)
}

// timedOut turns a socket timeout's EAGAIN into os.ErrDeadlineExceeded
// ("i/o timeout"), as a net.Conn past its deadline says it.
func timedOut(err error) error {
	if errors.Is(err, syscall.EAGAIN) {
		return fmt.Errorf("the engine did not answer in time: %w", os.ErrDeadlineExceeded)
	}
	return err
}

// dialBlocking is dialEnv for SendLog: the same two ways in, the same
// errors, a blocking connection whose timeouts are set before it
// connects, so that the caller's first write follows the connect at
// once and the engine, woken by the connection, finds the frames
// already there instead of waiting for them (one wake-up fewer).
func dialBlocking(sock, dialer string) (blockingConn, error) {
	fd, err := connectEngine(sock, dialer, func(fd int) error { return blockingConn{fd: fd}.setTimeouts(30 * time.Second) })
	if err != nil {
		return blockingConn{}, err
	}
	return blockingConn{File: os.NewFile(uintptr(fd), "warden-broker"), fd: fd}, nil
}
