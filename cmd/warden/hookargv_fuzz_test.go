package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/wardenhq/warden/engine/hookcli"
)

// FuzzHelperArgvAsWarden: for any argv after `hook VERB`, warden-hook's
// own parser (hookcli.Execute) and the full binary's cobra answer with
// the same stdout, stderr and exit code. Outside a hook every verb that
// parses stops at "not running inside a warden hook", so what is
// compared is the parsing: flags, values, help, usage errors, and flags
// before a sub-verb (`secret -h get`: cobra finds the command before it
// knows -h). `hook` itself is not compared: the full binary's also has
// the operator's verbs.
func FuzzHelperArgvAsWarden(f *testing.F) {
	f.Setenv("WARDEN_SOCKET", "")
	f.Setenv("WARDEN_DIALER", "")
	f.Setenv("WARDEN_TOKEN", "")
	verbs := []string{"context", "log", "secret", "config", "call", "confirm", "result"}
	for i, seed := range []string{
		"hello there", "--level\x00success\x00done", "--level", "-x\x00y", "-hx", "--level=warn\x00a",
		"a\x00--level\x00error", "--\x00--level\x00x", "--stdin\x00x", "---x", "--json=maybe", "a\x00b",
		"get\x00tok\x00--json", "gte\x00tok", "set\x00tok\x00-", "--help", "-h", "--data-dir\x00/x\x00inputs.target",
		"--json\x00Deny me?", "echo\x00args\x00[1]", "--help=false\x00x", "-h=1", "--=x", "-",
		"-h\x00get\x00tok", "--help\x00set\x00x", "-v\x00get", "--version\x00get\x00x", "--json\x00get\x00x",
	} {
		f.Add(byte(i), seed)
	}
	f.Fuzz(func(t *testing.T, verb byte, rest string) {
		argv := []string{"hook", verbs[int(verb)%len(verbs)]}
		if rest != "" {
			argv = append(argv, strings.Split(rest, "\x00")...)
		}
		var out, errb bytes.Buffer
		a := &app{stdout: &out, stderr: &errb, stdin: strings.NewReader("")}
		wantCode := a.run(argv)
		var gotOut, gotErr bytes.Buffer
		gotCode := hookcli.Main(argv, version, strings.NewReader(""), &gotOut, &gotErr)
		if gotCode != wantCode || gotOut.String() != out.String() || gotErr.String() != errb.String() {
			t.Errorf("%q:\nwarden:      exit %d, stdout %q, stderr %q\nwarden-hook: exit %d, stdout %q, stderr %q",
				argv, wantCode, out.String(), errb.String(), gotCode, gotOut.String(), gotErr.String())
		}
	})
}
