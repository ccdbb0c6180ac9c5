package tui

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"sync"
	"testing"
)

// env is a getenv over a fixed set of variables.
func env(kv ...string) func(string) string {
	return func(k string) string {
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i] == k {
				return kv[i+1]
			}
		}
		return ""
	}
}

// TestClipboardSequenceBytes: the bytes c writes, outside a multiplexer,
// in tmux (plain for set-clipboard on, then tmux's passthrough with every
// ESC doubled, for allow-passthrough on) and in GNU screen or a TERM that
// may be either (plain, then DCS pieces a screen string holds: tmux drops
// those, and screen would print tmux's "tmux;"). A hostile text travels
// only as base64.
func TestClipboardSequenceBytes(t *testing.T) {
	text := "run \x1b]52;c;ZXZpbA==\x07 id"
	b64 := base64.StdEncoding.EncodeToString([]byte(text))
	plain := "\x1b]52;c;" + b64 + "\x07"
	wantTmux := plain + "\x1bPtmux;\x1b\x1b]52;c;" + b64 + "\x07\x1b\\"
	wantScreen := plain + "\x1bP" + plain + "\x1b\\"
	for _, c := range []struct {
		name string
		env  func(string) string
		want string
	}{
		{"no multiplexer", env("TERM", "xterm-256color"), plain},
		{"TMUX", env("TMUX", "/tmp/tmux-0/default,42,0", "STY", "1.pts", "TERM", "screen"), wantTmux},
		{"TERM tmux", env("TERM", "tmux-256color"), wantTmux},
		{"STY", env("STY", "1234.pts-0.host", "TERM", "xterm"), wantScreen},
		{"TERM screen", env("TERM", "screen-256color"), wantScreen},
	} {
		if got := clipboardSequence(text, c.env); got != c.want {
			t.Errorf("%s:\n%q\nwant\n%q", c.name, got, c.want)
		}
		_, note := ForTerminal(plain, c.env)
		if (note != "") != (c.want != plain) || (note != "" && !strings.Contains(note, "set -s set-clipboard on")) {
			t.Errorf("%s: note %q", c.name, note)
		}
	}

	// A long text in screen: pieces of at most screenChunk bytes, each
	// its own DCS string, that make up the plain sequence again.
	long := strings.Repeat("0123456789", 200)
	longPlain := "\x1b]52;c;" + base64.StdEncoding.EncodeToString([]byte(long)) + "\x07"
	seq, found := strings.CutPrefix(clipboardSequence(long, env("STY", "1234.pts-0.host")), longPlain)
	if !found {
		t.Fatalf("screen, long: the plain sequence does not come first")
	}
	body, ok := strings.CutPrefix(seq, "\x1bP")
	body, ok2 := strings.CutSuffix(body, "\x1b\\")
	if !ok || !ok2 {
		t.Fatalf("screen, long: not DCS-framed: %q…", seq[:20])
	}
	pieces := strings.Split(body, "\x1b\\\x1bP")
	if len(pieces) < 2 {
		t.Fatalf("screen, long: one piece of %d bytes", len(body))
	}
	for i, p := range pieces {
		if len(p) > screenChunk {
			t.Errorf("piece %d is %d bytes, over %d", i, len(p), screenChunk)
		}
	}
	if got := strings.Join(pieces, ""); got != longPlain {
		t.Errorf("the pieces do not make the sequence up again")
	}
}

// syncBuffer is a terminal written from the UI goroutine, read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestCopyInTmuxGoesThroughLoadBuffer: inside tmux, c hands the text to
// `tmux load-buffer -w` and writes nothing to the terminal. When tmux
// refuses, the sequence is written (plain and wrapped) and the status
// line names the tmux setting that passes it on.
func TestCopyInTmuxGoesThroughLoadBuffer(t *testing.T) {
	e := newEngine(t)
	addModule(t, e, "alpha", map[string]string{"one": "true"}, nil)
	var mu sync.Mutex
	var loaded []string
	fail := false
	term := &syncBuffer{}
	c := startConsoleWith(t, e, func(o *Options) {
		o.clip = &localClipboard{getenv: env("TMUX", "/tmp/tmux-0/default,42,0"), term: term,
			tmux: func(_ context.Context, text string) error {
				mu.Lock()
				defer mu.Unlock()
				if fail {
					return errors.New("exit status 1: unknown flag -w")
				}
				loaded = append(loaded, text)
				return nil
			}}
	})
	c.keys("4")
	c.wait("Modules (1)")
	c.keys("c")
	c.wait("copied module/hook to tmux's paste buffer and the clipboard (9 bytes)")
	if term.String() != "" {
		t.Errorf("tmux took the text, yet the terminal got %q", term.String())
	}
	mu.Lock()
	fail = true
	mu.Unlock()
	c.keys("c")
	c.wait("copied module/hook with OSC 52 (9 bytes) · tmux needs `set -s set-clipboard on`")
	c.final()
	mu.Lock()
	defer mu.Unlock()
	if len(loaded) != 1 || loaded[0] != "alpha one" {
		t.Errorf("tmux was given %q, want [\"alpha one\"]", loaded)
	}
	if want := clipboardSequence("alpha one", env("TMUX", "x")); term.String() != want {
		t.Errorf("after tmux refused, the terminal got %q, want %q", term.String(), want)
	}
}

// TestCopyEscapesHookControls: a hook's stream line holding an
// end-of-bracketed-paste and a carriage return reaches tmux's paste
// buffer escaped, as the screen shows it; raw, pasting it into a shell
// would run "id" at once.
func TestCopyEscapesHookControls(t *testing.T) {
	e := newEngine(t)
	addModule(t, e, "evil", map[string]string{"esc": `printf 'pwn \033[201~id\r done\n'`}, nil)
	runHook(t, e, "evil", "esc")
	var mu sync.Mutex
	var loaded []string
	c := startConsoleWith(t, e, func(o *Options) {
		o.clip = &localClipboard{getenv: env("TMUX", "/tmp/tmux-0/default,42,0"), term: &syncBuffer{},
			tmux: func(_ context.Context, text string) error {
				mu.Lock()
				defer mu.Unlock()
				loaded = append(loaded, text)
				return nil
			}}
	})
	c.wait("pwn")
	c.keys("right", "c")
	c.wait("copied line 1 to tmux's paste buffer")
	c.final()
	mu.Lock()
	defer mu.Unlock()
	if len(loaded) != 1 {
		t.Fatalf("%d copies through tmux, want 1", len(loaded))
	}
	for _, s := range loaded {
		if strings.ContainsAny(s, "\x1b\r") || !strings.Contains(s, "pwn ") || !strings.Contains(s, "id") {
			t.Errorf("tmux's paste buffer got %q: want the line with its controls escaped", s)
		}
	}
}
