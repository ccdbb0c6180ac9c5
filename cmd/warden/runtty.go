package main

import (
	"encoding/binary"
	"io"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"golang.org/x/term"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/engine/termsafe"
)

// terminalReset turns off the modes a full-screen program turns on
// (alternate screen, hidden cursor, mouse tracking, bracketed paste):
// harmless when they are off already.
const terminalReset = "\x1b[?1049l\x1b[?25h\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?2004l"

// attachTerminal joins the operator's terminal tty to the run's (h.TTY):
// raw mode here, keystrokes there, its screen here as it is, and every
// resize passed on. restore gives the terminal back as it was; it is
// idempotent, and called on every way out (the run's end, a signal).
func attachTerminal(tty *os.File, h *engine.RunHandle) (restore func(), drained <-chan struct{}, err error) {
	conn, err := net.Dial("unix", h.TTY)
	if err != nil {
		return nil, nil, err
	}
	state, err := term.MakeRaw(int(tty.Fd()))
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	var once sync.Once
	restore = func() {
		once.Do(func() {
			signal.Stop(winch)
			// What a TUI that was killed may leave on: the alternate
			// screen, a hidden cursor, mouse reports, bracketed paste.
			tty.WriteString(terminalReset)
			term.Restore(int(tty.Fd()), state)
			conn.Close()
		})
	}
	var wmu sync.Mutex
	send := func(kind byte, data []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		head := []byte{kind, 0, 0}
		binary.BigEndian.PutUint16(head[1:], uint16(len(data)))
		_, err := conn.Write(append(head, data...))
		return err
	}
	go func() {
		for range winch {
			if cols, rows, err := term.GetSize(int(tty.Fd())); err == nil {
				var b [4]byte
				binary.BigEndian.PutUint16(b[0:], uint16(rows))
				binary.BigEndian.PutUint16(b[2:], uint16(cols))
				send(engine.TTYResize, b[:])
			}
		}
	}()
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := tty.Read(buf)
			if n > 0 && send(engine.TTYInput, buf[:n]) != nil {
				return
			}
			if err != nil {
				return
			}
		}
	}()
	// The command's screen, as it draws it: this is its terminal. What
	// drawing does not need (OSC: the clipboard, the title; DCS queries
	// whose replies would reach the shell after it; C1 controls) is
	// dropped on the way (termsafe.Screen). The engine hangs up once the
	// run has ended and all of it was sent.
	done := make(chan struct{})
	go func() {
		io.Copy(termsafe.NewScreen(tty), conn)
		close(done)
	}()
	return restore, done, nil
}
