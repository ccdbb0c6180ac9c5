package engine

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wardenhq/warden/engine/perms"
	"github.com/wardenhq/warden/storage"
)

// The ask gate. Every call that needs an operator's word goes through
// askGate.ask: a hook's capability (RequestPermission, so the hands
// capabilities and MCP hands calls too), operator.confirm, a jailed
// hook's network, an egress connection, and an MCP tool call. The gate
// checks the subject's policy (its rules, a retry claim) or opens a
// request, waits for the decision, asks again when the policy changed
// before one (superseded), and answers one typed outcome. The callers
// only word that outcome for their stream, hook or client.

// askOutcome is how an ask ended.
type askOutcome int

const (
	// outcomeApproved: a rule or retry claim allowed it (answer.req.ID
	// is 0), or the request was approved (once or always).
	outcomeApproved askOutcome = iota + 1
	// outcomeDenied: an operator, or the run's starter at its terminal
	// prompt, said no.
	outcomeDenied
	// outcomeExpired: nobody decided before the request's expiry.
	outcomeExpired
	// outcomeNoOperator: nobody was attached to ask.
	outcomeNoOperator
	// outcomeRefused: the rules refused it. Either the request was
	// never opened (answer.refusal: the pending limit), or the engine
	// closed it (superseded more often than the gate asks again).
	outcomeRefused
	// outcomeRunEnded: the caller's wait ended first (the run ended,
	// its connection hung up, the MCP client withdrew the call). The
	// decision is what the store holds, which may have raced the end.
	outcomeRunEnded
)

func (o askOutcome) String() string {
	switch o {
	case outcomeApproved:
		return "approved"
	case outcomeDenied:
		return "denied"
	case outcomeExpired:
		return "expired"
	case outcomeNoOperator:
		return "no operator"
	case outcomeRefused:
		return "refused"
	case outcomeRunEnded:
		return "run ended"
	}
	return "undecided"
}

// Reasons the engine records on the requests it decides itself.
const (
	reasonExpired    = perms.ReasonExpired
	reasonNoOperator = "no operator attached"
)

// runEndedWaiting is said of a wait the run's end cut short.
const runEndedWaiting = "the run ended while waiting for the operator"

// maxReasks is how many times a superseded request is asked again
// before the gate answers with the closing decision.
const maxReasks = 8

// ask is one call to gate.
type ask struct {
	perms.Ask // the operation, who asks, the request's TTL and deadline
	// consumer is who takes an approve-once claim: the run, or
	// "mcp:<session>".
	consumer string
	// question: operator.confirm, governed by no policy: no check, a
	// request at once.
	question bool
	// run is the run asking (nil for an MCP call): its stream says the
	// decision, its inline prompt (RunRequest.Confirm) may answer, and
	// its idle clock pauses while it waits.
	run *activeRun
	// consoleOnly: only an open console counts as an operator (standing
	// ones do not, see AttachStandingOperator), and with none no request
	// is opened at all. An MCP client, which has its own caller waiting,
	// is told at once.
	consoleOnly bool
	// withdrawn is the reason recorded when ctx ends before a decision
	// and says no cause of its own.
	withdrawn string
	// opened, if set, is told each request the gate opens, before the
	// wait, and gives the words for it (the caller's stream line of the
	// new request goes there too).
	opened func(req Request) askWords
}

// askWords are what a run is shown about one request: the inline
// prompt's question, and the stream line when no operator is attached.
type askWords struct {
	prompt, noOperator string
}

// answer is what the gate answers.
type answer struct {
	outcome  askOutcome
	req      Request          // the request asked; ID 0 when none was
	decision storage.Decision // its decision, when one was asked
	via      string           // what allowed it without a request
	refusal  *perms.Refusal   // the refusal of the request's opening
}

func (a answer) approved() bool { return a.outcome == outcomeApproved }

// classify is the outcome a stored decision means.
func classify(req Request, d storage.Decision) answer {
	a := answer{req: req, decision: d}
	switch {
	case d.Verdict == ApproveOnce || d.Verdict == ApproveAlways:
		a.outcome = outcomeApproved
	case d.By == perms.EngineActor && d.Reason == reasonExpired:
		a.outcome = outcomeExpired
	case d.By == perms.EngineActor && d.Reason == reasonNoOperator:
		a.outcome = outcomeNoOperator
	case d.By == perms.EngineActor:
		a.outcome = outcomeRefused
	default:
		a.outcome = outcomeDenied
	}
	return a
}

// askGate owns what asking needs: the calls waiting on a decision, the
// operators attached, and the MCP tickets of calls it let through.
type askGate struct {
	store *storage.Store
	bus   *bus
	// mu guards waiting. decideWith holds it from the waiter lookup to
	// the wake, so a waiter registering meanwhile finds the decision in
	// the store (earlyDecision) and none is lost between the two.
	mu      sync.Mutex
	waiting map[uint64]*waiter
	// operators counts the attached operators (AttachOperator), standing
	// the ones of them attached by AttachStandingOperator.
	operators atomic.Int64
	standing  atomic.Int64
	tickets   mcpTickets // MCP calls GateMCP let through, not yet made
}

func newAskGate(st *storage.Store, b *bus) *askGate {
	return &askGate{store: st, bus: b, waiting: map[uint64]*waiter{}}
}

// waiter is a call blocked on a request's decision.
type waiter struct {
	done     chan wake
	consumer string
}

// wake is what a waiter is woken with: the decision, and whether the
// request was superseded (the policy changed before a decision, so the
// call asks again under the new policy).
type wake struct {
	decision   storage.Decision
	superseded bool
}

// ask is the loop every gated call runs: check or open, await, ask
// again if superseded, answer the outcome. The error is the store's
// only; every refusal is an outcome.
func (g *askGate) ask(ctx context.Context, a ask) (answer, error) {
	for attempt := 0; ; attempt++ {
		ans, req, err := g.checkOrOpen(a)
		if err != nil || ans.outcome != 0 {
			return ans, err
		}
		var words askWords
		if a.opened != nil {
			words = a.opened(req)
		}
		ans, superseded := g.await(ctx, a, req, words)
		if superseded && attempt < maxReasks {
			continue // the policy changed: evaluate again, ask again
		}
		return ans, nil
	}
}

// checkOrOpen evaluates a's operation against its subject's policy,
// consuming a matching retry claim, or else opens a request, all in one
// transaction. The request is not yet published: its waiter registers
// first (await), so no decision slips by unseen. A zero outcome means a
// request was opened.
func (g *askGate) checkOrOpen(a ask) (answer, Request, error) {
	var ans answer
	var req Request
	_, err := g.store.Update(func(tx *storage.Tx) error {
		ans, req = answer{}, Request{}
		now := time.Now()
		if !a.question {
			ok, via, err := perms.Check(tx, a.Op, a.consumer, now)
			if err != nil {
				return err
			}
			if ok {
				ans = answer{outcome: outcomeApproved, via: via}
				return nil
			}
		}
		if a.consoleOnly && g.noConsole() {
			ans.outcome = outcomeNoOperator // nobody would see a request: none is opened
			return nil
		}
		var err error
		req, err = perms.Open(tx, a.Ask, now)
		var refused *perms.Refusal
		if errors.As(err, &refused) {
			ans = answer{outcome: outcomeRefused, refusal: refused}
			return nil // commit the refusal's receipt
		}
		return err
	})
	if err != nil {
		return answer{}, Request{}, err
	}
	return ans, req, nil
}

// await waits for the decision on req (opened by this call) until it
// expires or ctx ends; true when the request was superseded.
func (g *askGate) await(ctx context.Context, a ask, req Request, words askWords) (answer, bool) {
	w := &waiter{done: make(chan wake, 1), consumer: a.consumer}
	g.mu.Lock()
	g.waiting[req.ID] = w
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		delete(g.waiting, req.ID)
		g.mu.Unlock()
	}()
	g.bus.publish(Event{Kind: EventRequest, Request: &req})
	// The request was stored before the waiter registered: a decision
	// made in between (a CLI that listed it at once) woke nobody. Take it
	// from the store; an approve-once claim it opened is this call's.
	if got, ok := g.earlyDecision(req.ID, a.consumer); ok {
		return classify(got, *got.Decision), false
	}
	r := a.run
	if r != nil {
		if p := r.proc.Load(); p != nil {
			resume := p.PauseIdle()
			defer resume()
		}
	}
	wctx, stop := context.WithDeadline(ctx, req.Expires)
	defer stop()
	switch {
	case r != nil && r.confirm != nil:
		// The inline prompt answers, unless the console decides first;
		// whichever comes first wins.
		actor := Actor(r.rec.Actor)
		go func() {
			ok, err := r.confirm(wctx, words.prompt)
			if err != nil || wctx.Err() != nil {
				return
			}
			v := Deny
			if ok {
				v = ApproveOnce
			}
			// The run's starter answering its own terminal prompt (it was
			// authorized at StartRun): not through the facade's check.
			g.decide(actor, req.ID, v, "answered at the terminal")
		}()
	case a.consoleOnly && g.noConsole(), !a.consoleOnly && g.operators.Load() == 0:
		if r != nil {
			r.say(storage.LevelWarn, words.noOperator)
		}
		g.decide(internalActor, req.ID, Deny, reasonNoOperator)
	}
	select {
	case wk := <-w.done:
		ans := classify(req, wk.decision)
		if r != nil && !wk.superseded && ans.outcome != outcomeNoOperator {
			// The run's stream says who decided what, and why: an
			// approval as much as a denial (the refusal without an
			// operator has its own line above).
			r.say(decisionLevel(wk.decision), decisionLine(req, wk.decision))
		}
		return ans, wk.superseded
	case <-wctx.Done():
	}
	expired := errors.Is(wctx.Err(), context.DeadlineExceeded)
	why := a.withdrawn
	if expired {
		why = reasonExpired
	} else if c := context.Cause(wctx); c != nil && c != context.Canceled {
		why = c.Error() // the caller said why it stopped waiting
	}
	g.decide(internalActor, req.ID, Deny, why)
	// Whoever decided (this deny, or a decision that raced it), the
	// stored decision stands; its wake is in w.done unless it is still
	// on its way, and then the store has it.
	var wk wake
	select {
	case wk = <-w.done:
	default:
		got, err := g.request(req.ID)
		if err != nil || got.Decision == nil {
			wk.decision = storage.Decision{Verdict: Deny, By: perms.EngineActor, At: time.Now().UTC(), Reason: why}
		} else {
			wk.decision = *got.Decision
		}
	}
	ans := classify(req, wk.decision)
	if !expired {
		ans.outcome = outcomeRunEnded
		return ans, false
	}
	return ans, wk.superseded
}

// earlyDecision returns request id as stored if it is already decided,
// consuming for consumer the retry claim an approve-once left open: a
// waiter registers after its request is stored, so a decision made in
// between (a console or CLI that saw it at once) woke nobody.
func (g *askGate) earlyDecision(id uint64, consumer string) (Request, bool) {
	got, err := g.request(id)
	if err != nil || got.Decision == nil {
		return Request{}, false
	}
	if got.Decision.Verdict == ApproveOnce && got.Claim != nil && !got.Claim.Used {
		op := perms.Op{Subject: got.Subject, Operation: got.Operation, Content: got.Content, Digest: got.Digest}
		_, err := g.store.Update(func(tx *storage.Tx) error {
			_, _, err := perms.Check(tx, op, consumer, time.Now())
			return err
		})
		if err != nil {
			// The claim stays open, so it must not also let this call
			// through: one approve-once is one operation. Refused, with
			// the store's words (they name no secret: a path at most).
			why := "the approval could not be recorded as used (" + err.Error() + "); ask again"
			got.Decision = &storage.Decision{Verdict: Deny, By: perms.EngineActor, At: time.Now().UTC(), Reason: why}
		}
	}
	return got, true
}

func (g *askGate) request(id uint64) (Request, error) {
	var r Request
	err := g.store.View(func(tx *storage.Tx) error {
		var err error
		r, err = tx.Request(id)
		return err
	})
	return r, err
}

func (g *askGate) decide(actor Actor, id uint64, verdict, reason string) (perms.Decided, error) {
	return g.decideWith(id, func(tx *storage.Tx, consumer string) (perms.Decided, error) {
		return perms.Decide(tx, id, verdict, string(actor), reason, time.Now(), consumer)
	})
}

// decideWith records a decision on request id (decideIn, given the
// waiting call's consumer), then wakes that call and tells the
// subscribers. Every decision goes through here.
func (g *askGate) decideWith(id uint64, decideIn func(tx *storage.Tx, consumer string) (perms.Decided, error)) (perms.Decided, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	w := g.waiting[id]
	consumer := ""
	if w != nil {
		consumer = w.consumer
	}
	var d perms.Decided
	var refused *perms.Refusal
	_, err := g.store.Update(func(tx *storage.Tx) error {
		refused = nil
		var err error
		d, err = decideIn(tx, consumer)
		if errors.As(err, &refused) {
			return nil // commit the refusal and the request's closing
		}
		return err
	})
	if err != nil {
		return d, err
	}
	// The request is decided now (by this verdict, or closed by the
	// refusal): wake its waiter and tell the subscribers.
	if req := d.Request; req.Decision != nil {
		if w != nil {
			select {
			case w.done <- wake{decision: *req.Decision, superseded: refused != nil && refused.Reason == perms.RefusedStale}:
			default:
			}
		}
		g.bus.publish(Event{Kind: EventRequest, Request: &req})
	}
	if refused != nil {
		return d, refused
	}
	return d, nil
}

// wakeExpired wakes the waiters of requests just decided as expired,
// and tells the subscribers.
func (g *askGate) wakeExpired(expired []Request) {
	for i := range expired {
		req := expired[i]
		g.mu.Lock()
		w := g.waiting[req.ID]
		g.mu.Unlock()
		if w != nil {
			select {
			case w.done <- wake{decision: *req.Decision}:
			default:
			}
		}
		g.bus.publish(Event{Kind: EventRequest, Request: &req})
	}
}

// attach counts an operator until detach.
func (g *askGate) attach() (detach func()) {
	g.operators.Add(1)
	var once atomic.Bool
	return func() {
		if once.CompareAndSwap(false, true) {
			g.operators.Add(-1)
		}
	}
}

// attachStanding counts a standing operator until detach.
func (g *askGate) attachStanding() (detach func()) {
	g.standing.Add(1)
	d := g.attach()
	var once sync.Once
	return func() {
		once.Do(func() {
			d()
			g.standing.Add(-1)
		})
	}
}

// noConsole: no console (local, or an SSH session) is there to answer a
// request; a serve waiting for SSH sessions that nobody has opened does
// not count (see AttachStandingOperator).
func (g *askGate) noConsole() bool { return g.operators.Load()-g.standing.Load() <= 0 }
