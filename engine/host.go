package engine

// Host is the engine as a door holds it: a way in from outside the
// process (the control socket, the SSH console, the fleet's host link,
// all under cmd/serve) that serves one engine this process opened. It is the Facade, which a door passes on to the
// callers it serves, plus what only the door that authenticated an actor
// or refused a connection can say: which role that actor has, and that a
// connection was turned away.
//
// The doors take a Host, never an *Engine, so that what they may do to
// the engine is written here and nowhere else; a method a door starts
// calling must be added here first. A Client (cmd/serve/control) is a
// Facade but not a Host: roles and refusals belong to the process that
// holds the store. That is why the MCP gateway (cmd/serve/mcpgw) takes
// only a Facade: it serves an engine this process holds or one it
// attached to, and asks nothing a Client cannot answer.
type Host interface {
	Facade

	// SetRole says what a non-local actor the door authenticated may do
	// (an SSH key's "ssh:<fingerprint>", a fleet member's
	// "fleet:<name>"), until ForgetRole; see roles.go.
	SetRole(actor Actor, role Role)
	// ForgetRole makes the actor a viewer again (its key left the
	// operators file, its fleet decision is done).
	ForgetRole(actor Actor)
	// RecordRefusedAttach receipts a control socket connection the door
	// refused: the peer's uid and pid as the kernel gave them, and why.
	RecordRefusedAttach(uid, pid int, why string) error
}

var _ Host = (*Engine)(nil)
