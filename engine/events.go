package engine

import (
	"context"
	"errors"
	"sync"
)

// EventKind names what an Event carries.
type EventKind string

const (
	// EventReceipt: a receipt was appended (durable before it is published).
	EventReceipt EventKind = "receipt"
	// EventMissed: this subscriber fell behind and Missed events were
	// dropped for it; re-read from storage to catch up.
	EventMissed EventKind = "missed"
	// EventRun: a run started or ended (Run holds its record).
	EventRun EventKind = "run"
	// EventLines: a batch of one run's stream lines, already durable.
	EventLines EventKind = "lines"
	// EventRequest: a request was opened or decided.
	EventRequest EventKind = "request"
)

// Event is one item of a subscription.
type Event struct {
	Kind    EventKind   `json:"kind"`
	Receipt *Receipt    `json:"receipt,omitempty"`
	Run     *RunRecord  `json:"run,omitempty"`
	Lines   *LinesEvent `json:"lines,omitempty"`
	Request *Request    `json:"request,omitempty"`
	Missed  int         `json:"missed,omitempty"`
}

// ErrSubscriptionClosed is returned by Next once the subscription or the
// engine is closed and every buffered event has been read.
var ErrSubscriptionClosed = errors.New("subscription closed")

// DefaultSubscriberBuffer bounds each subscriber's queue.
const DefaultSubscriberBuffer = 4096

// subscriberBytes bounds the stream text queued for one subscriber: 4096
// events of 1 MiB lines each would be 4 GiB held for a console whose
// terminal has stopped reading. Past it the subscriber misses events and
// re-reads the stream from storage, as past the event count.
const subscriberBytes = 8 << 20

// eventSize is what an event holds in a queue, by its stream text (the
// only part a hook can make big).
func eventSize(ev Event) int {
	if ev.Lines == nil {
		return 0
	}
	return batchSize(ev.Lines.Lines)
}

// bus fans events out to subscribers. Publishing never blocks: each
// subscriber has a bounded queue, and when it is full the subscriber is
// marked as having missed events instead of slowing the publisher down.
type bus struct {
	mu   sync.Mutex
	subs map[*Subscription]struct{}
}

// Subscription is one subscriber's bounded queue.
//
// Invariant: once missed > 0, nothing more is queued until the subscriber
// has read the "missed" marker, so everything after the marker is newer
// than what the subscriber re-reads from storage.
type Subscription struct {
	bus    *bus   // nil for a fed subscription (NewFeed)
	stop   func() // a fed subscription's Close tells its source
	mu     sync.Mutex
	queue  []Event
	limit  int
	bytes  int // eventSize of what is queued, at most subscriberBytes unless one event alone is bigger
	missed int
	closed bool
	cause  error         // why it closed, when not by Close
	wake   chan struct{} // capacity 1: "something changed"
}

// Feed is the writing end of a subscription filled from elsewhere: a
// control socket client relays another process's events into one, with
// the same bound and the same "missed" marker as a local subscriber.
type Feed struct{ s *Subscription }

// NewFeed makes a subscription that Push fills; stop, when set, is called
// once when the reader closes it.
func NewFeed(limit int, stop func()) (*Subscription, Feed) {
	if limit <= 0 {
		limit = DefaultSubscriberBuffer
	}
	s := &Subscription{limit: limit, stop: stop, wake: make(chan struct{}, 1)}
	return s, Feed{s}
}

// Push queues events; it never blocks.
func (f Feed) Push(evs ...Event) { f.s.push(evs) }

// End closes the subscription: Next returns what is queued, then cause
// (ErrSubscriptionClosed when cause is nil).
func (f Feed) End(cause error) {
	f.s.mu.Lock()
	if !f.s.closed && f.s.cause == nil {
		f.s.cause = cause
	}
	f.s.mu.Unlock()
	f.s.shut()
}

func newBus() *bus { return &bus{subs: map[*Subscription]struct{}{}} }

func (b *bus) subscribe(limit int) *Subscription {
	s := &Subscription{bus: b, limit: limit, wake: make(chan struct{}, 1)}
	b.mu.Lock()
	if b.subs == nil { // bus closed
		s.closed = true
	} else {
		b.subs[s] = struct{}{}
	}
	b.mu.Unlock()
	return s
}

func (b *bus) publish(evs ...Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for s := range b.subs {
		s.push(evs)
	}
}

func (b *bus) close() {
	b.mu.Lock()
	subs := b.subs
	b.subs = nil
	b.mu.Unlock()
	for s := range subs {
		s.shut()
	}
}

func (s *Subscription) push(evs []Event) {
	s.mu.Lock()
	for _, ev := range evs {
		size := eventSize(ev)
		if s.missed > 0 || len(s.queue) >= s.limit || (len(s.queue) > 0 && s.bytes+size > subscriberBytes) {
			s.missed++
			continue
		}
		s.queue = append(s.queue, ev)
		s.bytes += size
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Subscription) shut() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Next returns the next event, waiting until one arrives, ctx ends or the
// subscription closes.
func (s *Subscription) Next(ctx context.Context) (Event, error) {
	for {
		s.mu.Lock()
		if len(s.queue) > 0 {
			ev := s.queue[0]
			s.queue[0] = Event{}
			s.queue = s.queue[1:]
			s.bytes -= eventSize(ev)
			if len(s.queue) == 0 {
				s.queue = nil // let the backing array go
			}
			s.mu.Unlock()
			return ev, nil
		}
		if s.missed > 0 {
			n := s.missed
			s.missed = 0
			s.mu.Unlock()
			return Event{Kind: EventMissed, Missed: n}, nil
		}
		closed, cause := s.closed, s.cause
		s.mu.Unlock()
		if closed {
			if cause != nil {
				return Event{}, cause
			}
			return Event{}, ErrSubscriptionClosed
		}
		select {
		case <-s.wake:
		case <-ctx.Done():
			return Event{}, ctx.Err()
		}
	}
}

// Close stops the subscription; Next then drains and reports closed.
func (s *Subscription) Close() {
	if s.bus == nil {
		s.mu.Lock()
		stop := s.stop
		s.stop = nil
		s.mu.Unlock()
		if stop != nil {
			stop()
		}
		s.shut()
		return
	}
	s.bus.mu.Lock()
	if s.bus.subs != nil {
		delete(s.bus.subs, s)
	}
	s.bus.mu.Unlock()
	s.shut()
}

// Pending reports how many events are queued for this subscriber (so a
// reader can flush its output when it has caught up).
func (s *Subscription) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}
