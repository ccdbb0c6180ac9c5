// Command warden-hook is the helper a jailed hook finds as `warden` on its
// PATH: the `warden hook context|log|secret|config|call|confirm|result`
// verbs (engine/hookcli, the same code the full binary runs for them) and
// nothing else, so that each call from a shell hook starts like a small
// program instead of paying for the console's, SSH's, MCP's, NATS' and
// Docker's package inits. Build it beside warden, without cgo:
//
//	go build -o bin/ ./cmd/warden && CGO_ENABLED=0 go build -o bin/ ./cmd/warden-hook
//
// It links no net package: the protocol client and the egress bridge
// talk through plain sockets (engine/sdk/hookkit, engine/egress/bridge),
// so nothing in it needs cgo and it links statically whether cgo is on or
// not. The README builds it with CGO_ENABLED=0 all the same, so that a
// dependency that brought cgo back could not make every call pay for
// loading libc (0.5-1 ms of a call, measured with net's resolver linked).
//
// The engine binds it into the jail at /opt/warden/bin/warden when it sits
// next to the warden binary (docs/jail.md); without it, the jail gets the
// full warden binary, which answers the same verbs.
package main

import (
	"os"

	"github.com/wardenhq/warden/engine/hookcli"
)

// version is set at build time with -ldflags "-X main.version=...", as
// the full binary's is.
var version = "0.1.0-dev"

func main() {
	os.Exit(hookcli.Main(os.Args[1:], version, os.Stdin, os.Stdout, os.Stderr))
}
