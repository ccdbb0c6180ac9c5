// Package bridge is the in-jail half of egress mode (engine/egress): the
// jail's first program, which opens the jail's proxy listeners, hands them
// to the run's proxy and execs the hook. It is its own package so that
// the in-jail helper (cmd/warden-hook) links it without the proxy's HTTP
// and DNS code.
package bridge

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Where the bridge listens inside the jail, and what the hook is told.
const (
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
	var lns []*net.TCPListener
	for _, a := range []string{HTTPAddr, SocksAddr} {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			fmt.Fprintf(os.Stderr, "warden hook egress-bridge: listen %s: %v\n", a, err)
			return 1
		}
		lns = append(lns, ln.(*net.TCPListener))
	}
	if err := HandOver(socket, lns...); err != nil {
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

// HandOver is the bridge's side: it passes the listeners to the proxy at
// socket and waits for its answer.
func HandOver(socket string, lns ...*net.TCPListener) error {
	if len(lns) != HandoffFDs {
		return fmt.Errorf("hand over %d listeners, not %d", HandoffFDs, len(lns))
	}
	var fds []int
	for _, ln := range lns {
		f, err := ln.File() // a dup, closed when this returns
		if err != nil {
			return err
		}
		defer f.Close()
		fds = append(fds, int(f.Fd()))
	}
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		return fmt.Errorf("the run's proxy is not there: %w", err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, _, err := c.WriteMsgUnix([]byte{HandoffByte}, syscall.UnixRights(fds...), nil); err != nil {
		return fmt.Errorf("handing the listeners to the proxy: %w", err)
	}
	answer := make([]byte, 512)
	n, err := c.Read(answer)
	if n == 0 && err != nil {
		return fmt.Errorf("the proxy did not answer the handoff: %w", err)
	}
	if a := string(answer[:n]); a != "ok\n" {
		return fmt.Errorf("the proxy refused the handoff: %s", sanitizeLine(a))
	}
	return nil
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
