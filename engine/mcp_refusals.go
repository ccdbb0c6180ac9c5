package engine

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/wardenhq/warden/storage"
)

// The receipts of an MCP session's refused calls are bounded, as a hook's
// egress asks are: a client that sends thousands of invalid calls, or
// calls past the pending cap, or calls with no operator attached, would
// otherwise write a receipt for each (10,000 bad calls made 10,001
// receipts in 1.8 s, and doubled the store). Per session and per window,
// the first mcpRefusalBurst refusals are receipted one by one; the rest
// are counted and receipted as one ("N more calls refused: ..."), when
// the window is over and the session refuses again, or when the session
// ends. Every refusal still reaches the client.
const mcpRefusalBurst = 20

// mcpRefusalWindow is the budget's window (a variable for tests).
var mcpRefusalWindow = time.Minute

// mcpRefusals holds each session's budget. Invariant: a session's entry
// exists only while it has refused in its current window or has counts
// not yet receipted; flushMCPRefusals at the session's end removes it.
type mcpRefusals struct {
	mu sync.Mutex
	m  map[string]*sessionRefusals
}

type sessionRefusals struct {
	subject  string
	since    time.Time      // the window's start
	receipts int            // receipted one by one in this window
	quiet    map[string]int // outcome -> refusals counted, not receipted
}

// receiptMCPRefusal appends d, a refusal of session's call, unless the
// session is past its budget; then it is counted under outcome.
func (e *Engine) receiptMCPRefusal(session, outcome string, d storage.Draft) {
	now := time.Now()
	b := &e.mcpRefusals
	b.mu.Lock()
	if b.m == nil {
		b.m = map[string]*sessionRefusals{}
	}
	s := b.m[session]
	if s == nil {
		s = &sessionRefusals{subject: d.Actor, since: now}
		b.m[session] = s
	}
	var grouped *storage.Draft
	if now.Sub(s.since) >= mcpRefusalWindow {
		grouped = s.grouped(session, now)
		s.since, s.receipts, s.quiet = now, 0, nil
	}
	write := s.receipts < mcpRefusalBurst
	if write {
		s.receipts++
	} else {
		if s.quiet == nil {
			s.quiet = map[string]int{}
		}
		s.quiet[outcome]++
	}
	b.mu.Unlock()
	if grouped != nil {
		e.store.AppendReceipt(*grouped)
	}
	if write {
		e.store.AppendReceipt(d)
	}
}

// flushMCPRefusals receipts what session's budget counted and forgets
// it: the session is over.
func (e *Engine) flushMCPRefusals(session string) {
	b := &e.mcpRefusals
	b.mu.Lock()
	s := b.m[session]
	delete(b.m, session)
	b.mu.Unlock()
	if s == nil {
		return
	}
	if g := s.grouped(session, time.Now()); g != nil {
		e.store.AppendReceipt(*g)
	}
}

// grouped is the one receipt of the refusals counted since the window's
// start, or nil when there were none.
func (s *sessionRefusals) grouped(session string, now time.Time) *storage.Draft {
	total := 0
	outcomes := make([]string, 0, len(s.quiet))
	for o, n := range s.quiet {
		total += n
		outcomes = append(outcomes, o)
	}
	if total == 0 {
		return nil
	}
	sort.Strings(outcomes)
	parts := make([]string, len(outcomes))
	counts := map[string]any{}
	for i, o := range outcomes {
		parts[i] = fmt.Sprintf("%d %s", s.quiet[o], o)
		counts[o] = s.quiet[o]
	}
	span := now.Sub(s.since).Round(time.Second)
	return &storage.Draft{Kind: storage.KindMCPGate, Actor: s.subject, Subject: session,
		Summary: fmt.Sprintf("%s: %d more calls refused in %s, past %d receipts a session writes per %s (%s); each refusal reached the client",
			s.subject, total, span, mcpRefusalBurst, shortTTL(mcpRefusalWindow), strings.Join(parts, ", ")),
		Details: map[string]any{"session": session, "outcome": "grouped", "count": total, "outcomes": counts,
			"since": s.since.UTC().Format(time.RFC3339Nano), "windowMs": mcpRefusalWindow.Milliseconds()}}
}
