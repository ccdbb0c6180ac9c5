package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/creack/pty"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/engine/hands"
	"github.com/wardenhq/warden/engine/perms"
	"github.com/wardenhq/warden/engine/sdk/hookkit"
)

// What testers sent to the operator's terminal: a screen clear, an OSC 52
// clipboard write, an OSC 0 title, a CR overwrite, NUL, an 8-bit CSI and a
// right-to-left override.
const (
	hostileText    = "before\x1b[2J\x1b]52;c;cm0gLXJmIH4=\x07\x1b]0;pwned\x07safe\rEVIL\x00nul\u009b31m\u202edone"
	hostileVersion = "1.0\x1b]0;pwned-by-version\x07"
	// hostileDescYAML is hostileDesc as a YAML double-quoted scalar (the
	// manifest decoder refuses NUL, so the module's text has none).
	hostileDescYAML = `"desc \e]52;c;cm0gLXJmIH4=\a\e[2J safe\rEVIL end \u202e"`
	hostileDesc     = "desc \x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J safe\rEVIL end \u202e"
)

// hostileHook is the hook of the hostile module (this test binary, run as
// hostile-hook): it puts hostileText everywhere a hook can.
func hostileHook(args []string) int {
	c, err := hookkit.Connect()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer c.Close()
	fmt.Println(hostileText) // raw on stdout: a stream line
	if err := c.Log("warn", hostileText); err != nil {
		return 1
	}
	switch args[0] {
	case "speak":
		if err := c.Config().Set("greeting", hostileText); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		ok, err := c.Confirm("line one\n" + hostileText)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		c.Logf("answer: %v", ok)
		if err := c.Result(map[string]any{"said": hostileText}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	case "fail":
		c.Fail("hostile", hostileText)
	}
	return 0
}

// hostileModule writes the module whose version and description carry
// control sequences, with the hooks speak and fail.
func hostileModule(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(privateDir(t, "warden-hostile-"), "hostile")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	manifest := `id: hostile
version: "1.0\e]0;pwned-by-version\a"
description: ` + hostileDescYAML + `
config: [greeting]
hooks:
  speak:
    run: [./speak.sh]
    requires: [operator]
    outputs: {said: string}
  fail:
    run: [./fail.sh]
`
	files := map[string]string{
		"module.yaml": manifest,
		// bash's exec -a names the process: TestMain runs hostileHook.
		"speak.sh": "#!/bin/bash\nexec -a hostile-hook warden speak\n",
		"fail.sh":  "#!/bin/bash\nexec -a hostile-hook warden fail\n",
	}
	for name, body := range files {
		mode := os.FileMode(0o755)
		if name == "module.yaml" {
			mode = 0o644
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// termQueries is what warden itself sends first on a terminal: bubbletea's
// package init asks lipgloss for the background colour, and termenv asks
// the terminal (OSC 11, then a cursor position report). ptyWarden answers
// them as a terminal would and drops them from what it returns: they are
// warden's own, sent before any hook or module text.
const termQueries = "\x1b]11;?\x1b\\\x1b[6n"

// ptyWarden runs warden with a new pseudo-terminal as its stdin, stdout,
// stderr and controlling terminal, answers a [y/N] prompt with answer,
// and returns everything the terminal was sent (the line discipline's
// "\r\n" turned back into "\n"; termQueries dropped) and the exit code.
func ptyWarden(t *testing.T, bin, data, answer string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"--data-dir", data}, args...)...)
	cmd.Env = os.Environ()
	tty, err := pty.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	var mu sync.Mutex
	var out bytes.Buffer
	read := make(chan struct{})
	go func() {
		defer close(read)
		buf := make([]byte, 4096)
		answered, queried := false, false
		for {
			n, err := tty.Read(buf)
			mu.Lock()
			out.Write(buf[:n])
			ask := !answered && bytes.Contains(out.Bytes(), []byte("[y/N] "))
			query := !queried && bytes.Contains(out.Bytes(), []byte(termQueries))
			mu.Unlock()
			if query {
				queried = true
				tty.Write([]byte("\x1b]11;rgb:0000/0000/0000\x1b\\\x1b[1;1R"))
			}
			if ask && answer != "" {
				answered = true
				tty.Write([]byte(answer + "\n"))
			}
			if err != nil { // EIO once the last holder of the terminal is gone
				return
			}
		}
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("warden %s did not finish; the terminal showed:\n%q", strings.Join(args, " "), out.String())
	}
	select {
	case <-read:
	case <-time.After(5 * time.Second):
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	return strings.ReplaceAll(strings.Replace(out.String(), termQueries, "", 1), "\r\n", "\n"), code
}

// assertTerminalSafe fails when what a terminal received holds anything
// it would act on but a line break: C0 controls (ESC, BEL, CR, NUL...),
// DEL, C1 controls, or bidi and other format characters.
func assertTerminalSafe(t *testing.T, what, s string) {
	t.Helper()
	if !utf8.ValidString(s) {
		t.Errorf("%s: the terminal got invalid UTF-8: %q", what, s)
	}
	for i, r := range s {
		if r == '\n' {
			continue
		}
		if r < 0x20 || (r >= 0x7f && r < 0xa0) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp) {
			t.Errorf("%s: a raw %U reached the terminal at byte %d:\n%q", what, r, i, s)
			return
		}
	}
}

// TestHostileTextNeverReachesTheTerminal runs every verb that shows a
// hook's or a module author's text through a real pseudo-terminal, with a
// module and hook whose text carries ESC, OSC 52, OSC 0, CR, NUL, C1 and
// bidi controls: nothing raw reaches the terminal, the text is shown
// escaped, and --json carries the exact bytes.
func TestHostileTextNeverReachesTheTerminal(t *testing.T) {
	c := newCLI(t)
	base := privateDir(t, "warden-pty-")
	bin := wardenLink(t, base)
	data := c.dir
	mod := hostileModule(t)
	seedRequests(t, c, func() perms.Op {
		op, err := perms.NewOp("hands:/srv/hands/a", perms.OpExec, []string{"printf", hostileText})
		if err != nil {
			t.Fatal(err)
		}
		return op
	}())

	type step struct {
		args    []string
		answer  string
		code    int
		escaped []string // what the terminal must show instead
	}
	steps := []step{
		{args: []string{"module", "add", mod}, escaped: []string{"1.0␛]0;pwned-by-version␇"}},
		{args: []string{"module", "list"}, escaped: []string{"1.0␛]0;pwned-by-version␇"}},
		{args: []string{"module", "show", "hostile"}, escaped: []string{"version  1.0␛]0;pwned-by-version␇", "about    desc ␛]52;c;cm0gLXJmIH4=␇␛[2J safe␍EVIL end ␦"}},
		// The hook asks; the question is escaped, on its own lines, then [y/N].
		{args: []string{"hook", "run", "hostile", "speak", "--jail=off"}, answer: "y", escaped: []string{
			"? the hook asks:\n  line one\n  before␛[2J␛]52;c;cm0gLXJmIH4=␇␛]0;pwned␇safe␍EVIL␀nul␦31m␦done\n[y/N] ",
			"info    before␛[2J␛]52;c;cm0gLXJmIH4=␇␛]0;pwned␇safe␍EVIL␀nul␦31m␦done",
			"warn    before␛[2J", "answer: true", `outputs {"said":"before\u001b[2J`}},
		{args: []string{"hook", "run", "hostile", "fail", "--jail=off"}, code: 1, escaped: []string{
			"failed in", ": the hook reported an error: hostile: before␛[2J␛]52;c;cm0gLXJmIH4=␇␛]0;pwned␇safe␍EVIL␀nul␦31m␦done"}},
		{args: []string{"hook", "runs"}, escaped: []string{"the hook reported an error: hostile: before␛[2J"}},
		{args: []string{"config", "get", "hostile", "greeting"}, escaped: []string{"before␛[2J␛]52;c;cm0gLXJmIH4=␇␛]0;pwned␇safe␍EVIL␀nul␦31m␦done\n"}},
		{args: []string{"config", "list", "hostile"}, escaped: []string{"greeting=before␛[2J"}},
		{args: []string{"receipts", "list", "--kind", "module."}, escaped: []string{"module hostile 1.0␛]0;pwned-by-version␇ added"}},
		{args: []string{"perms", "list"}, escaped: []string{`hands.exec ["printf","before\u001b[2J`}},
		{args: []string{"perms", "show", "1"}, escaped: []string{`"before\u001b[2J\u001b]52;c;cm0gLXJmIH4=\u0007`}},
	}
	for _, s := range steps {
		out, code := ptyWarden(t, bin, data, s.answer, s.args...)
		what := "warden " + strings.Join(s.args, " ")
		if code != s.code {
			t.Errorf("%s: exit %d, want %d:\n%s", what, code, s.code, out)
		}
		assertTerminalSafe(t, what, out)
		for _, want := range s.escaped {
			if !strings.Contains(out, want) {
				t.Errorf("%s: the terminal does not show %q:\n%s", what, want, out)
			}
		}
	}

	// Receipts and logs are looked up by what the runs left.
	var runs []engine.RunRecord
	c.json(0, &runs, "hook", "runs")
	var speak string
	for _, r := range runs {
		if r.Hook == "speak" {
			speak = r.ID
		}
	}
	var rs []engine.Receipt
	c.json(0, &rs, "receipts", "list", "--kind", "module.add")
	if speak == "" || len(rs) != 1 {
		t.Fatalf("runs %+v, module.add receipts %+v", runs, rs)
	}
	seq := fmt.Sprint(rs[0].Seq)
	for _, s := range []step{
		{args: []string{"hook", "logs", speak}, escaped: []string{"info    before␛[2J␛]52;c;cm0gLXJmIH4=␇␛]0;pwned␇safe␍EVIL␀nul␦31m␦done"}},
		{args: []string{"receipts", "show", seq}, escaped: []string{"summary  module hostile 1.0␛]0;pwned-by-version␇ added", `"version":"1.0\u001b]0;pwned-by-version\u0007"`}},
		// --raw refuses the terminal: exit 2, and a way forward.
		{args: []string{"hook", "logs", "--raw", speak}, code: 2, escaped: []string{"stdout is a terminal", "run.log"}},
	} {
		out, code := ptyWarden(t, bin, data, "", s.args...)
		what := "warden " + strings.Join(s.args, " ")
		if code != s.code {
			t.Errorf("%s: exit %d, want %d:\n%s", what, code, s.code, out)
		}
		assertTerminalSafe(t, what, out)
		for _, want := range s.escaped {
			if !strings.Contains(out, want) {
				t.Errorf("%s: the terminal does not show %q:\n%s", what, want, out)
			}
		}
	}

	// --json on the same terminal: safe to show, and the exact bytes.
	jsonOn := func(v any, args ...string) {
		t.Helper()
		out, code := ptyWarden(t, bin, data, "", append(args, "--json")...)
		what := "warden " + strings.Join(args, " ") + " --json"
		if code != 0 {
			t.Fatalf("%s: exit %d:\n%s", what, code, out)
		}
		assertTerminalSafe(t, what, out)
		if err := json.Unmarshal([]byte(out), v); err != nil {
			t.Fatalf("%s: not JSON (%v):\n%s", what, err, out)
		}
	}
	var logs struct{ Lines []struct{ Text string } }
	jsonOn(&logs, "hook", "logs", speak)
	var texts []string
	for _, l := range logs.Lines {
		texts = append(texts, l.Text)
	}
	if n := strings.Count(strings.Join(texts, "\n"), hostileText); n != 2 {
		t.Errorf("hook logs --json: the hostile line is exact %d times, want 2 (stdout and log):\n%q", n, texts)
	}
	var cfg struct{ Value string }
	jsonOn(&cfg, "config", "get", "hostile", "greeting")
	var m engine.Module
	jsonOn(&m, "module", "show", "hostile")
	var rec engine.Receipt
	jsonOn(&rec, "receipts", "show", seq)
	var o []engine.RunRecord
	jsonOn(&o, "hook", "runs")
	if cfg.Value != hostileText || m.Record.Version != hostileVersion || m.Record.Description != hostileDesc ||
		rec.Summary != "module hostile "+hostileVersion+" added from "+mod {
		t.Errorf("--json is not exact:\nconfig %q\nversion %q\ndescription %q\nsummary %q", cfg.Value, m.Record.Version, m.Record.Description, rec.Summary)
	}
	var failErr string
	for _, r := range o {
		if r.Hook == "fail" {
			failErr = r.Error
		}
	}
	if failErr != "the hook reported an error: hostile: "+hostileText {
		t.Errorf("hook runs --json: error %q", failErr)
	}

	// --raw into a pipe: the hook's bytes, exactly.
	cmd := exec.Command(bin, "--data-dir", data, "hook", "logs", "--raw", speak)
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("hook logs --raw into a pipe: %v", err)
	}
	if !bytes.Contains(raw, []byte(hostileText+"\n")) || bytes.Contains(raw, []byte("␛")) {
		t.Errorf("hook logs --raw is not the exact text:\n%q", raw)
	}
	if r := c.run("hook", "logs", "--raw", "--json", speak); r.code != 2 || !strings.Contains(r.stdout, "choose one") {
		t.Errorf("--raw with --json: %s", r)
	}
}

// TestRawLogsOnAFileAreExact: hook run into a file is escaped like on a
// terminal; hook logs --raw into a file is the hook's exact lines.
func TestRawLogsOnAFileAreExact(t *testing.T) {
	c := newCLI(t)
	c.ok("module", "add", hostileModule(t))
	r := c.run("hook", "run", "hostile", "speak", "--jail=off")
	if strings.Contains(r.stdout+r.stderr, "\x1b") {
		t.Errorf("hook run printed a raw ESC into a file:\n%q", r.stdout+r.stderr)
	}
	var runs []engine.RunRecord
	c.json(0, &runs, "hook", "runs")
	if len(runs) != 1 {
		t.Fatalf("runs: %+v", runs)
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "run.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a := &app{stdout: f, stderr: io.Discard, stdin: strings.NewReader("")}
	if code := a.run([]string{"--data-dir", c.dir, "hook", "logs", "--raw", runs[0].ID}); code != 0 {
		t.Fatalf("hook logs --raw > file: exit %d", code)
	}
	got, _ := os.ReadFile(f.Name())
	if n := bytes.Count(got, []byte(hostileText+"\n")); n != 2 {
		t.Errorf("the file holds the hook's exact line %d times, want 2 (stdout and log):\n%q", n, got)
	}
}

// TestHandsStatusEscapesWhatItQuotes: hands status quotes the recorded
// receipt (a file in the root) and what the engine says; a receipt or a
// container state carrying control sequences is shown escaped. (The
// verbs need a Docker Engine; this is their printer, in-process.)
func TestHandsStatusEscapesWhatItQuotes(t *testing.T) {
	var out bytes.Buffer
	a := &app{stdout: &out, stderr: io.Discard}
	a.printStatus(hands.StatusReport{
		Root: "/srv/hands/a", Phase: hands.Phase("ready" + hostileText), Engine: "ok", EngineSocket: "/run/docker.sock",
		ContainerID: "0123456789abcdef", Generation: hostileText,
		Container:  hands.ContainerStatus{State: "running" + hostileText, StartedAt: hostileText},
		Unrecorded: []string{"fedcba9876543210"},
		Drift:      []hands.Drift{{Problem: hostileText, Fix: "fix\n" + hostileText}},
	})
	assertTerminalSafe(t, "hands status", out.String())
	if !strings.Contains(out.String(), "  - "+termsafeEscaped) || !strings.Contains(out.String(), "fix: fix␊before␛[2J") {
		t.Errorf("hands status does not show the escaped text:\n%s", out.String())
	}
}

// termsafeEscaped is hostileText as the CLI shows it.
const termsafeEscaped = "before␛[2J␛]52;c;cm0gLXJmIH4=␇␛]0;pwned␇safe␍EVIL␀nul␦31m␦done"
