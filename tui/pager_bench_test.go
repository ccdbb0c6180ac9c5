package tui

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"testing"
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
