package control

import "github.com/wardenhq/warden/engine"

// replyLineBytes bounds the stream text of one StreamLines or
// StreamLinesBefore reply: a run's stream holds up to 64 MiB, in lines of
// up to 1 MiB, and one reply of all of it cost the serving engine several
// times that while it read and encoded it (a hook flooding 1 MiB lines
// while `hook run` followed it took serve past 600 MiB). The client asks
// again for the rest (Client.StreamLines), so callers still get every
// line they asked for.
const replyLineBytes = 4 << 20

// firstRead is how many lines the server reads first for a page (lines
// of up to 1 MiB: at most 4 MiB); later reads are sized by the lines seen
// so far.
const firstRead = 4

// pageForward reads up to max lines (0: no limit) from from, stopping
// before replyLineBytes of text (but never at zero lines).
func pageForward(read func(from uint64, n int) ([]engine.Line, error), from uint64, max int) ([]engine.Line, error) {
	var page []engine.Line
	size, n := 0, firstRead
	for {
		if max > 0 {
			n = min(n, max-len(page))
		}
		ls, err := read(from, n)
		if err != nil {
			return page, err
		}
		for _, l := range ls {
			if len(page) > 0 && size+len(l.Text) > replyLineBytes {
				return page, nil
			}
			page, size = append(page, l), size+len(l.Text)
		}
		if len(ls) < n || (max > 0 && len(page) >= max) {
			return page, nil // the end of the stream, or all that was asked
		}
		from = ls[len(ls)-1].N + 1
		n = linesFitting(len(page), size)
	}
}

// pageBackward reads up to max lines before before (none for max <= 0,
// as the engine does), the newest kept, stopping before replyLineBytes of
// text (never at zero lines). The page is in stream order.
func pageBackward(read func(before uint64, n int) ([]engine.Line, error), before uint64, max int) ([]engine.Line, error) {
	if max <= 0 {
		return read(before, max)
	}
	var pages [][]engine.Line // newest first
	got, size, n := 0, 0, firstRead
	page := func() []engine.Line {
		out := make([]engine.Line, 0, got)
		for i := len(pages) - 1; i >= 0; i-- {
			out = append(out, pages[i]...)
		}
		return out
	}
	for {
		n = min(n, max-got)
		ls, err := read(before, n)
		if err != nil {
			return page(), err
		}
		i := len(ls) // ls[i:] is kept; walk from the newest line back
		for ; i > 0; i-- {
			t := len(ls[i-1].Text)
			if got+len(ls)-i > 0 && size+t > replyLineBytes {
				break
			}
			size += t
		}
		pages, got = append(pages, ls[i:]), got+len(ls)-i
		if i > 0 || len(ls) < n || got >= max {
			return page(), nil // full, at the stream's start, or all that was asked
		}
		before = ls[0].N
		n = linesFitting(got, size)
	}
}

// linesFitting guesses how many more lines like the got lines of size
// bytes seen so far fit in what is left of replyLineBytes (at least one).
func linesFitting(got, size int) int {
	avg := max(size/max(got, 1), 1)
	return max((replyLineBytes-size)/avg, 1)
}
