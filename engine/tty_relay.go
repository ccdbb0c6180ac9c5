package engine

// A run with a terminal (`warden run` from one): its process gets a pty
// of the engine's (hooks.PTY), and the operator's terminal reaches that
// pty through a socket of the run, runs/<id>.tty (0600), whichever
// process holds the engine. The stream keeps every line of it as of any
// run's stdout; the terminal gets the bytes as they are: they are the
// command's own screen, on the terminal the operator ran it from.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/wardenhq/warden/engine/hooks"
)

// TTYSize asks for a run with a terminal of this size.
type TTYSize struct{ Rows, Cols uint16 }

// TTY frames, client to engine: a type byte, a big-endian uint16 length,
// then the data. Input is what the operator typed; resize is rows and
// cols, two uint16.
const (
	TTYInput  = 'i'
	TTYResize = 'w'
)

// maxTTYBacklog bounds what the relay keeps of the command's output
// before the terminal connects (its first screen).
const maxTTYBacklog = 256 << 10

// ttyWriteTimeout bounds one write to the terminal: a terminal that stops
// reading (a stopped warden run, a stalled ssh session) is dropped, and
// the run goes on writing its stream, rather than waiting for it for ever.
const ttyWriteTimeout = 5 * time.Second

// ttyRelay is one run's terminal.
type ttyRelay struct {
	pty  *hooks.PTY
	ln   *net.UnixListener
	path string
	gone func() // the terminal hung up: the run is cancelled

	// connected is closed once the terminal connected, or will not.
	connected chan struct{}

	mu      sync.Mutex
	backlog bytes.Buffer
	conn    net.Conn
}

// openTTY makes the run's pty and its socket.
func (e *Engine) openTTY(r *activeRun, size TTYSize) (*ttyRelay, error) {
	pty, err := hooks.OpenPTY(size.Rows, size.Cols)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(e.DataDir(), "runs", r.rec.ID+".tty")
	os.Remove(path)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err == nil {
		err = os.Chmod(path, 0o600)
	}
	if err != nil {
		pty.Master.Close()
		pty.Slave.Close()
		if ln != nil {
			ln.Close()
		}
		return nil, err
	}
	t := &ttyRelay{pty: pty, ln: ln, path: path, gone: func() { r.cancel("the terminal of warden run went away") }, connected: make(chan struct{})}
	pty.SetOut(t)
	go t.serve()
	return t, nil
}

// Write takes the command's output: to the terminal, or kept (bounded)
// until it connects. The write itself is made outside the lock, so that
// close always gets it and, by closing the socket, ends a write that
// waits.
func (t *ttyRelay) Write(b []byte) (int, error) {
	t.mu.Lock()
	conn := t.conn
	if conn == nil {
		if t.backlog.Len()+len(b) <= maxTTYBacklog {
			t.backlog.Write(b)
		}
		t.mu.Unlock()
		return len(b), nil
	}
	t.mu.Unlock()
	conn.SetWriteDeadline(time.Now().Add(ttyWriteTimeout))
	return conn.Write(b)
}

// serve takes the one terminal, gives it the backlog, and relays its
// frames to the pty until it hangs up.
func (t *ttyRelay) serve() {
	conn, err := t.ln.Accept()
	t.ln.Close()
	os.Remove(t.path)
	if err != nil {
		close(t.connected)
		return
	}
	t.mu.Lock()
	conn.SetWriteDeadline(time.Now().Add(ttyWriteTimeout))
	_, err = conn.Write(t.backlog.Bytes())
	t.backlog = bytes.Buffer{}
	t.conn = conn
	t.mu.Unlock()
	close(t.connected)
	if err == nil {
		err = t.relay(conn)
	}
	if !errors.Is(err, os.ErrClosed) && !errors.Is(err, net.ErrClosed) {
		t.gone()
	}
}

func (t *ttyRelay) relay(conn io.Reader) error {
	var head [3]byte
	buf := make([]byte, 1<<16)
	for {
		if _, err := io.ReadFull(conn, head[:]); err != nil {
			return err
		}
		n := int(binary.BigEndian.Uint16(head[1:]))
		if _, err := io.ReadFull(conn, buf[:n]); err != nil {
			return err
		}
		switch head[0] {
		case TTYInput:
			if _, err := t.pty.Master.Write(buf[:n]); err != nil {
				return os.ErrClosed // the command is done with its terminal
			}
		case TTYResize:
			if n == 4 {
				t.pty.Resize(binary.BigEndian.Uint16(buf[0:]), binary.BigEndian.Uint16(buf[2:]))
			}
		}
	}
}

// ttyConnectGrace is how long a run that ended waits for its terminal to
// connect: a command quicker than warden run's dial still has its output
// shown, and warden run its socket to dial.
const ttyConnectGrace = 2 * time.Second

// close ends the terminal: the run is over. grace is how long it waits
// for a terminal that has not connected yet (0 for a run that never
// started).
func (t *ttyRelay) close(grace time.Duration) {
	if t == nil {
		return
	}
	select {
	case <-t.connected:
	case <-time.After(grace):
	}
	t.ln.Close()
	os.Remove(t.path)
	t.mu.Lock()
	conn := t.conn
	t.mu.Unlock()
	if conn != nil {
		conn.Close()
	}
}
