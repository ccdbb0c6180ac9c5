package control

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/wardenhq/warden/engine"
)

// stream is lines numbered from first, read as the engine reads them.
type stream []engine.Line

func (s stream) forward(from uint64, n int) ([]engine.Line, error) {
	var out []engine.Line
	for _, l := range s {
		if l.N >= from && (n <= 0 || len(out) < n) {
			out = append(out, l)
		}
	}
	return out, nil
}

func (s stream) backward(before uint64, n int) ([]engine.Line, error) {
	if n <= 0 {
		return nil, nil
	}
	var out []engine.Line
	for _, l := range s {
		if l.N < before {
			out = append(out, l)
		}
	}
	return out[max(len(out)-n, 0):], nil
}

func textBytes(ls []engine.Line) (n int) {
	for _, l := range ls {
		n += len(l.Text)
	}
	return n
}

// Pages forward and backward, asked again until done as the client does,
// give exactly the lines one unbounded read gives, and no page but a
// lone line carries more than replyLineBytes of text.
func TestPagesBoundedAndComplete(t *testing.T) {
	var s stream
	for i := range 40 {
		size := 10
		if i%3 == 0 {
			size = 1<<20 - 1
		}
		s = append(s, engine.Line{N: uint64(100 + i), Text: fmt.Sprintf("%d", i) + strings.Repeat("x", size)})
	}
	for _, max := range []int{0, 1, 7, 40, 1000} {
		t.Run(fmt.Sprintf("forward max %d", max), func(t *testing.T) {
			var all []engine.Line
			from := uint64(0)
			for {
				want := 0
				if max > 0 {
					want = max - len(all)
				}
				p, _ := pageForward(s.forward, from, want)
				if len(p) > 1 && textBytes(p) > replyLineBytes {
					t.Fatalf("a page of %d lines carries %d bytes", len(p), textBytes(p))
				}
				all = append(all, p...)
				if len(p) == 0 || (max > 0 && len(all) >= max) {
					break
				}
				from = p[len(p)-1].N + 1
			}
			want, _ := s.forward(0, max)
			if !reflect.DeepEqual(all, want) {
				t.Fatalf("paged forward %d lines, want %d", len(all), len(want))
			}
		})
	}
	for _, max := range []int{1, 7, 40, 1000} {
		t.Run(fmt.Sprintf("backward max %d", max), func(t *testing.T) {
			var pages [][]engine.Line
			got, before := 0, uint64(140)
			for {
				p, _ := pageBackward(s.backward, before, max-got)
				if len(p) > 1 && textBytes(p) > replyLineBytes {
					t.Fatalf("a page of %d lines carries %d bytes", len(p), textBytes(p))
				}
				pages, got = append(pages, p), got+len(p)
				if len(p) == 0 || got >= max {
					break
				}
				before = p[0].N
			}
			var all []engine.Line
			for i := len(pages) - 1; i >= 0; i-- {
				all = append(all, pages[i]...)
			}
			want, _ := s.backward(140, max)
			if !reflect.DeepEqual(all, want) {
				t.Fatalf("paged backward %d lines, want %d", len(all), len(want))
			}
		})
	}
	if p, _ := pageBackward(s.backward, 140, 0); len(p) != 0 {
		t.Errorf("backward with max 0 gave %d lines, want none (as the engine)", len(p))
	}
}

// Over the socket: a 12 MiB stream comes back whole to a client that
// asks for all of it, though no reply carries more than replyLineBytes.
func TestStreamLinesOverSocketArePaged(t *testing.T) {
	e, _ := served(t)
	if _, err := e.AddModule(engine.LocalActor(), testModule(t)); err != nil {
		t.Fatal(err)
	}
	o, err := runToEnd(e, engine.LocalActor(), engine.RunRequest{Module: "ctl", Hook: "big", Jail: engine.JailOff})
	if err != nil || !o.OK() {
		t.Fatalf("run: %+v %v", o.Run, err)
	}
	id := o.Run.ID
	c := attach(t, e.DataDir())
	local, err := e.StreamLines(id, 0, 0)
	if err != nil || textBytes(local) < 12*(1<<20-200) {
		t.Fatalf("stored %d lines, %d bytes (%v)", len(local), textBytes(local), err)
	}
	remote, err := c.StreamLines(id, 0, 0)
	if err != nil || !reflect.DeepEqual(remote, local) {
		t.Fatalf("over the socket: %d lines (%v), want the %d stored", len(remote), err, len(local))
	}
	var page []engine.Line
	if err := c.do(context.Background(), nil, "StreamLines", []any{id, 0, 0}, &page); err != nil || len(page) == 0 || textBytes(page) > replyLineBytes {
		t.Fatalf("one reply: %d lines, %d bytes (%v); want at most %d bytes", len(page), textBytes(page), err, replyLineBytes)
	}
	end := local[len(local)-1].N + 1
	for _, n := range []int{3, 20, 1000} {
		want, _ := e.StreamLinesBefore(id, end, n)
		got, err := c.StreamLinesBefore(id, end, n)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("StreamLinesBefore(%d): %d lines (%v), want %d", n, len(got), err, len(want))
		}
	}
}

// runToEnd starts a run and waits for its outcome.
func runToEnd(e interface {
	StartRun(engine.Actor, engine.RunRequest) (*engine.RunHandle, error)
}, actor engine.Actor, req engine.RunRequest) (engine.Outcome, error) {
	h, err := e.StartRun(actor, req)
	if err != nil {
		return engine.Outcome{}, err
	}
	return h.Wait(), nil
}
