package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wardenhq/warden/storage"
)

// nextEvent reads one event, failing the test if none arrives within 5s.
func nextEvent(t testing.TB, s *Subscription) Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ev, err := s.Next(ctx)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return ev
}

// wantNoEvent checks that nothing is queued.
func wantNoEvent(t testing.TB, s *Subscription) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if ev, err := s.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next = %+v, %v; want nothing queued", ev, err)
	}
}

func TestSubscriptionGetsReceiptsInSeqOrder(t *testing.T) {
	e := openEngine(t, Options{})
	head := len(allReceipts(t, e))
	sub := e.Subscribe()
	defer sub.Close()

	if err := e.SetSecret(testActor, "mod", "token", "s3cret-value"); err != nil {
		t.Fatal(err)
	}
	if err := e.SetConfig(testActor, "mod", "ip", "203.0.113.7"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.DeleteConfig(testActor, "mod", "ip"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.DeleteSecret(testActor, "mod", "token"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.RotateTrust(testActor); err != nil {
		t.Fatal(err)
	}
	want := []string{"secret.set", "config.set", "config.delete", "secret.delete", "trust.rotate"}
	stored, err := e.Receipts(ReceiptFilter{AfterSeq: uint64(head)})
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != len(want) {
		t.Fatalf("%d receipts stored, want %d", len(stored), len(want))
	}
	for i, kind := range want {
		ev := nextEvent(t, sub)
		if ev.Kind != EventReceipt || ev.Receipt == nil {
			t.Fatalf("event %d = %+v, want a receipt", i, ev)
		}
		r := ev.Receipt
		if r.Seq != uint64(head+i+1) || r.Kind != kind {
			t.Errorf("event %d: seq %d kind %s, want seq %d kind %s", i, r.Seq, r.Kind, head+i+1, kind)
		}
		// Durable first: what was published is what storage holds.
		if r.Hash != stored[i].Hash || r.Actor != string(testActor) {
			t.Errorf("event %d: published %+v, stored %+v", i, *r, stored[i])
		}
	}
	wantNoEvent(t, sub)
}

// TestSlowSubscriberDoesNotBlock: a subscriber that never reads costs the
// publishers nothing; it later gets its buffer, one "missed" marker with
// the exact count, then newer events. A fast subscriber misses nothing.
func TestSlowSubscriberDoesNotBlock(t *testing.T) {
	const buf, total, writers = 8, 1000, 100
	e := openEngine(t, Options{SubscriberBuffer: buf})
	head := uint64(len(allReceipts(t, e)))
	slow := e.Subscribe()
	// Many writers so group commit folds the flood into few fsyncs. The fast
	// one gets a roomy queue of its own (in-package): group commit
	// may publish a whole batch at once, more than 8, and a reader racing
	// the committer must not be what this test measures.
	fast := e.bus.subscribe(2 * total)
	defer fast.Close()

	fastDone := make(chan []uint64, 1)
	go func() {
		var seqs []uint64
		for len(seqs) < total {
			ev, err := fast.Next(context.Background())
			if err != nil || ev.Kind != EventReceipt {
				t.Errorf("fast subscriber: %+v, %v", ev, err)
				break
			}
			seqs = append(seqs, ev.Receipt.Seq)
		}
		fastDone <- seqs
	}()

	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < total/writers; i++ {
				if err := e.SetConfig(testActor, "flood", fmt.Sprintf("w%d_%d", w, i), "v"); err != nil {
					t.Error(err)
					return
				}
			}
		}(w)
	}
	published := make(chan struct{})
	go func() { wg.Wait(); close(published) }()
	select {
	case <-published:
	case <-time.After(30 * time.Second):
		t.Fatal("publishers blocked behind a subscriber that never reads")
	}
	t.Logf("%d appends by %d writers in %v", total, writers, time.Since(start))

	select {
	case seqs := <-fastDone:
		if len(seqs) != total {
			t.Fatalf("fast subscriber got %d events, want %d", len(seqs), total)
		}
		for i, s := range seqs {
			if s != head+uint64(i)+1 {
				t.Fatalf("fast subscriber event %d has seq %d, want %d", i, s, head+uint64(i)+1)
			}
		}
	case <-time.After(10 * time.Second):
		t.Fatal("fast subscriber did not get every event")
	}
	wantNoEvent(t, fast)

	for i := 0; i < buf; i++ {
		ev := nextEvent(t, slow)
		if ev.Kind != EventReceipt || ev.Receipt.Seq != head+uint64(i)+1 {
			t.Fatalf("slow event %d = %+v, want receipt seq %d", i, ev, head+uint64(i)+1)
		}
	}
	ev := nextEvent(t, slow)
	if ev.Kind != EventMissed || ev.Missed != total-buf || ev.Receipt != nil {
		t.Fatalf("after the buffer: %+v, want one missed marker for %d", ev, total-buf)
	}
	wantNoEvent(t, slow)
	// Re-reading from storage covers exactly what was missed.
	missed, err := e.Receipts(ReceiptFilter{AfterSeq: head + buf})
	if err != nil || len(missed) != total-buf {
		t.Fatalf("re-read %d receipts (%v), want %d", len(missed), err, total-buf)
	}
	// After the marker, events flow again.
	if err := e.SetConfig(testActor, "flood", "after", "v"); err != nil {
		t.Fatal(err)
	}
	ev = nextEvent(t, slow)
	if ev.Kind != EventReceipt || ev.Receipt.Seq != head+total+1 {
		t.Fatalf("after the marker: %+v, want receipt seq %d", ev, head+total+1)
	}
	wantNoEvent(t, slow)
}

// TestMissedMarkerIsOneAndCounts: overflowing twice before reading yields
// one marker with the sum; nothing newer is queued before the marker.
func TestMissedMarkerIsOneAndCounts(t *testing.T) {
	e := openEngine(t, Options{SubscriberBuffer: 2})
	sub := e.Subscribe()
	defer sub.Close()
	for i := 0; i < 5; i++ {
		if err := e.SetConfig(testActor, "m", fmt.Sprintf("n%d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	// Read one: the queue has room again, but nothing may be queued ahead
	// of the marker.
	first := nextEvent(t, sub)
	if err := e.SetConfig(testActor, "m", "late", "v"); err != nil {
		t.Fatal(err)
	}
	second := nextEvent(t, sub)
	if first.Kind != EventReceipt || second.Kind != EventReceipt || second.Receipt.Seq != first.Receipt.Seq+1 {
		t.Fatalf("first two events %+v %+v", first, second)
	}
	if ev := nextEvent(t, sub); ev.Kind != EventMissed || ev.Missed != 4 {
		t.Fatalf("marker %+v, want missed 4 (3 of the flood + the late one)", ev)
	}
	wantNoEvent(t, sub)
}

func TestCloseDrainsThenReportsClosed(t *testing.T) {
	e := openEngine(t, Options{SubscriberBuffer: 3})
	sub := e.Subscribe()
	for i := 0; i < 5; i++ {
		if err := e.SetConfig(testActor, "m", fmt.Sprintf("n%d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if ev := nextEvent(t, sub); ev.Kind != EventReceipt {
			t.Fatalf("drain %d: %+v", i, ev)
		}
	}
	if ev := nextEvent(t, sub); ev.Kind != EventMissed || ev.Missed != 2 {
		t.Fatalf("drain marker: %+v", ev)
	}
	for i := 0; i < 2; i++ {
		if _, err := sub.Next(context.Background()); !errors.Is(err, ErrSubscriptionClosed) {
			t.Fatalf("Next after drain = %v, want ErrSubscriptionClosed", err)
		}
	}
	// Subscribing to a closed engine gives a closed subscription.
	late := e.Subscribe()
	if _, err := late.Next(context.Background()); !errors.Is(err, ErrSubscriptionClosed) {
		t.Fatalf("Next on a subscription made after Close = %v", err)
	}
	late.Close()
	sub.Close() // closing after the engine did is harmless
}

// TestCloseWakesBlockedNext: a reader waiting in Next is released by Close
// of the engine and of the subscription.
func TestCloseWakesBlockedNext(t *testing.T) {
	for _, which := range []string{"engine", "subscription"} {
		t.Run(which, func(t *testing.T) {
			e := openEngine(t, Options{})
			sub := e.Subscribe()
			errc := make(chan error, 1)
			go func() {
				_, err := sub.Next(context.Background())
				errc <- err
			}()
			time.Sleep(10 * time.Millisecond)
			if which == "engine" {
				e.Close()
			} else {
				sub.Close()
			}
			select {
			case err := <-errc:
				if !errors.Is(err, ErrSubscriptionClosed) {
					t.Fatalf("Next = %v, want ErrSubscriptionClosed", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Next still blocked after Close")
			}
		})
	}
}

func TestSubscriptionCloseStopsDelivery(t *testing.T) {
	e := openEngine(t, Options{})
	sub := e.Subscribe()
	other := e.Subscribe()
	defer other.Close()
	if err := e.SetConfig(testActor, "m", "a", "1"); err != nil {
		t.Fatal(err)
	}
	sub.Close()
	if err := e.SetConfig(testActor, "m", "b", "2"); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, sub); ev.Kind != EventReceipt {
		t.Fatalf("queued event before Close: %+v", ev)
	}
	if _, err := sub.Next(context.Background()); !errors.Is(err, ErrSubscriptionClosed) {
		t.Fatalf("Next after Close and drain = %v", err)
	}
	// The other subscriber is unaffected.
	for i := 0; i < 2; i++ {
		if ev := nextEvent(t, other); ev.Kind != EventReceipt {
			t.Fatalf("other subscriber event %d: %+v", i, ev)
		}
	}
}

func TestNextHonoursContext(t *testing.T) {
	e := openEngine(t, Options{})
	sub := e.Subscribe()
	defer sub.Close()

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := sub.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next(cancelled) = %v", err)
	}

	start := time.Now()
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := sub.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next(deadline) = %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Next took %v to honour a 50ms deadline", d)
	}

	// Cancelling a reader that is already waiting releases it.
	ctx, cancel = context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := sub.Next(ctx)
		errc <- err
	}()
	time.Sleep(10 * time.Millisecond)
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Next = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Next ignored cancellation")
	}

	// A waiting reader is woken by a new event.
	evc := make(chan Event, 1)
	go func() {
		ev, err := sub.Next(context.Background())
		if err != nil {
			t.Error(err)
		}
		evc <- ev
	}()
	time.Sleep(10 * time.Millisecond)
	if err := e.SetConfig(testActor, "m", "wake", "v"); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-evc:
		if ev.Kind != EventReceipt || ev.Receipt.Kind != "config.set" {
			t.Fatalf("woken with %+v", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiting reader was not woken by a new event")
	}
}

// A subscriber that stops reading holds at most subscriberBytes of stream
// text, however big the lines: the rest is a missed marker, and it then
// re-reads from storage.
func TestStalledSubscriberHoldsBoundedBytes(t *testing.T) {
	b := newBus()
	sub := b.subscribe(DefaultSubscriberBuffer)
	defer sub.Close()
	big := strings.Repeat("x", 1<<20)
	const sent = 100 // 100 MiB of lines, far under the event-count bound
	for i := range sent {
		b.publish(Event{Kind: EventLines, Lines: &LinesEvent{Run: "r", Lines: []storage.Line{{N: uint64(i), Text: big}}}})
	}
	sub.mu.Lock()
	queued, held := len(sub.queue), sub.bytes
	sub.mu.Unlock()
	if held > subscriberBytes || queued == 0 {
		t.Fatalf("a stalled subscriber holds %d events, %d bytes; want some, at most %d bytes", queued, held, subscriberBytes)
	}
	for i := range queued {
		if ev := nextEvent(t, sub); ev.Kind != EventLines || ev.Lines.Lines[0].N != uint64(i) {
			t.Fatalf("event %d: %+v", i, ev.Kind)
		}
	}
	if ev := nextEvent(t, sub); ev.Kind != EventMissed || ev.Missed != sent-queued {
		t.Fatalf("after the queued lines: %+v, want missed %d", ev, sent-queued)
	}
	// Caught up: a new event is queued again.
	b.publish(Event{Kind: EventLines, Lines: &LinesEvent{Run: "r", Lines: []storage.Line{{N: sent, Text: big}}}})
	if ev := nextEvent(t, sub); ev.Kind != EventLines || ev.Lines.Lines[0].N != sent {
		t.Fatalf("after the marker: %+v", ev)
	}
}
