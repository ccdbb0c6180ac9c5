package tui

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/wardenhq/warden/engine/termsafe"
)

// c copies to the clipboard of the terminal the console is drawn on. The
// text is the console's to give (an id, a hash, a hook's stream line):
// it travels base64-encoded inside an OSC 52 sequence warden builds, or
// on tmux's stdin, so nothing in it can act on a terminal.
//
// Where it goes:
//   - an SSH session (Options.Copy set): the sequence goes down the
//     session, to the operator's terminal, wrapped (ForTerminal) when the
//     client says it runs in tmux or screen (its TERM, or TMUX or STY
//     sent with SendEnv), with a note of the tmux setting it needs;
//   - a local console inside tmux ($TMUX): `tmux load-buffer -w -`, as
//     Neovim's clipboard provider does there. tmux keeps an application's
//     OSC 52 only with `set-clipboard on` and a DCS passthrough only with
//     `allow-passthrough on`, and neither is tmux's default; load-buffer
//     -w (tmux 3.2 and later) needs neither: the text becomes tmux's paste
//     buffer and tmux sends it to its own terminal's clipboard. When that
//     fails (an older tmux, no tmux on PATH), the sequence is written both
//     plain and wrapped in tmux's passthrough, so either setting carries
//     it, and the status line names the setting;
//   - a local console inside GNU screen ($STY): the sequence, and again
//     wrapped in screen's DCS passthrough, in pieces screen accepts;
//   - else: the sequence as it is.

// screenChunk is the most of a sequence one screen DCS string carries
// (screen caps a string at 768 bytes).
const screenChunk = 512

// tmuxTimeout bounds `tmux load-buffer` (a tmux server that does not
// answer must not leave a copy pending).
const tmuxTimeout = 3 * time.Second

// clipboardSequence is what to write to the terminal to put text on its
// clipboard, for the multiplexer getenv says the console runs in.
func clipboardSequence(text string, getenv func(string) string) string {
	seq, _ := ForTerminal(ansi.SetSystemClipboard(text), getenv)
	return seq
}

// What tmux needs to pass an application's OSC 52 on, short enough to
// be read in an 80-column status line: tmuxNote when the terminal is
// tmux, maybeTmuxNote when it may be tmux or screen.
const (
	tmuxNote      = "tmux needs `set -s set-clipboard on` (or `set -g allow-passthrough on`)"
	maybeTmuxNote = "in tmux, needs `set -s set-clipboard on`"
)

// ForTerminal wraps an OSC 52 sequence for the multiplexer getenv says
// the terminal runs in, and says what that multiplexer needs to pass it
// on ("" outside one). Each form is one a multiplexer that does not
// know it drops: tmux ignores screen's DCS, screen an OSC 52. The tmux
// passthrough is sent only when tmux is certain (TMUX, TERM tmux*):
// screen would hand its "tmux;" to the terminal as text.
func ForTerminal(seq string, getenv func(string) string) (out, note string) {
	term := getenv("TERM")
	switch {
	case getenv("TMUX") != "" || strings.HasPrefix(term, "tmux"):
		// Plain for `set-clipboard on` (tmux keeps a paste buffer too),
		// wrapped for `allow-passthrough on`.
		return seq + ansi.TmuxPassthrough(seq), tmuxNote
	case getenv("STY") != "" || strings.HasPrefix(term, "screen"):
		// screen's TERM is tmux's default TERM too: plain for tmux.
		return seq + ansi.ScreenPassthrough(seq, screenChunk), maybeTmuxNote
	}
	return seq, ""
}

// tmuxLoadBuffer gives text to the tmux server the console runs in
// ($TMUX names it) as its paste buffer, and has tmux send it on to its
// terminal's clipboard (-w).
func tmuxLoadBuffer(ctx context.Context, text string) error {
	cmd := exec.CommandContext(ctx, "tmux", "load-buffer", "-w", "-")
	cmd.Stdin = strings.NewReader(text)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		if msg := OneLine(strings.TrimSpace(out.String())); msg != "" {
			return fmt.Errorf("%v: %s", err, msg)
		}
		return err
	}
	return nil
}

// localClipboard is how the local console reaches its terminal's
// clipboard; tests give their own getenv, tmux and terminal.
type localClipboard struct {
	getenv func(string) string
	tmux   func(ctx context.Context, text string) error
	term   io.Writer
}

func defaultClipboard() localClipboard {
	return localClipboard{getenv: os.Getenv, tmux: tmuxLoadBuffer, term: os.Stdout}
}

// copiedMsg is a copy through tmux, done off the UI goroutine: err is
// tmux's refusal (the sequence is then written instead).
type copiedMsg struct {
	what, text string
	err        error
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

// copyText puts text on the clipboard (see above) and says so. The text
// is what the screen shows: a hook's control bytes escaped, never raw, so
// that pasting a copied line cannot end a shell's bracketed paste or run
// what follows a carriage return.
func (a *App) copyText(what, text string) tea.Cmd {
	if text == "" {
		return nil
	}
	text = termsafe.Text(text)
	if a.sh.opts.Copy != nil {
		a.sh.opts.Copy(ansi.SetSystemClipboard(text))
		msg := fmt.Sprintf("copied %s to the clipboard (%d bytes)", what, len(text))
		if a.sh.opts.CopyNote != "" {
			msg = fmt.Sprintf("copied %s (%d bytes) · %s", what, len(text), a.sh.opts.CopyNote)
		}
		a.sh.setStatus(msg, false)
		return nil
	}
	clip := a.clip
	if clip.getenv("TMUX") == "" {
		io.WriteString(clip.term, clipboardSequence(text, clip.getenv))
		a.sh.setStatus(fmt.Sprintf("copied %s to the clipboard (%d bytes)", what, len(text)), false)
		return nil
	}
	ctx := a.sh.context()
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(ctx, tmuxTimeout)
		defer cancel()
		return copiedMsg{what: what, text: text, err: clip.tmux(ctx, text)}
	}
}

// copied ends a copy through tmux: done, or written as a sequence with
// the tmux setting that passes it on.
func (a *App) copied(m copiedMsg) {
	if m.err == nil {
		a.sh.setStatus(fmt.Sprintf("copied %s to tmux's paste buffer and the clipboard (%d bytes)", m.what, len(m.text)), false)
		return
	}
	io.WriteString(a.clip.term, clipboardSequence(m.text, a.clip.getenv))
	a.sh.setStatus(fmt.Sprintf("copied %s with OSC 52 (%d bytes) · %s in ~/.tmux.conf: `tmux load-buffer -w` failed (%v)",
		m.what, len(m.text), tmuxNote, m.err), true)
}
