// Package bridge is the in-jail half of egress mode (engine/egress): the
// jail's first program, which opens the jail's proxy listeners, hands them
// to the run's proxy and execs the hook. It is its own package so that
// the in-jail helper (cmd/warden-hook) links it without the proxy's HTTP
// and DNS code. It does not link the net package either: it opens two
// listeners and dials one Unix socket with plain system calls, and net's
// inits would be a share of every helper start, which every `warden hook`
// call of a shell hook pays.
package bridge

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Where the bridge listens inside the jail, and what the hook is told.
const (
	HTTPPort  = 3128
	SocksPort = 1080
	HTTPAddr  = "127.0.0.1:3128"
	SocksAddr = "127.0.0.1:1080"
)

// HandoffByte starts a handoff message on the proxy socket.
const HandoffByte = 0

// HandoffFDs is how many listeners a handoff carries (HTTP, SOCKS5).
const HandoffFDs = 2

// Usage is the helper's usage line.
const Usage = "warden hook egress-bridge --socket PATH -- PROGRAM [ARG...]"

// Main is `warden hook egress-bridge`, the jail's first program in
// egress mode. It opens the jail's listeners on HTTPAddr and SocksAddr
// (in the jail's own network namespace), hands them to the run's proxy
// over its socket (HandOver; engine/egress/handoff.go has the proxy's side), and once the proxy has taken them,
// execs the hook in its own place (same pid, same process group, so
// signals and exit status are the hook's own). The proxy then accepts the
// hook's connections itself, until the run ends: no process stays behind
// in the jail to copy bytes, and a hook shutting down gracefully keeps
// its way out. It returns an exit code only on failure.
func Main(args []string) int {
	socket, argv, err := bridgeArgs(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "warden hook egress-bridge: %v\nusage: %s\n", err, Usage)
		return 2
	}
	var fds []int
	for _, port := range []int{HTTPPort, SocksPort} {
		fd, err := listenLoopback(port)
		if err != nil {
			fmt.Fprintf(os.Stderr, "warden hook egress-bridge: listen 127.0.0.1:%d: %v\n", port, err)
			return 1
		}
		fds = append(fds, fd)
	}
	if err := HandOver(socket, fds...); err != nil {
		fmt.Fprintf(os.Stderr, "warden hook egress-bridge: %v\n", err)
		return 1
	}
	prog, err := exec.LookPath(argv[0])
	if err != nil {
		fmt.Fprintf(os.Stderr, "warden hook egress-bridge: %v\n", err)
		return 127
	}
	// The listeners are close-on-exec: the hook never holds them.
	err = syscall.Exec(prog, argv, os.Environ())
	fmt.Fprintf(os.Stderr, "warden hook egress-bridge: exec %s: %v\n", argv[0], err)
	return 126
}

func bridgeArgs(args []string) (socket string, argv []string, err error) {
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--socket" && i+1 < len(args):
			socket = args[i+1]
			i++
		case a == "--":
			argv = args[i+1:]
			i = len(args)
		default:
			return "", nil, fmt.Errorf("unexpected argument %q", a)
		}
	}
	switch {
	case socket == "":
		return "", nil, errors.New("--socket is required")
	case len(argv) == 0:
		return "", nil, errors.New("no program after --")
	}
	return socket, argv, nil
}

// listenLoopback opens a listening TCP socket on 127.0.0.1:port, as
// net.Listen would (SO_REUSEADDR, the kernel's largest backlog), close-on-
// exec so that the hook never holds it.
func listenLoopback(port int) (int, error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, os.NewSyscallError("socket", err)
	}
	err = os.NewSyscallError("setsockopt", syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1))
	if err == nil {
		err = os.NewSyscallError("bind", syscall.Bind(fd, &syscall.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}))
	}
	if err == nil {
		err = os.NewSyscallError("listen", syscall.Listen(fd, listenBacklog()))
	}
	if err != nil {
		syscall.Close(fd)
		return -1, err
	}
	return fd, nil
}

// listenBacklog is the kernel's somaxconn, as net uses (it caps a larger
// backlog anyway), or 4096 when it cannot be read.
func listenBacklog() int {
	b, err := os.ReadFile("/proc/sys/net/core/somaxconn")
	if n, perr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && perr == nil && n > 0 {
		return n
	}
	return 4096
}

// HandOver is the bridge's side: it passes the listening sockets fds to
// the proxy at socket and waits for its answer. The fds stay the caller's.
func HandOver(socket string, fds ...int) error {
	if len(fds) != HandoffFDs {
		return fmt.Errorf("hand over %d listeners, not %d", HandoffFDs, len(fds))
	}
	c, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("the run's proxy is not there: %w", os.NewSyscallError("socket", err))
	}
	defer syscall.Close(c)
	// Both ways bounded, as a deadline on a connection would: a proxy
	// that never answers fails the run instead of hanging it.
	tv := syscall.NsecToTimeval(handoffTimeout.Nanoseconds())
	syscall.SetsockoptTimeval(c, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv)
	syscall.SetsockoptTimeval(c, syscall.SOL_SOCKET, syscall.SO_SNDTIMEO, &tv)
	if err := connectRetrying(c, socket); err != nil {
		return fmt.Errorf("the run's proxy is not there: dial unix %s: %w", socket, os.NewSyscallError("connect", err))
	}
	if err := syscall.Sendmsg(c, []byte{HandoffByte}, syscall.UnixRights(fds...), nil, 0); err != nil {
		return fmt.Errorf("handing the listeners to the proxy: %w", os.NewSyscallError("sendmsg", err))
	}
	answer := make([]byte, 512)
	n, err := readRetrying(c, answer)
	if n <= 0 {
		if err == nil {
			err = errors.New("EOF")
		} else if err == syscall.EAGAIN {
			err = errors.New("i/o timeout")
		}
		return fmt.Errorf("the proxy did not answer the handoff: %w", err)
	}
	if a := string(answer[:n]); a != "ok\n" {
		return fmt.Errorf("the proxy refused the handoff: %s", sanitizeLine(a))
	}
	return nil
}

// handoffTimeout bounds the handoff's connect, send and answer.
const handoffTimeout = 10 * time.Second

func connectRetrying(fd int, path string) error {
	for {
		if err := syscall.Connect(fd, &syscall.SockaddrUnix{Name: path}); err != syscall.EINTR {
			return err
		}
	}
}

func readRetrying(fd int, p []byte) (int, error) {
	for {
		if n, err := syscall.Read(fd, p); err != syscall.EINTR {
			return n, err
		}
	}
}

// sanitizeLine keeps one printable line of an answer for an error.
func sanitizeLine(s string) string {
	for i, r := range s {
		if r == '\n' {
			s = s[:i]
			break
		}
	}
	return ReasonPhrase(s)
}

// ReasonPhrase makes an operator's reason safe for a status line:
// printable ASCII only, one line, at most 200 bytes. (egress.ReasonPhrase
// is this one: the bridge must not link the proxy.)
func ReasonPhrase(s string) string {
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= 200 {
			b.WriteString("...")
			break
		}
		if r >= 0x20 && r < 0x7f {
			b.WriteRune(r)
		} else {
			b.WriteByte('?')
		}
	}
	return b.String()
}
