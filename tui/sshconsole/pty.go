package sshconsole

import (
	"io"
	"time"

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

// drainPTY waits, at most timeout, until the server has read everything
// written to the session's PTY, then a moment more for the last read to
// be written to the channel. A client that is gone reads nothing more:
// then it returns at once.
func drainPTY(sess ssh.Session, timeout time.Duration) {
	pty, _, ok := sess.Pty()
	if !ok || sess.EmulatedPty() || pty.Master == nil {
		return
	}
	// SyscallConn, not Fd: Fd would switch the master, which the server
	// is reading, to blocking mode.
	rc, err := pty.Master.SyscallConn()
	if err != nil {
		return
	}
	gone := sess.Context().Done()
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); {
		n := 0
		if cerr := rc.Control(func(fd uintptr) { n, err = unix.IoctlGetInt(int(fd), unix.TIOCINQ) }); cerr != nil || err != nil || n == 0 {
			break
		}
		select {
		case <-gone:
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
	select {
	case <-gone:
	case <-time.After(20 * time.Millisecond):
	}
}
