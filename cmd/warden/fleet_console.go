package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/engine/fleet"
	"github.com/wardenhq/warden/tui"
)

func init() { fleetConsole = runFleetConsole }

// runFleetConsole is `warden fleet` with no verb: the fleet console,
// following the fleet's stream into a view while it runs.
func runFleetConsole(a *app, cl *fleet.Client) error {
	th, err := consoleTheme("")
	if err != nil {
		return err
	}
	v := fleet.NewLiveView()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	followErr := make(chan error, 3)
	for _, o := range []fleet.FollowOptions{{Kind: fleet.KindRequest, Since: fleet.Window}, {Kind: fleet.KindRun, Since: fleet.Window},
		{Kind: fleet.KindCheckpoint, LastPerHost: true}} {
		go func() { followErr <- cl.Follow(ctx, v, o) }()
	}
	hw, err := cl.WatchHosts(ctx)
	if err != nil {
		return err
	}
	m := tui.NewFleet(fleetSource{cl, hw, v}, tui.FleetOptions{Theme: th, Name: cl.Name, Role: cl.Role})
	lipgloss.HasDarkBackground() // before the Program takes the terminal, as the console (console.go)
	p := tea.NewProgram(m, tea.WithAltScreen(), tea.WithInput(a.stdin), tea.WithOutput(a.stdout))
	if _, err := p.Run(); err != nil {
		return err
	}
	cancel()
	for range 3 {
		if err := <-followErr; err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("following the fleet: %w", err)
		}
	}
	return nil
}

// fleetSource is the fleet as the console sees it (engine.Fleet): the
// requests and runs the streams fold into v, the hosts from the buckets'
// watchers (or, without w, read from the buckets each time), decisions
// through the client. It turns the fleet's wire types into the engine's
// view types, so that tui never imports engine/fleet.
type fleetSource struct {
	cl *fleet.Client
	w  *fleet.HostWatch
	v  *fleet.View
}

var _ engine.Fleet = fleetSource{}

func (s fleetSource) Rev() uint64 { return s.v.Rev() }

func (s fleetSource) Forget(now time.Time) { s.v.Prune(now.Add(-fleet.Window)) }

func (s fleetSource) Queue(now time.Time, maxDecided int) []engine.FleetRequest {
	q := s.v.Queue(now, maxDecided)
	out := make([]engine.FleetRequest, len(q))
	for i, r := range q {
		out[i] = engine.FleetRequest{Host: r.Host, Request: r.Request}
	}
	return out
}

func (s fleetSource) Runs(limit int) []engine.FleetRun {
	rs := s.v.Runs(limit)
	out := make([]engine.FleetRun, len(rs))
	for i, r := range rs {
		out[i] = engine.FleetRun{Host: r.Host, ID: r.Run.ID, Module: r.Run.Module, Hook: r.Run.Hook, Status: r.Run.Status, Started: r.Run.Started}
	}
	return out
}

func (s fleetSource) Hosts(ctx context.Context) ([]engine.FleetHost, error) {
	var hs []fleet.HostStatus
	if s.w != nil {
		hs = s.w.Hosts(s.v)
	} else {
		var err error
		if hs, err = s.cl.Hosts(ctx, s.v); err != nil {
			return nil, err
		}
	}
	out := make([]engine.FleetHost, len(hs))
	for i, h := range hs {
		out[i] = engine.FleetHost{Host: h.Host, Up: h.Up, Pending: h.Pending}
		if b := h.Heartbeat; b != nil {
			out[i].Beat = &engine.FleetBeat{At: b.At, Running: b.Running}
		}
		if c := h.LastCheckpoint; c != nil {
			out[i].Checkpoint = &engine.FleetCheckpoint{Seq: c.Seq, At: c.At}
		}
	}
	return out, nil
}

func (s fleetSource) Decide(ctx context.Context, host string, d engine.FleetDecision) (engine.FleetReply, error) {
	rep, err := s.cl.Decide(ctx, host, fleet.Decision{Request: d.Request, Verdict: d.Verdict, Reason: d.Reason})
	if err != nil {
		return engine.FleetReply{}, err
	}
	return engine.FleetReply{OK: rep.Code == fleet.CodeOK, Message: rep.Message}, nil
}
