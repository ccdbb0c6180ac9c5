package tui

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/wardenhq/warden/engine"
)

// Drilling down (k9s-style): enter on a receipt opens the run or the
// request it is about, enter on a stream line that names a request opens
// that request. Each step leaves a crumb; the tab bar shows the trail and
// esc walks back along it. Switching tabs by hand starts a new trail.

// crumb is one step of the trail: the tab left, and what was selected
// there (for the breadcrumb).
type crumb struct {
	tab   int
	label string
}

// drillMsg asks the app to go from the current tab to a run's stream or
// a request, leaving a crumb labelled from.
type drillMsg struct {
	from    string
	run     string
	request uint64
}

func drill(m drillMsg) tea.Cmd { return func() tea.Msg { return m } }

// drillTo follows a drillMsg.
func (a *App) drillTo(m drillMsg) tea.Cmd {
	a.trail = append(a.trail, crumb{tab: a.tab, label: m.from})
	var cmd tea.Cmd
	switch {
	case m.request != 0:
		a.tab = tabRequests
		cmd = a.requests.show()
		a.requests.selectOrAwait(m.request)
	case m.run != "":
		a.tab = tabStreams
		cmd = a.streams.show(m.run)
	}
	a.layout()
	return cmd
}

// back walks the trail one step back; false when there is none.
func (a *App) back() bool {
	n := len(a.trail)
	if n == 0 {
		return false
	}
	c := a.trail[n-1]
	a.trail = a.trail[:n-1]
	a.tab = c.tab
	a.layout()
	return true
}

// breadcrumb is the trail as the tab bar shows it ("" without one).
func (a *App) breadcrumb() string {
	if len(a.trail) == 0 {
		return ""
	}
	var parts []string
	for _, c := range a.trail {
		parts = append(parts, tabNames[c.tab]+" "+c.label)
	}
	parts = append(parts, tabNames[a.tab])
	return strings.Join(parts, " › ") + "  (esc back)"
}

// receiptTarget is what a receipt is about: a request (request.*), else
// a run (hook.*, and any receipt naming one), from its details.
func receiptTarget(r engine.Receipt) (run string, request uint64) {
	var d struct {
		Run     string `json:"run"`
		Request uint64 `json:"request"`
	}
	if json.Unmarshal(r.Details, &d) != nil {
		return "", 0
	}
	if d.Request != 0 && strings.HasPrefix(r.Kind, engine.KindFamilyRequest) {
		return "", d.Request
	}
	if d.Run != "" {
		return d.Run, 0
	}
	return "", d.Request
}

var requestRef = regexp.MustCompile(`\brequest (\d+)\b`)

// lineRequest is the request a stream line names ("request 3: …"), or 0.
func lineRequest(text string) uint64 {
	m := requestRef.FindStringSubmatch(text)
	if m == nil {
		return 0
	}
	id, _ := strconv.ParseUint(m[1], 10, 64)
	return id
}
