package tui

import (
	"fmt"

	"github.com/charmbracelet/lipgloss"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/themes"
)

type themeT = themes.Theme

// approveAlwaysTool is the console's approve-always of an MCP tool call
// for the whole tool, whatever its arguments.
const approveAlwaysTool = "approve-always (whole tool)"

// decideRequest records the console's decision through the engine.
func decideRequest(e engine.Requests, actor engine.Actor, id uint64, verdict, reason string) (engine.Request, error) {
	switch verdict {
	case approveAlwaysTool:
		r, _, _, err := e.ApproveAlwaysTool(actor, id, reason)
		return r, err
	case engine.ApproveOnce:
		return e.Approve(actor, id, reason)
	case engine.ApproveAlways:
		r, _, _, err := e.ApproveAlways(actor, id, reason)
		return r, err
	default:
		return e.Deny(actor, id, reason)
	}
}

// alwaysRule describes the rule approve-always would add, for the
// operator to confirm.
func alwaysRule(e engine.Requests, r engine.Request) (string, error) {
	if r.Operation == "operator.confirm" {
		return "", fmt.Errorf("request %d is a question (%s), not an operation a policy rule can allow: approve it once (y) or deny it (n)", r.ID, r.Operation)
	}
	p, _, err := e.Policy(r.Subject)
	if err != nil {
		return "", err
	}
	if rule, ok := connectRule(r, p.Revision); ok {
		return rule, nil
	}
	d := r.Digest
	if len(d) > 12 {
		d = d[:12] + "…"
	}
	return fmt.Sprintf("allow %s on %s (digest %s), policy revision %d → %d", engine.RequestSummary(r), r.Subject, d, p.Revision, p.Revision+1), nil
}

// listRequests reads the pending requests, then (with history) the
// decided ones, newest first, limit in all.
func listRequests(e engine.Requests, limit int, history bool) ([]engine.Request, error) {
	return e.Requests(engine.RequestFilter{All: history, Limit: limit})
}

type styleT = lipgloss.Style

type runRecord = engine.RunRecord
