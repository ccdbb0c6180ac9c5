package egress

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
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
// egress mode. It opens the jail's listeners on HTTPAddr and SocksAddr
// (in the jail's own network namespace), hands them to the run's proxy
// over its socket (see handoff.go), and once the proxy has taken them,
// execs the hook in its own place (same pid, same process group, so
// signals and exit status are the hook's own). The proxy then accepts the
// hook's connections itself, until the run ends: no process stays behind
// in the jail to copy bytes, and a hook shutting down gracefully keeps
// its way out. It returns an exit code only on failure.
func BridgeMain(args []string) int {
	socket, argv, err := bridgeArgs(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "warden hook egress-bridge: %v\nusage: %s\n", err, BridgeUsage)
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
