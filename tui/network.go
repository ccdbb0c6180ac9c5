package tui

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/wardenhq/warden/engine"
)

// Network requests and destinations (egress mode): what the Requests pane
// and the Streams pane show of a hook whose network is a list.

// connectDest is host:port of a network.connect request ("", false for
// any other request). The host was checked by the engine (a DNS name or
// an address); it is still escaped (safe) before display.
func connectDest(r engine.Request) (string, bool) {
	if r.Operation != engine.OpConnect {
		return "", false
	}
	var c struct {
		Host string `json:"host"`
		Port int    `json:"port"`
	}
	if json.Unmarshal(r.Content, &c) != nil || c.Host == "" {
		return "", false
	}
	host := safe(OneLine(c.Host))
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return host + ":" + strconv.Itoa(c.Port), true
}

// connectBanner is the large line of a network request's detail: where
// the hook wants to go, before anything else.
func (p *requestsPane) connectBanner(r engine.Request) []string {
	dest, ok := connectDest(r)
	if !ok {
		return nil
	}
	th := p.sh.th
	out := []string{"", "   " + th.Title.Render("CONNECT  "+dest), "   " + th.Dim.Render(fmt.Sprintf("asked by %s/%s through its egress proxy; y: this connection once · a: add it to the policy of %s (module.yaml is not changed) · n: deny", safe(r.Requester.Module), safe(r.Requester.Hook), safe(r.Subject)))}
	if r.Warning != "" {
		out = append(out, "   "+th.Denied.Render("warning: "+safe(r.Warning)))
	}
	return append(out, "")
}

// connectRule is what approve-always of a network request does.
func connectRule(r engine.Request, revision uint64) (string, bool) {
	dest, ok := connectDest(r)
	if !ok {
		return "", false
	}
	return fmt.Sprintf("add %s to the network list of %s, policy revision %d → %d", dest, safe(r.Subject), revision, revision+1), true
}

// destTracker remembers, per run, the destinations it reached, in order.
// It learns them from network.connect receipts, which only the engine
// writes: never from the run's stream, where a hook's own output could
// claim any destination it likes.
type destTracker map[string][]string

// receipt takes an allowed connection's network.connect receipt.
func (d destTracker) receipt(rc engine.Receipt) {
	if rc.Kind != engine.KindNetworkConnect {
		return
	}
	var det struct {
		Run     string `json:"run"`
		Host    string `json:"host"`
		Port    int    `json:"port"`
		Allowed bool   `json:"allowed"`
	}
	if json.Unmarshal(rc.Details, &det) != nil || !det.Allowed || det.Run == "" || det.Host == "" {
		return
	}
	host := det.Host
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	dest := safe(OneLine(host + ":" + strconv.Itoa(det.Port)))
	if slices.Contains(d[det.Run], dest) {
		return
	}
	if len(d) > 256 {
		clear(d) // a console left open for days: forget old runs
	}
	d[det.Run] = append(d[det.Run], dest)
}

// known marks a run whose destinations were looked up in its receipts
// (an ended run, shown in a console that did not see it live).
const knownKey = "\x00known:"

// wants reports whether an ended egress run this console did not watch
// needs its destinations read from its hook.end receipt, and marks it
// asked: each is read once.
func (d destTracker) wants(r engine.RunRecord) bool {
	if r.Network != "egress" || r.Ended == nil || d[r.ID] != nil || d[knownKey+r.ID] != nil {
		return false
	}
	d[knownKey+r.ID] = []string{}
	return true
}

// destsMsg is an ended run's destinations, read from its hook.end.
type destsMsg struct {
	run   string
	dests []string
}

// lookUpDests reads, off the UI goroutine, the destinations of a run
// shown that wants them (destTracker.wants).
func (p *streamsPane) lookUpDests(run string) tea.Cmd {
	if p.dests == nil {
		p.dests = destTracker{}
	}
	r, ok := p.record(run)
	if !ok || !p.dests.wants(r) {
		return nil
	}
	e := p.eng()
	return func() tea.Msg {
		m := destsMsg{run: r.ID}
		if rc, ok, err := runEnd(e, r); err == nil && ok {
			var det struct {
				Destinations []string `json:"destinations"`
			}
			if json.Unmarshal(rc.Details, &det) == nil {
				m.dests = det.Destinations
			}
		}
		return m
	}
}

// destsRead takes a run's destinations unless its receipts came first.
func (p *streamsPane) destsRead(m destsMsg) {
	if p.dests == nil {
		p.dests = destTracker{}
	}
	if p.dests[m.run] != nil {
		return
	}
	for _, s := range m.dests {
		p.dests[m.run] = append(p.dests[m.run], safe(OneLine(s)))
	}
}

// endWindow is how many receipts runEnd looks at from where a run's end
// was written.
const endWindow = 32

// runEnd finds an ended run's hook.end receipt by the time it ended.
// Receipts are stored by seq, and a receipt's time grows with its seq
// (both are taken in the write transaction that appends it), and
// hook.end is appended in the commit that records the run's end, after
// Ended was taken: so a binary search of point reads finds the first
// receipt at or after Ended, and hook.end is among the few appended from
// there. That is log2(receipts) + 1 reads, however long the log. A clock
// that stepped back can put it outside the window: then the walk from
// the run's start.
func runEnd(e engine.Receipts, r engine.RunRecord) (engine.Receipt, bool, error) {
	if r.Ended == nil {
		return engine.Receipt{}, false, nil
	}
	newest, err := e.Receipts(engine.ReceiptFilter{Limit: 1})
	if err != nil || len(newest) == 0 {
		return engine.Receipt{}, false, err
	}
	from := *r.Ended
	lo, hi := uint64(1), newest[0].Seq+1 // the first seq at or after from is in [lo, hi]
	for lo < hi {
		mid := lo + (hi-lo)/2
		rc, err := e.Receipt(mid)
		if err != nil {
			return engine.Receipt{}, false, err
		}
		if rc.At.Before(from) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	rs, err := e.Receipts(engine.ReceiptFilter{Kind: engine.KindHookEnd, AfterSeq: lo - 1, Before: lo + endWindow})
	if err != nil {
		return engine.Receipt{}, false, err
	}
	if rc, ok := endOf(rs, r.ID); ok {
		return rc, true, nil
	}
	rs, err = e.Receipts(engine.ReceiptFilter{Kind: engine.KindHookEnd, Since: r.Started})
	if err != nil {
		return engine.Receipt{}, false, err
	}
	rc, ok := endOf(rs, r.ID)
	return rc, ok, nil
}

// endOf is run's receipt among hook.end receipts.
func endOf(rs []engine.Receipt, run string) (engine.Receipt, bool) {
	for _, rc := range rs {
		var det struct {
			Run string `json:"run"`
		}
		if json.Unmarshal(rc.Details, &det) == nil && det.Run == run {
			return rc, true
		}
	}
	return engine.Receipt{}, false
}

// title is the Streams log title's part for a run's destinations.
func (d destTracker) title(run string) string {
	ds := d[run]
	switch len(ds) {
	case 0:
		return ""
	case 1:
		return "→ " + ds[0]
	}
	return fmt.Sprintf("→ %d hosts: %s", len(ds), strings.Join(ds, ", "))
}

// hostNetworkRunning counts running hooks that share the host's whole
// network (network: true, granted): the header shows them loudly.
func (p *streamsPane) hostNetworkRunning() (n int) {
	for _, r := range p.runs {
		if r.Status == engine.RunRunning && r.Network == "host" {
			n++
		}
	}
	return n
}

// egressInfo is a hook's network list in the Modules pane.
func egressInfo(dests []string) string {
	dests = append([]string(nil), dests...)
	for i, d := range dests {
		dests[i] = safe(d) // canonical names (the manifest refuses others), escaped all the same
	}
	switch len(dests) {
	case 0:
		return "egress (asks for each)"
	case 1, 2:
		return "egress " + strings.Join(dests, ",")
	}
	return fmt.Sprintf("egress %s +%d", dests[0], len(dests)-1)
}
