package sshconsole

import (
	"fmt"
	"strings"
	"time"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/engine/termsafe"
)

// safe is termsafe.String: every field below was written by a hook, a
// module author or a client, and goes to a remote terminal.
func safe(s string) string { return termsafe.String(s) }

// statusScreen is the one-screen status of a session without a terminal.
func statusScreen(e engine.Host, version string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "warden %s on %s\n\n", version, e.DataDir())
	reqs, err := e.Requests(engine.RequestFilter{})
	if err != nil {
		fmt.Fprintf(&b, "pending requests: error: %v\n", err)
	} else {
		fmt.Fprintf(&b, "Pending requests: %d\n", len(reqs))
		for _, r := range reqs {
			fmt.Fprintf(&b, "  #%-4d %-24s %s/%s run %s\n", r.ID, safe(r.Operation), safe(r.Requester.Module), safe(r.Requester.Hook), safe(r.Requester.Run))
		}
	}
	runs, err := e.Runs(200)
	if err != nil {
		fmt.Fprintf(&b, "\nrunning hooks: error: %v\n", err)
		return b.String()
	}
	var running []engine.RunRecord
	for _, r := range runs {
		if r.Status == engine.RunRunning {
			running = append(running, r)
		}
	}
	fmt.Fprintf(&b, "\nRunning hooks: %d\n", len(running))
	for _, r := range running {
		fmt.Fprintf(&b, "  %s/%s run %s by %s since %s\n", safe(r.Module), safe(r.Hook), safe(r.ID), safe(string(r.Actor)), r.Started.Format(time.RFC3339))
	}
	return b.String()
}

func roleName(r engine.Role) string {
	if r == engine.RoleOperator {
		return "operator"
	}
	return "viewer"
}
