package tui

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
)

// BenchmarkPagerFirstScreen measures o on a stored 1,000,000-line
// stream, from the key to the pager holding its first screen (40 lines):
//
//	file-first: the whole stream escaped into a private file, then read
//	            (what o did before: the pager started after the file)
//	pipe:       the feeder streaming into a pipe the pager reads (now);
//	            the reader then quits, and the feeder stops
func BenchmarkPagerFirstScreen(b *testing.B) {
	_, e, run := benchConsole(b, millionScript, 120, 40)
	write := func(w io.Writer) error { return writeStream(e, run, w) }
	firstScreen := func(r io.Reader) {
		sc := bufio.NewScanner(r)
		for i := 0; i < 40; i++ {
			if !sc.Scan() {
				b.Fatalf("only %d lines", i)
			}
		}
	}
	b.Run("file-first", func(b *testing.B) {
		for b.Loop() {
			f, err := os.CreateTemp(b.TempDir(), "warden-pager-*.txt")
			if err != nil {
				b.Fatal(err)
			}
			if err := write(f); err != nil {
				b.Fatal(err)
			}
			f.Close()
			r, err := os.Open(filepath.Clean(f.Name()))
			if err != nil {
				b.Fatal(err)
			}
			firstScreen(r)
			r.Close()
			os.Remove(f.Name())
		}
	})
	b.Run("pipe", func(b *testing.B) {
		for b.Loop() {
			r, w, err := os.Pipe()
			if err != nil {
				b.Fatal(err)
			}
			pagerFeeders.Add(1)
			go feed(w, write)
			firstScreen(r)
			r.Close()
		}
	})
}

// BenchmarkStreamsKeyMove measures a key that moves the cursor within
// the window held (down, then up, in the middle of 100,000 lines):
// through the pane (the operation tried on a copy that cannot read, then
// shown) against the move on the view itself (what Update did before),
// the baseline, in the same run.
func BenchmarkStreamsKeyMove(b *testing.B) {
	a, _, _ := benchConsole(b, "seq 1 100000", 120, 40)
	p := a.streams
	p.focusLog = true
	p.log.goTo(50_000)
	b.Run("view-move", func(b *testing.B) {
		for b.Loop() {
			p.log.move(1)
			p.log.move(-1)
		}
	})
	down, up := keyMsg("down").(tea.KeyMsg), keyMsg("up").(tea.KeyMsg)
	b.Run("pane-key", func(b *testing.B) {
		for b.Loop() {
			if p.key(down) != nil || p.key(up) != nil {
				b.Fatal("a move within the window read storage")
			}
		}
	})
}
