package engine

import (
	"context"
	"time"
)

// The fleet as a console sees it. The fleet's client, wire protocol and
// fold (engine/fleet) are not the console's business: tui knows only
// these view types, and cmd adapts the client and its View to them
// (cmd/warden/fleet_console.go). They are small types of their own, not
// aliases of engine/fleet's, so that nothing in engine imports the fleet
// client: it is operator-side code, and only cmd uses it.

// Fleet is the fleet a console watches and decides on.
type Fleet interface {
	// Rev changes whenever the requests or runs do: a console re-reads
	// Queue and Runs only when it changed.
	Rev() uint64
	// Queue is the requests across the fleet: the pending ones, oldest
	// first, then at most maxDecided decided ones, newest first.
	Queue(now time.Time, maxDecided int) []FleetRequest
	// Runs is the runs across the fleet, newest first, at most limit.
	Runs(limit int) []FleetRun
	// Forget drops what ended before the fleet's window back from now,
	// so that a console running for weeks keeps bounded memory.
	Forget(now time.Time)
	// Hosts is every host that joined, and its state.
	Hosts(ctx context.Context) ([]FleetHost, error)
	// Decide sends d to host; the host decides (the first decision wins)
	// and answers.
	Decide(ctx context.Context, host string, d FleetDecision) (FleetReply, error)
}

// FleetRequest is one request on one host.
type FleetRequest struct {
	Host    string
	Request Request
}

// Pending reports whether it still waits at now.
func (r FleetRequest) Pending(now time.Time) bool { return r.Request.Pending(now) }

// FleetRun is one run on one host.
type FleetRun struct {
	Host                     string
	ID, Module, Hook, Status string
	Started                  time.Time
}

// FleetHost is one host's state as the fleet last heard it.
type FleetHost struct {
	Host string
	Up   bool
	// Beat is its last heartbeat (nil: never heard from).
	Beat *FleetBeat
	// Pending is how many of its requests wait.
	Pending int
	// Checkpoint is the newest checkpoint of its chain (nil: none yet).
	Checkpoint *FleetCheckpoint
}

// FleetBeat is a host's heartbeat.
type FleetBeat struct {
	At      time.Time
	Running int
}

// FleetCheckpoint witnesses a host's receipt chain up to Seq.
type FleetCheckpoint struct {
	Seq uint64
	At  time.Time
}

// FleetDecision is an operator's verdict on a host's request: Verdict
// is ApproveOnce, ApproveAlways or Deny.
type FleetDecision struct {
	Request uint64
	Verdict string
	Reason  string
}

// FleetReply is a host's answer to a decision. OK is false when the host
// did not record it (already decided, not found, refused): Message says
// why, and what to do.
type FleetReply struct {
	OK      bool
	Message string
}
