package egress

// The bridge's handoff: instead of copying every connection's bytes from
// the jail to the proxy socket, the bridge opens the jail's listeners
// (127.0.0.1:3128 and :1080, in the jail's own network namespace) and
// passes them to the proxy once, over the proxy socket (SCM_RIGHTS). The
// proxy then accepts the hook's connections itself: a connection crosses
// one process boundary (hook to engine) instead of three (hook, bridge,
// engine), and no extra process lives in the jail.
//
// Invariants:
//   - A handoff message is one byte, handoffByte, with exactly two file
//     descriptors; anything else carrying descriptors is closed unread.
//     (HTTP never starts with a 0 byte, SOCKS5 starts with 5.)
//   - The proxy adopts one handoff per run: the first, made by the bridge
//     before the hook is exec'd (nothing else runs in the jail then).
//     Later ones are refused and their descriptors closed.
//   - An adopted descriptor must be a listening TCP socket (SOCK_STREAM,
//     SO_ACCEPTCONN, AF_INET or AF_INET6). Connections accepted on it
//     take exactly the path of one on the proxy socket: the same limit,
//     the same decision, the same deny list, the same receipt.
//   - The descriptors received are bounded by the control buffer (two);
//     the kernel drops any more a sender attaches (MSG_CTRUNC).

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"

	"github.com/wardenhq/warden/engine/egress/bridge"
)

// handoffByte starts a handoff message on the proxy socket.
const handoffByte = bridge.HandoffByte

// handoffFDs is how many listeners a handoff carries (HTTP, SOCKS5).
const handoffFDs = bridge.HandoffFDs

// firstMessage reads a proxy-socket client's first message with room for
// descriptors. It returns the bytes read and the descriptors received
// (owned by the caller).
func firstMessage(uc *net.UnixConn) ([]byte, []int, error) {
	buf := make([]byte, 4096)
	oob := make([]byte, syscall.CmsgSpace(handoffFDs*4))
	n, oobn, flags, _, err := uc.ReadMsgUnix(buf, oob)
	var fds []int
	if oobn > 0 {
		msgs, perr := syscall.ParseSocketControlMessage(oob[:oobn])
		if perr == nil {
			for _, m := range msgs {
				if got, err := syscall.ParseUnixRights(&m); err == nil {
					fds = append(fds, got...)
				}
			}
		}
	}
	if err == nil && flags&syscall.MSG_CTRUNC != 0 {
		err = errors.New("too many descriptors")
	}
	return buf[:n], fds, err
}

// adopt takes a handoff's listeners and starts accepting on them. It
// closes fds on every path.
func (p *Proxy) adopt(fds []int) error {
	if len(fds) != handoffFDs {
		closeFDs(fds)
		return fmt.Errorf("a handoff carries %d listeners, not %d", handoffFDs, len(fds))
	}
	for _, fd := range fds {
		if err := checkListener(fd); err != nil {
			closeFDs(fds)
			return err
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.adopted || p.ctx.Err() != nil {
		closeFDs(fds)
		return errors.New("this run's listeners were already handed over")
	}
	var lns []net.Listener
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "egress-listener")
		ln, err := net.FileListener(f) // a dup: f is closed below either way
		f.Close()
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			closeFDs(fds[i+1:])
			return err
		}
		lns = append(lns, ln)
	}
	p.adopted = true
	for _, ln := range lns {
		p.lns = append(p.lns, ln)
		p.wg.Add(1)
		go p.serve(ln)
	}
	return nil
}

// checkListener accepts only a listening TCP socket.
func checkListener(fd int) error {
	typ, err := syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_TYPE)
	if err != nil || typ != syscall.SOCK_STREAM {
		return errors.New("a handed-over descriptor is not a stream socket")
	}
	dom, err := syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_DOMAIN)
	if err != nil || (dom != syscall.AF_INET && dom != syscall.AF_INET6) {
		return errors.New("a handed-over descriptor is not a TCP socket")
	}
	if acc, err := syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_ACCEPTCONN); err != nil || acc != 1 {
		return errors.New("a handed-over descriptor is not listening")
	}
	return nil
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		syscall.Close(fd)
	}
}

// HandOver is the bridge's side (bridge.HandOver) for listeners: it
// passes them to the proxy at socket and waits for its answer.
func HandOver(socket string, lns ...*net.TCPListener) error {
	var fds []int
	for _, ln := range lns {
		f, err := ln.File() // a dup, closed when this returns
		if err != nil {
			return err
		}
		defer f.Close()
		fds = append(fds, int(f.Fd()))
	}
	return bridge.HandOver(socket, fds...)
}
