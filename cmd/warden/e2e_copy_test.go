package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestConsoleCopyInTmux: c in the real console, in a real tmux left at
// its defaults (set-clipboard external, allow-passthrough off: an
// application's OSC 52 is dropped), lands in tmux's paste buffer, through
// `tmux load-buffer -w`. With no tmux the console can run, it writes the
// OSC 52 itself: under the defaults the status line names the setting
// that passes it on, and once that is set, the copy arrives.
func TestConsoleCopyInTmux(t *testing.T) {
	needTool(t, "tmux", "apt-get install tmux")
	buffer := func(t *testing.T, tm *tmuxConsole) string {
		t.Helper()
		out, err := tm.tmux("show-buffer")
		if err != nil {
			return "" // "no buffers"
		}
		return string(out)
	}
	copyGreet := func(t *testing.T, tm *tmuxConsole) {
		t.Helper()
		tm.keys(t, "4")
		tm.waitRe(t, `▸\s+greet`, 10*time.Second)
		tm.keys(t, "c")
	}

	t.Run("load-buffer", func(t *testing.T) {
		base, bin, data := consoleHome(t, "warden-e2e-copy-", "hello")
		tm := startConsole(t, base, bin, data, "")
		tm.waitFor(t, "1 Streams", 10*time.Second)
		copyGreet(t, tm)
		tm.waitFor(t, "copied module/hook to tmux's paste buffer and the clipboard (11 bytes)", 10*time.Second)
		if got := buffer(t, tm); got != "hello greet" {
			t.Errorf("tmux's buffer holds %q, want %q", got, "hello greet")
		}
	})

	t.Run("osc52", func(t *testing.T) {
		base, bin, data := consoleHome(t, "warden-e2e-copy-", "hello")
		// The console finds no tmux to run: it writes OSC 52 to its pane.
		tm := startConsole(t, base, bin, data, "", "PATH="+filepath.Join(base, "no-tools"))
		tm.waitFor(t, "1 Streams", 10*time.Second)
		copyGreet(t, tm)
		screen := tm.waitFor(t, "copied module/hook with OSC 52 (11 bytes) · tmux needs `set -s set-clipboard on`", 10*time.Second)
		if got := buffer(t, tm); got != "" {
			t.Errorf("tmux at its defaults kept %q from an application's OSC 52", got)
		}
		if strings.Contains(screen, "52;c;") {
			t.Errorf("the sequence reached the screen as text:\n%s", screen)
		}
		if out, err := tm.tmux("set", "-s", "set-clipboard", "on"); err != nil {
			t.Fatalf("set-clipboard on: %v: %s", err, out)
		}
		tm.keys(t, "c")
		deadline := time.Now().Add(10 * time.Second)
		for buffer(t, tm) != "hello greet" && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if got := buffer(t, tm); got != "hello greet" {
			t.Errorf("with set-clipboard on, tmux's buffer holds %q, want %q\n%s", got, "hello greet", tm.capture(t))
		}
	})
}
