package broker

import (
	"errors"
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// DialerEnv names the hook's dialer fd in its environment (see Dialer).
const DialerEnv = "WARDEN_DIALER"

// Dialer returns the hook's end of a new dialer: a SOCK_SEQPACKET pair
// whose other end the broker reads. A hook that may not create Unix
// sockets (the landlock jail, where connect(2) by path would reach every
// socket of the host that warden's uid may use) connects instead by
// making a socketpair of its own and sending one end here with
// SCM_RIGHTS (hookkit does, when WARDEN_DIALER names the fd). The broker
// serves that end exactly as a connection to its socket: hello, token,
// the same limits.
//
// The returned file is the child's, for exec.Cmd.ExtraFiles; the caller
// closes it after the start. The broker's end is closed by Close.
func (b *Broker) Dialer() (*os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("the run's dialer: socketpair: %w", err)
	}
	ours := os.NewFile(uintptr(fds[0]), "warden-dialer")
	c, err := net.FileConn(ours)
	ours.Close() // FileConn holds a dup
	if err != nil {
		unix.Close(fds[1])
		return nil, fmt.Errorf("the run's dialer: %w", err)
	}
	uc := c.(*net.UnixConn)
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		uc.Close()
		unix.Close(fds[1])
		return nil, errors.New("the run's dialer: the broker is closed")
	}
	b.dialers = append(b.dialers, uc)
	b.wg.Add(1)
	b.mu.Unlock()
	go b.readDialer(uc)
	return os.NewFile(uintptr(fds[1]), "warden-dialer-hook"), nil
}

// readDialer admits every stream socket the hook sends, one per message.
// Anything else (no fd, several, a file, a datagram socket) is closed
// and ignored: the hook controls what it sends.
func (b *Broker) readDialer(uc *net.UnixConn) {
	defer b.wg.Done()
	buf := make([]byte, 16)
	oob := make([]byte, unix.CmsgSpace(4*4)) // room to see (and close) a few fds
	for {
		_, oobn, _, _, err := uc.ReadMsgUnix(buf, oob)
		if err != nil {
			return // closed, or the hook and every child of it are gone
		}
		fds := receivedFDs(oob[:oobn])
		if len(fds) != 1 {
			closeAll(fds)
			continue
		}
		c, ok := streamConn(fds[0])
		if !ok {
			continue
		}
		if !b.admit(c) {
			return
		}
	}
}

// receivedFDs are the descriptors an SCM_RIGHTS message carried.
func receivedFDs(oob []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, m := range msgs {
		if got, err := unix.ParseUnixRights(&m); err == nil {
			fds = append(fds, got...)
		}
	}
	return fds
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// streamConn wraps fd when it is a Unix stream socket; otherwise it is
// closed.
func streamConn(fd int) (net.Conn, bool) {
	unix.CloseOnExec(fd)
	dom, err1 := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	typ, err2 := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	if err1 != nil || err2 != nil || dom != unix.AF_UNIX || typ != unix.SOCK_STREAM {
		unix.Close(fd)
		return nil, false
	}
	f := os.NewFile(uintptr(fd), "warden-dialed")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, false
	}
	return c, true
}
