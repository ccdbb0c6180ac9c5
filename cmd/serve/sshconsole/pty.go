package sshconsole

import (
	"context"
	"io"
	"os"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/charmbracelet/ssh"
	"golang.org/x/sys/unix"
)

// ptyOutput is where a session's terminal output goes: the PTY when the
// server allocated one (so that it follows what the console wrote there),
// else the channel.
func ptyOutput(sess ssh.Session) io.Writer {
	if pty, _, ok := sess.Pty(); ok && !sess.EmulatedPty() && pty.Slave != nil {
		return pty.Slave
	}
	return sess
}

// drainPTY waits, at most timeout, until the server has sent the client
// everything written to the session's PTY. A client that is gone reads
// nothing more: then it returns at once.
//
// The server copies the PTY to the channel in a goroutine of its own (read
// the master, write the channel, read again), and closes the channel as
// soon as the handler returns. An empty master says only that the last
// read happened, not that its write did: under load that write came after
// the close, and a console's last frame (the terminal restored, the
// shutdown line) was lost. So once the master is empty a sentinel, an SGR
// reset that is harmless wherever it lands or if it is lost, goes through
// the slave too. When the copier has taken it, it has come back for
// another read, so every write before it is done.
func drainPTY(sess ssh.Session, timeout time.Duration) {
	pty, _, ok := sess.Pty()
	if !ok || sess.EmulatedPty() || pty.Master == nil || pty.Slave == nil {
		return
	}
	// SyscallConn, not Fd: Fd would switch the master, which the server
	// is reading, to blocking mode.
	rc, err := pty.Master.SyscallConn()
	if err != nil {
		return
	}
	// queued is how many bytes the master holds that the copier has not
	// read; false once it cannot be told (the PTY is closed).
	queued := func() (int, bool) {
		n := 0
		var ierr error
		if cerr := rc.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), unix.TIOCINQ) }); cerr != nil || ierr != nil {
			return 0, false
		}
		return n, true
	}
	gone := sess.Context().Done()
	pause := func() bool {
		select {
		case <-gone:
			return false
		case <-time.After(time.Millisecond):
			return true
		}
	}
	deadline := time.Now().Add(timeout)
	for {
		n, ok := queued()
		if !ok {
			return
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) || !pause() {
			return
		}
	}
	if _, err := pty.Slave.Write([]byte(drainSentinel)); err != nil {
		return
	}
	// The tty layer moves the sentinel to the master a moment after the
	// write. Seen there and then gone: taken. Never seen within
	// sentinelUnseen: the copier took it at once.
	wrote, seen := time.Now(), false
	for time.Now().Before(deadline) {
		n, ok := queued()
		switch {
		case !ok:
			return
		case n > 0:
			seen = true
		case seen || time.Since(wrote) > sentinelUnseen:
			return
		}
		if !pause() {
			return
		}
	}
}

// drainSentinel is what drainPTY sends last: SGR reset, which changes
// nothing on a console that has just restored the terminal.
const drainSentinel = "\x1b[m"

// sentinelUnseen bounds the wait for a sentinel that the copier read
// before drainPTY could see it in the master.
const sentinelUnseen = 100 * time.Millisecond

// followPtySize tells the console program when the session's terminal
// changes size. The SSH library takes a real PTY's window-change requests
// for itself (it resizes the PTY with them), and a program inside the
// server gets no SIGWINCH from a PTY that is not its controlling
// terminal: so the PTY's size is watched, a few times a second, and each
// change sent as a WindowSizeMsg. It stops with the session.
func followPtySize(ctx context.Context, slave *os.File, p *tea.Program) {
	rc, err := slave.SyscallConn()
	if err != nil {
		return
	}
	size := func() (w, h int, ok bool) {
		var ws *unix.Winsize
		var ierr error
		if cerr := rc.Control(func(fd uintptr) { ws, ierr = unix.IoctlGetWinsize(int(fd), unix.TIOCGWINSZ) }); cerr != nil || ierr != nil {
			return 0, 0, false
		}
		return int(ws.Col), int(ws.Row), ws.Col > 0 && ws.Row > 0
	}
	lastW, lastH, _ := size()
	t := time.NewTicker(ptySizeEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		w, h, ok := size()
		if !ok || (w == lastW && h == lastH) {
			continue
		}
		lastW, lastH = w, h
		p.Send(tea.WindowSizeMsg{Width: w, Height: h})
	}
}

// ptySizeEvery is how often followPtySize looks at the PTY's size.
const ptySizeEvery = 150 * time.Millisecond
