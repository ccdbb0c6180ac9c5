package main

import (
	"context"
	"errors"
	"fmt"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

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
	m := tui.NewFleet(watchedSource{cl, hw}, v, tui.FleetOptions{Theme: th, Name: cl.Name, Role: cl.Role})
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

// watchedSource is the console's fleet: decisions through the client,
// hosts from the buckets' watchers.
type watchedSource struct {
	*fleet.Client
	w *fleet.HostWatch
}

func (s watchedSource) Hosts(_ context.Context, v *fleet.View) ([]fleet.HostStatus, error) {
	return s.w.Hosts(v), nil
}
