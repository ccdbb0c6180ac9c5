package egress

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// Where the bridge listens inside the jail, and what the hook is told.
const (
	HTTPAddr  = "127.0.0.1:3128"
	SocksAddr = "127.0.0.1:1080"
)

// HookEnv is the environment a hook in egress mode gets: both spellings,
// since tools disagree on which they read. NO_PROXY is set empty so that
// an inherited value cannot route a name around the proxy (nothing is
// reachable around it anyway: the jail has no route).
func HookEnv() map[string]string {
	env := map[string]string{}
	for k, v := range map[string]string{
		"HTTP_PROXY":  "http://" + HTTPAddr,
		"HTTPS_PROXY": "http://" + HTTPAddr,
		"ALL_PROXY":   "socks5h://" + SocksAddr,
		"NO_PROXY":    "",
	} {
		env[k] = v
		env[strings.ToLower(k)] = v
	}
	return env
}

// BridgeUsage is the helper's usage line.
const BridgeUsage = "warden hook egress-bridge --socket PATH -- PROGRAM [ARG...]"

// BridgeMain is `warden hook egress-bridge`, the jail's first program in
// egress mode. It starts a copy of itself that listens on HTTPAddr and
// SocksAddr and forwards every connection, byte for byte, to the run's
// proxy socket; once that copy listens, it execs the hook in its own
// place (same pid, same process group, so signals and exit status are the
// hook's own). The copy ignores SIGTERM, SIGINT and SIGHUP, so a hook
// shutting down gracefully keeps its way out; it dies with the jail's pid
// namespace when the hook ends. It returns an exit code only on failure.
func BridgeMain(args []string) int {
	socket, serve, argv, err := bridgeArgs(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "warden hook egress-bridge: %v\nusage: %s\n", err, BridgeUsage)
		return 2
	}
	if serve {
		return bridgeServe(socket)
	}
	self, err := os.Executable()
	if err != nil {
		self = "/proc/self/exe"
	}
	r, w, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(os.Stderr, "warden hook egress-bridge: %v\n", err)
		return 1
	}
	cmd := exec.Command(self, "hook", "egress-bridge", "--serve", "--socket", socket)
	cmd.Stderr = os.Stderr
	cmd.ExtraFiles = []*os.File{w}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "warden hook egress-bridge: cannot start the bridge: %v\n", err)
		return 1
	}
	w.Close()
	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(r).ReadString('\n')
		ready <- line
	}()
	select {
	case line := <-ready:
		if line != "ok\n" {
			fmt.Fprintf(os.Stderr, "warden hook egress-bridge: the bridge did not start (%s)\n", strings.TrimSpace(line))
			return 1
		}
	case <-time.After(10 * time.Second):
		fmt.Fprintln(os.Stderr, "warden hook egress-bridge: the bridge did not start within 10s")
		return 1
	}
	r.Close()
	prog, err := exec.LookPath(argv[0])
	if err != nil {
		fmt.Fprintf(os.Stderr, "warden hook egress-bridge: %v\n", err)
		return 127
	}
	err = syscall.Exec(prog, argv, os.Environ())
	fmt.Fprintf(os.Stderr, "warden hook egress-bridge: exec %s: %v\n", argv[0], err)
	return 126
}

func bridgeArgs(args []string) (socket string, serve bool, argv []string, err error) {
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--serve":
			serve = true
		case a == "--socket" && i+1 < len(args):
			socket = args[i+1]
			i++
		case a == "--":
			argv = args[i+1:]
			i = len(args)
		default:
			return "", false, nil, fmt.Errorf("unexpected argument %q", a)
		}
	}
	switch {
	case socket == "":
		return "", false, nil, errors.New("--socket is required")
	case !serve && len(argv) == 0:
		return "", false, nil, errors.New("no program after --")
	}
	return socket, serve, argv, nil
}

// bridgeServe listens and forwards until killed; it says "ok" on fd 3
// once both listeners are up.
func bridgeServe(socket string) int {
	signal.Ignore(syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	status := os.NewFile(3, "ready")
	var lns []net.Listener
	for _, a := range []string{HTTPAddr, SocksAddr} {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			fmt.Fprintf(status, "listen %s: %v\n", a, err)
			return 1
		}
		lns = append(lns, ln)
	}
	io.WriteString(status, "ok\n")
	status.Close()
	done := make(chan struct{})
	for _, ln := range lns {
		go func(ln net.Listener) {
			defer close(done)
			for {
				c, err := ln.Accept()
				if err != nil {
					fmt.Fprintf(os.Stderr, "warden egress bridge: %v\n", err)
					return
				}
				go forward(c, socket)
			}
		}(ln)
	}
	<-done
	return 1
}

func forward(c net.Conn, socket string) {
	defer c.Close()
	u, err := net.Dial("unix", socket)
	if err != nil {
		fmt.Fprintf(os.Stderr, "warden egress bridge: the proxy is gone: %v\n", err)
		return
	}
	defer u.Close()
	done := make(chan struct{})
	go func() {
		io.Copy(u, c)
		u.(*net.UnixConn).CloseWrite()
		close(done)
	}()
	io.Copy(c, u)
	c.(*net.TCPConn).CloseWrite()
	// The proxy has finished sending; it ends the connection once the
	// hook has too, or after its idle timeout, which bounds this wait.
	c.SetReadDeadline(time.Now().Add(DefaultIdle))
	<-done
}
