package tui

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/charmbracelet/x/exp/teatest"

	"github.com/wardenhq/warden/engine"
)

// hostileText is what testers sent to the operator's terminal: a screen
// clear, an OSC 52 clipboard write, an OSC 0 title, a CR overwrite, NUL,
// an 8-bit CSI and a right-to-left override.
const hostileText = "before\x1b[2J\x1b]52;c;cm0gLXJmIH4=\x07\x1b]0;pwned\x07safe\rEVIL\x00nul\u009b31m\u202edone"

// hostileModule registers the module "hostile": its version sets the
// terminal's title, its description writes the clipboard and clears the
// screen, and its hook speak (this binary's `warden hostile`) puts
// hostileText in the stream, a confirm question and its failure.
func hostileModule(t *testing.T, e engine.Facade) {
	t.Helper()
	base, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(base, 0o700)
	dir := filepath.Join(base, fmt.Sprintf("warden-tui-module-%08x", rand.Uint32()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	manifest := `id: hostile
version: "1.0\e]0;pwned-by-version\a"
description: "desc \e]52;c;cm0gLXJmIH4=\a\e[2J safe\rEVIL end"
hooks:
  speak:
    run: [./speak.sh]
    requires: [operator]
`
	if err := os.WriteFile(filepath.Join(dir, "speak.sh"), []byte("#!/bin/sh\nexec warden hostile\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "module.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := e.AddModule("local:test", dir); err != nil {
		t.Fatal(err)
	}
}

// TestHostileTextIsEscapedInEveryPane drives the console through the
// Requests, Streams, Modules and Receipts panes while a hook and a module
// carry control sequences: the terminal is sent none of them (teatest's
// output is every byte the console wrote), each pane shows them escaped,
// and the module's version does not retitle the terminal.
func TestHostileTextIsEscapedInEveryPane(t *testing.T) {
	e := newEngine(t)
	hostileModule(t, e)
	c := startConsole(t, e)
	var all bytes.Buffer // every byte the console sent to the terminal
	wait := func(subs ...string) {
		t.Helper()
		var seen []byte
		teatest.WaitFor(t, c.tm.Output(), func(b []byte) bool {
			seen = append(seen, b...)
			all.Write(b)
			for _, s := range subs {
				if !bytes.Contains(seen, []byte(s)) {
					return false
				}
			}
			return true
		}, teatest.WithDuration(15*time.Second), teatest.WithCheckInterval(20*time.Millisecond))
	}
	wait("no runs yet")
	h, err := e.StartRun("local:test", engine.RunRequest{Module: "hostile", Hook: "speak", Jail: engine.JailOff})
	if err != nil {
		t.Fatal(err)
	}
	c.keys("2") // Requests: the question in the list and in the detail
	wait("1 pending", "operator.confirm: line one before␛[2J␛]52;c;", `"line one\nbefore\u001b[2J\u001b]52;c;`)
	c.keys("y")
	o := h.Wait()
	if o.Run.Status != engine.RunFailed || !strings.Contains(o.Run.Error, hostileText) {
		t.Fatalf("run %s: %q", o.Run.Status, o.Run.Error)
	}
	c.keys("1") // Streams: the lines, and the failure
	wait("before␛[2J␛]52;c;cm0gLXJmIH4=␇␛]0;pwned␇", "hook error: hostile: before␛[2J")
	c.keys("4") // Modules: the version in the styled title row
	wait("hostile 1.0␛]0;pwned-by-version␇", "desc ␛]52;c;cm0gLXJmIH4=␇␛[2J safe␍EVIL end")
	c.keys("3", "/") // Receipts: the module.add summary, and its detail
	wait("filter ›")
	c.keys("module.add", "enter")
	wait("of kind module.add")
	c.keys("enter")
	wait("module hostile 1.0␛]0;pwned-by-version␇ added")
	c.keys("esc", "4")
	wait("Modules (1)")
	view := c.final()

	for _, bad := range []string{"\x1b]", "\x07", "\x00", "\x1b[2J", "\u009b", "\u202e", "safe\rEVIL"} {
		if i := bytes.Index(all.Bytes(), []byte(bad)); i >= 0 {
			t.Errorf("the console sent %q to the terminal, at byte %d:\n%q", bad, i, all.Bytes()[max(i-80, 0):min(i+80, all.Len())])
		}
	}
	for i, r := range view {
		if r != '\n' && (r < 0x20 || (r >= 0x7f && r < 0xa0) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)) {
			t.Fatalf("the final frame holds a raw %U at byte %d:\n%q", r, i, view)
		}
	}
	if !strings.Contains(view, "hostile 1.0␛]0;pwned-by-version␇") {
		t.Errorf("the Modules tab does not show the escaped version:\n%s", view)
	}
	c.golden(view)
}
