// Command warden-hook is the helper a jailed hook finds as `warden` on its
// PATH: the `warden hook context|log|secret|config|call|confirm|result`
// verbs (engine/hookcli, the same code the full binary runs for them) and
// nothing else, so that each call from a shell hook starts like a small
// program instead of paying for the console's, SSH's, MCP's, NATS' and
// Docker's package inits. Build it beside warden, without cgo:
//
//	go build -o bin/ ./cmd/warden && CGO_ENABLED=0 go build -o bin/ ./cmd/warden-hook
//
// It links the net package (the protocol client and the egress bridge
// dial Unix sockets with it), and with cgo on, net
// brings in cgo's resolver: the binary is then dynamically linked, and
// each call pays for loading libc and for cgo's start, about 0.5-1 ms of
// the 3-4 ms a call cost (issue 25). The helper resolves no names.
//
// The engine binds it into the jail at /opt/warden/bin/warden when it sits
// next to the warden binary (docs/jail.md); without it, the jail gets the
// full binary as before.
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
