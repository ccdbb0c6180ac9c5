package tui

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"

	tea "github.com/charmbracelet/bubbletea"

	"warden/engine"
)

// Drilling down (k9s-style): enter on a receipt opens the run or the
// request it is about, enter on a stream line that names a request opens
// that request. Each step leaves a crumb; the tab bar shows the trail and
// esc walks back along it. Switching tabs by hand starts a new trail.

// crumb is one step of the trail: the tab left, and what was selected
// there (for the breadcrumb).
type crumb struct {
	tab   int
	label string
}

// drillMsg asks the app to go from the current tab to a run's stream or
// a request, leaving a crumb labelled from.
type drillMsg struct {
	from    string
	run     string
	request uint64
}

func drill(m drillMsg) tea.Cmd { return func() tea.Msg { return m } }

// drillTo follows a drillMsg.
func (a *App) drillTo(m drillMsg) {
	a.trail = append(a.trail, crumb{tab: a.tab, label: m.from})
	switch {
	case m.request != 0:
		a.tab = tabRequests
		a.requests.show()
		a.requests.selectID(m.request)
	case m.run != "":
		a.tab = tabStreams
		a.streams.show(m.run)
	}
	a.layout()
}

// back walks the trail one step back; false when there is none.
func (a *App) back() bool {
	n := len(a.trail)
	if n == 0 {
		return false
	}
	c := a.trail[n-1]
	a.trail = a.trail[:n-1]
	a.tab = c.tab
	a.layout()
	return true
}

// breadcrumb is the trail as the tab bar shows it ("" without one).
func (a *App) breadcrumb() string {
	if len(a.trail) == 0 {
		return ""
	}
	var parts []string
	for _, c := range a.trail {
		parts = append(parts, tabNames[c.tab]+" "+c.label)
	}
	parts = append(parts, tabNames[a.tab])
	return strings.Join(parts, " › ") + "  (esc back)"
}

// receiptTarget is what a receipt is about: a request (request.*), else
// a run (hook.*, and any receipt naming one), from its details.
func receiptTarget(r engine.Receipt) (run string, request uint64) {
	var d struct {
		Run     string `json:"run"`
		Request uint64 `json:"request"`
	}
	if json.Unmarshal(r.Details, &d) != nil {
		return "", 0
	}
	if d.Request != 0 && strings.HasPrefix(r.Kind, engine.KindFamilyRequest) {
		return "", d.Request
	}
	if d.Run != "" {
		return d.Run, 0
	}
	return "", d.Request
}

var requestRef = regexp.MustCompile(`\brequest (\d+)\b`)

// lineRequest is the request a stream line names ("request 3: …"), or 0.
func lineRequest(text string) uint64 {
	m := requestRef.FindStringSubmatch(text)
	if m == nil {
		return 0
	}
	id, _ := strconv.ParseUint(m[1], 10, 64)
	return id
}

// copySelected copies what the current tab has selected: a receipt's
// hash, a run's id or stream line, a request's id.
func (a *App) copySelected() tea.Cmd {
	switch a.tab {
	case tabReceipts:
		if r, ok := a.receipts.selected(); ok {
			return a.copyText("receipt "+strconv.FormatUint(r.Seq, 10)+"'s hash", r.Hash)
		}
	case tabStreams:
		if a.streams.focusLog {
			if l, ok := a.streams.log.selected(); ok {
				return a.copyText(fmt.Sprintf("line %d", l.N+1), l.Text)
			}
			return nil
		}
		if id := a.streams.selectedID(); id != "" {
			return a.copyText("run id", id)
		}
	case tabRequests:
		if r, ok := a.requests.current(); ok {
			return a.copyText("request id", strconv.FormatUint(r.ID, 10))
		}
	case tabModules:
		if p := a.modules; p.sel < len(p.rows) {
			r := p.rows[p.sel]
			text := r.mod.Record.ID
			if r.hook != "" {
				text += " " + r.hook
			}
			return a.copyText("module/hook", text)
		}
	case tabHands:
		if r, ok := a.hands.current(); ok {
			return a.copyText("hands root", r.Root)
		}
	}
	return nil
}

// pagerDoneMsg is the pager's exit.
type pagerDoneMsg struct{ err error }

// pagerFileMsg is a file written for the pager.
type pagerFileMsg struct {
	path string
	err  error
}

// openPager shows the selected run's whole stream, or the selected
// receipt or request as JSON, in $PAGER (less when unset). The text is
// written to a private file first, off the UI goroutine, each line
// escaped as the console draws it: a pager gets no raw hook bytes.
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
	return func() tea.Msg {
		f, err := os.CreateTemp("", "warden-pager-*.txt") // 0600
		if err != nil {
			return pagerFileMsg{err: err}
		}
		err = write(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(f.Name())
		}
		return pagerFileMsg{path: f.Name(), err: err}
	}
}

// pager runs $PAGER on a written file and removes the file after.
func (a *App) pager(m pagerFileMsg) tea.Cmd {
	if m.err != nil {
		a.sh.setStatus("cannot write the text for the pager: "+OneLine(m.err.Error()), true)
		return nil
	}
	name := os.Getenv("PAGER")
	args := strings.Fields(name)
	if len(args) == 0 {
		args = []string{"less"}
	}
	c := exec.Command(args[0], append(args[1:], m.path)...)
	c.Env = append(os.Environ(), "LESSSECURE=1")
	return tea.ExecProcess(c, func(err error) tea.Msg {
		os.Remove(m.path)
		return pagerDoneMsg{err}
	})
}

// writeStream writes a run's stored lines, a page at a time, escaped.
func writeStream(e engine.Facade, run string, w io.Writer) error {
	m, err := e.StreamInfo(run)
	if err != nil {
		return err
	}
	for from := m.First; from < m.Lines; {
		lines, err := e.StreamLines(run, from, 5000)
		if err != nil {
			return err
		}
		if len(lines) == 0 {
			break
		}
		for _, l := range lines {
			if _, err := fmt.Fprintf(w, "%7d %-7s %s\n", l.N+1, l.Level, safe(l.Text)); err != nil {
				return err
			}
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
