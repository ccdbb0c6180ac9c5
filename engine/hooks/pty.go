package hooks

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// PTY is a pseudo-terminal a run's process gets as its stdin, stdout,
// stderr and controlling terminal (`warden run` from a terminal): its own
// TUI works. The executor reads Master as the run's one output stream
// (lines to the sink, as stdout) and copies what it reads to Out as is,
// for the operator's terminal; what the operator types is written to
// Master by its owner.
type PTY struct {
	Master, Slave *os.File
	out           io.Writer
	mu            sync.Mutex
}

// OpenPTY opens a pseudo-terminal of rows x cols.
func OpenPTY(rows, cols uint16) (*PTY, error) {
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("cannot open a terminal for the command: %w", err)
	}
	fail := func(err error) (*PTY, error) {
		master.Close()
		return nil, fmt.Errorf("cannot open a terminal for the command: %w", err)
	}
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		return fail(err)
	}
	n, err := unix.IoctlGetUint32(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		return fail(err)
	}
	slave, err := os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail(err)
	}
	p := &PTY{Master: master, Slave: slave}
	if err := p.Resize(rows, cols); err != nil {
		slave.Close()
		return fail(err)
	}
	return p, nil
}

// Resize sets the terminal's size; the kernel tells the command
// (SIGWINCH to its foreground process group).
func (p *PTY) Resize(rows, cols uint16) error {
	if rows == 0 || cols == 0 {
		return nil
	}
	return unix.IoctlSetWinsize(int(p.Master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols})
}

// SetOut sets where the command's output is copied as is (nil: nowhere).
func (p *PTY) SetOut(w io.Writer) {
	p.mu.Lock()
	p.out = w
	p.mu.Unlock()
}

// tee is the master's reader for the executor: every read is copied to
// Out. Out bounds each write (ttyRelay's deadline), and its first error
// drops it: a gone or stalled terminal holds the stream for one bounded
// write at most.
type tee struct{ p *PTY }

func (t tee) Read(b []byte) (int, error) {
	n, err := t.p.Master.Read(b)
	if n > 0 {
		t.p.mu.Lock()
		if t.p.out != nil {
			if _, werr := t.p.out.Write(b[:n]); werr != nil {
				t.p.out = nil
			}
		}
		t.p.mu.Unlock()
	}
	return n, err
}
