// Command warden-hook is the helper a jailed hook finds as `warden` on its
// PATH: the `warden hook context|log|secret|config|call|confirm|result`
// verbs (engine/hookcli, the same code the full binary runs for them) and
// nothing else, so that each call from a shell hook starts like a small
// program instead of paying for the console's, SSH's, MCP's, NATS' and
// Docker's package inits. Build it beside warden:
//
//	go build -o bin/ ./cmd/warden ./cmd/warden-hook
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
