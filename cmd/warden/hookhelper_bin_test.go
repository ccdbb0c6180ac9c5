package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestHookHelperLogStdin: `producer | warden hook log --stdin` sends one
// stream line per input line, as stdout would, over one connection.
func TestHookHelperLogStdin(t *testing.T) {
	_, f := startFakeRun(t)
	in := "one\ntwo\r\n\nbad \xff byte\nlast without newline"
	if code, out, errs := helper(t, in, "log", "--stdin", "--level", "warn"); code != 0 || out != "" || errs != "" {
		t.Fatalf("exit %d %q %q", code, out, errs)
	}
	f.mu.Lock()
	logs, hellos := slices.Clone(f.logs), f.hellos
	f.logs, f.hellos = nil, 0
	f.mu.Unlock()
	want := []string{"warn: one", "warn: two", "warn: ", "warn: bad \uFFFD byte", "warn: last without newline"}
	if !slices.Equal(logs, want) || hellos != 1 {
		t.Fatalf("logs %q over %d connections, want %q over 1", logs, hellos, want)
	}

	// Many lines, and one longer than a frame may carry: all of it
	// arrives, in order, the long line in pieces.
	var big strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&big, "item %d\n", i)
	}
	long := strings.Repeat("é", 300_000) // 600,000 bytes
	big.WriteString(long + "\nafter\n")
	if code, _, errs := helper(t, big.String(), "log", "--stdin"); code != 0 {
		t.Fatalf("big: exit %d %s", code, errs)
	}
	f.mu.Lock()
	logs, hellos = slices.Clone(f.logs), f.hellos
	f.mu.Unlock()
	if hellos != 1 || len(logs) < 5002 || logs[0] != "info: item 0" || logs[4999] != "info: item 4999" || logs[len(logs)-1] != "info: after" {
		t.Fatalf("%d lines over %d connections; first %q, last %q", len(logs), hellos, logs[0], logs[len(logs)-1])
	}
	var joined strings.Builder
	for _, l := range logs[5000 : len(logs)-1] {
		joined.WriteString(strings.TrimPrefix(l, "info: "))
	}
	if joined.String() != long {
		t.Errorf("the long line came back as %d bytes in %d pieces, not the %d bytes sent", joined.Len(), len(logs)-5001, len(long))
	}

	for _, argv := range [][]string{{"log", "--stdin", "words"}, {"log", "--stdin", "--level", "loud"}} {
		if code, _, errs := helper(t, "x\n", argv...); code != 2 || errs == "" {
			t.Errorf("%v: exit %d %q, want a usage error", argv, code, errs)
		}
	}
}

var (
	hookBinOnce sync.Once
	hookBin     string
	hookBinErr  error
)

// wardenHookBinary builds cmd/warden-hook once per test process.
func wardenHookBinary(t testing.TB) string {
	t.Helper()
	hookBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "warden-hook-bin-")
		if err != nil {
			hookBinErr = err
			return
		}
		os.Chmod(dir, 0o755)
		hookBin = filepath.Join(dir, "warden-hook")
		cmd := exec.Command(goTool(t), "build", "-o", hookBin, "../warden-hook")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0") // as the README builds it
		if out, err := cmd.CombinedOutput(); err != nil {
			hookBinErr = fmt.Errorf("go build warden-hook: %v\n%s", err, out)
		}
	})
	if hookBinErr != nil {
		t.Fatal(hookBinErr)
	}
	return hookBin
}

// TestWardenHookAnswersAsWarden: the small helper and the full binary
// give a hook the same stdout, stderr and exit code for the same argv:
// verbs, errors, usage, help and --json alike; and the engine gets the
// same stream lines from both (warden-hook sends a plain `hook log`
// without its parser: plainlog.go).
func TestWardenHookAnswersAsWarden(t *testing.T) {
	bin := wardenHookBinary(t)
	_, f := startFakeRun(t)
	takeLogs := func() []string {
		f.mu.Lock()
		defer f.mu.Unlock()
		logs := f.logs
		f.logs = nil
		return logs
	}
	cases := [][]string{
		{"hook", "context"},
		{"hook", "context", "inputs.target"},
		{"hook", "context", "inputs.missing", "--json"},
		{"hook", "log", "hello", "there"},
		{"hook", "log", "--level", "success", "done"},
		{"hook", "log", "--level=debug", "tab\there", "", "x"},
		{"hook", "log", "--level", "warn"},
		{"hook", "log", "bad \xff byte"},
		{"hook", "log", "help"},
		{"hook", "log", "--level", "loud", "x"},
		{"hook", "log"},
		{"hook", "log", "--bogus", "x"},
		{"--json", "hook", "log", "--level", "loud", "x"},
		{"hook", "secret", "set", "tok", "s3cret"},
		{"hook", "secret", "get", "tok"},
		{"hook", "secret", "get", "tok", "--json"},
		{"hook", "config", "get", "unset", "--json"},
		{"hook", "config", "set", "nope", "v"},
		{"hook", "secret", "delete", "tok"},
		{"hook", "secret", "frob"},
		{"hook", "secret", "gte", "tok"},
		{"hook", "call", "echo", "args", `[1, {"a": [true, null]}]`},
		{"hook", "call", "teleport", "now"},
		{"hook", "call", "echo", "args", "{"},
		{"hook", "confirm", "Store it?"},
		{"hook", "confirm", "Deny me?"},
		{"--json", "hook", "confirm", "Deny me?"},
		{"hook", "confirm", "End the run?"},
		{"hook", "result", `{"nope":1}`},
		{"hook", "result", "[]"},
		{"--version"},
		{"-v"},
		// warden-hook parses argv itself (hookcli.Execute), not with
		// cobra: flags anywhere, = forms, --, bad values, shorthands.
		{"hook", "log", "--level"},
		{"hook", "log", "-x", "y"},
		{"hook", "log", "-hx"},
		{"hook", "log", "--level=warn", "a", "b"},
		{"hook", "log", "a", "--level", "error"},
		{"hook", "log", "--", "--level", "x"},
		{"hook", "log", "--stdin", "x"},
		{"hook", "log", "---x"},
		{"hook", "context", "--json=maybe"},
		{"hook", "context", "a", "b"},
		{"--data-dir", "/nowhere", "hook", "context", "inputs.target"},
		{"hook", "--json", "confirm", "Deny me?"},
		{"hook", "call", "x"},
		{"hook", "secret"},
		{"hook", "secret", "get"},
		{"hook", "secret", "GTE", "x"},
		{"hook", "confirm", "-h"},
		{"hook", "egress-bridge", "--help"},
	}
	for _, verb := range []string{"context", "log", "secret", "secret get", "config set", "call", "confirm", "result"} {
		cases = append(cases, append(append([]string{"hook"}, strings.Fields(verb)...), "--help"))
	}
	cases = append(cases, []string{"hook", "call", "-h"})
	for _, argv := range cases {
		var out, errb bytes.Buffer
		a := &app{stdout: &out, stderr: &errb, stdin: strings.NewReader("")}
		takeLogs()
		wantCode := a.run(argv)
		wantLogs := takeLogs()
		cmd := exec.Command(bin, argv...)
		var gotOut, gotErr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &gotOut, &gotErr
		err := cmd.Run()
		gotCode := 0
		if ee, ok := err.(*exec.ExitError); ok {
			gotCode = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if gotCode != wantCode || gotOut.String() != out.String() || gotErr.String() != errb.String() {
			t.Errorf("%q:\nwarden:      exit %d, stdout %q, stderr %q\nwarden-hook: exit %d, stdout %q, stderr %q",
				argv, wantCode, out.String(), errb.String(), gotCode, gotOut.String(), gotErr.String())
		}
		if gotLogs := takeLogs(); !slices.Equal(gotLogs, wantLogs) {
			t.Errorf("%q: the engine got %q from warden, %q from warden-hook", argv, wantLogs, gotLogs)
		}
	}
	// Outside a hook, both say so, as a usage error.
	cmd := exec.Command(bin, "hook", "log", "x")
	cmd.Env = append(os.Environ(), "WARDEN_SOCKET=", "WARDEN_TOKEN=")
	cmd.Stdout = io.Discard
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Run(); err == nil || cmd.ProcessState.ExitCode() != 2 || !strings.Contains(errb.String(), "not running inside a warden hook") {
		t.Errorf("outside a hook: %v %q", err, errb.String())
	}
}
