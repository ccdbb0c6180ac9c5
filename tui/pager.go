package tui

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/wardenhq/warden/engine"
)

// o opens the selected run's whole stream, or the selected receipt or
// request as JSON, in $PAGER (less when unset).
//
// The pager reads the text from a pipe on its stdin, fed by a goroutine
// (the feeder) a page of stored lines at a time, so it starts at once
// however long the stream is, and nothing is written to disk. Every line
// is escaped as the console draws it: a pager gets no raw hook bytes.
//
// Invariant: the feeder always ends. It stops when it has written
// everything (closing the pipe, so the pager sees the end), or when its
// write fails because no one reads any more: the console closes its end
// of the pipe when the pager exits (or fails to start) and when the
// console closes, and the pager's own copy goes with the pager.

// pagerDoneMsg is the pager's exit.
type pagerDoneMsg struct{ err error }

// pagerFeeders counts feeders still running (tests check none is left
// behind once a pager quit early).
var pagerFeeders atomic.Int32

// feedPage is how many stored lines the feeder reads at a time.
const feedPage = 5000

func (a *App) openPager() tea.Cmd {
	if a.sh.opts.NoPager {
		a.sh.setStatus("o opens a pager on the machine running warden, not over SSH: c copies the selection instead", true)
		return nil
	}
	e := a.sh.e
	var write func(w io.Writer) error
	switch a.tab {
	case tabStreams:
		run := a.streams.log.run
		if !a.streams.focusLog || run == "" {
			run = a.streams.selectedID()
		}
		if run == "" {
			return nil
		}
		write = func(w io.Writer) error { return writeStream(e, run, w) }
	case tabReceipts:
		if r, ok := a.receipts.selected(); ok {
			write = func(w io.Writer) error { return writeJSON(w, r) }
		}
	case tabRequests:
		if r, ok := a.requests.current(); ok {
			write = func(w io.Writer) error { return writeJSON(w, r) }
		}
	}
	if write == nil {
		return nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		a.sh.setStatus("cannot open a pipe to the pager: "+OneLine(err.Error()), true)
		return nil
	}
	args := strings.Fields(os.Getenv("PAGER"))
	if len(args) == 0 {
		args = []string{"less"}
	}
	c := exec.Command(args[0], args[1:]...)
	c.Stdin = r // tea.ExecProcess keeps a stdin that is set
	c.Env = append(os.Environ(), "LESSSECURE=1")
	stop := context.AfterFunc(a.sh.context(), func() { r.Close() })
	pagerFeeders.Add(1)
	go feed(w, write)
	return tea.ExecProcess(c, func(err error) tea.Msg {
		stop()
		r.Close() // the feeder's next write fails: it stops
		return pagerDoneMsg{err}
	})
}

// feed writes the text into the pipe and closes it. A failure to read
// the text is the pager's last line (the operator is looking there); a
// failure to write means the pager is gone, and ends the feed quietly.
func feed(w *os.File, write func(io.Writer) error) {
	defer pagerFeeders.Add(-1)
	defer w.Close()
	fw := &failedWriter{w: w}
	if err := write(fw); err != nil && fw.err == nil {
		fmt.Fprintf(w, "\nwarden: reading the text failed: %s\n", safe(OneLine(err.Error())))
	}
}

// failedWriter remembers a write's failure, to tell it from a read's.
type failedWriter struct {
	w   io.Writer
	err error
}

func (f *failedWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if err != nil {
		f.err = err
	}
	return n, err
}

// writeStream writes a run's stored lines, a page at a time, escaped.
func writeStream(e engine.Streams, run string, w io.Writer) error {
	m, err := e.StreamInfo(run)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w) // a failed write fails every later one, and Flush
	for from := m.First; from < m.Lines; {
		lines, err := e.StreamLines(run, from, feedPage)
		if err != nil {
			return err
		}
		if len(lines) == 0 {
			break
		}
		for _, l := range lines {
			fmt.Fprintf(bw, "%7d %-7s %s\n", l.N+1, l.Level, safe(l.Text))
		}
		// Each page reaches the pager as soon as it is read.
		if err := bw.Flush(); err != nil {
			return err
		}
		from = lines[len(lines)-1].N + 1
	}
	return nil
}

// writeJSON writes v as indented JSON, its strings escaped for a terminal.
func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if _, err := io.WriteString(w, safe(l)+"\n"); err != nil {
			return err
		}
	}
	return nil
}
