package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/wardenhq/warden/engine/broker"
	"github.com/wardenhq/warden/engine/hookcli"
	"github.com/wardenhq/warden/engine/sdk/protocol"
)

const helperToken = "cap_" + "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

// fakeRun is a broker.Handler with an in-memory store.
type fakeRun struct {
	mu      sync.Mutex
	hellos  int // connections that said hello with the right token
	logs    []string
	values  map[string]string
	calls   []string
	outputs map[string]json.RawMessage
}

func (f *fakeRun) Authorize(tok string) error {
	if tok != helperToken {
		return errors.New("no")
	}
	f.mu.Lock()
	f.hellos++
	f.mu.Unlock()
	return nil
}

func (f *fakeRun) Context() *protocol.Context {
	return &protocol.Context{Protocol: 1, Run: "run-1", Module: "hello", Hook: "greet",
		Inputs:       map[string]any{"target": "world", "n": 3.0},
		Declared:     protocol.Declared{Secrets: []string{"tok"}, Config: []string{"word"}},
		Capabilities: map[string][]string{"operator": {"confirm"}}}
}

func (f *fakeRun) Activity() {}

func (f *fakeRun) Log(level, message string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.logs = append(f.logs, level+": "+message)
}

func (f *fakeRun) Store(_ context.Context, op *protocol.StoreOp) (json.RawMessage, *protocol.Error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var name, value string
	json.Unmarshal(op.Args[0], &name)
	if op.Method != "get" && name != "tok" && name != "word" {
		return nil, &protocol.Error{Code: protocol.CodeUndeclaredName, Message: "module hello did not declare " + name}
	}
	key := op.Store + "/" + name
	switch op.Method {
	case "get":
		v, ok := f.values[key]
		if !ok {
			return nil, nil
		}
		b, _ := json.Marshal(v)
		return b, nil
	case "set":
		json.Unmarshal(op.Args[1], &value)
		f.values[key] = value
	case "delete":
		delete(f.values, key)
	}
	return nil, nil
}

func (f *fakeRun) Call(_ context.Context, c *protocol.Call) (json.RawMessage, *protocol.Error) {
	b, _ := json.Marshal(append([]json.RawMessage{}, c.Args...))
	f.mu.Lock()
	f.calls = append(f.calls, c.Capability+"."+c.Method+string(b))
	f.mu.Unlock()
	switch c.Capability + "." + c.Method {
	case "operator.confirm":
		// The question picks the fake operator's answer.
		switch string(b) {
		case `["Deny me?"]`:
			return json.RawMessage("false"), nil
		case `["End the run?"]`:
			return nil, &protocol.Error{Code: protocol.CodeRunEnded, Message: "operator.confirm: the run ended"}
		}
		return json.RawMessage("true"), nil
	case "echo.args":
		return b, nil
	}
	return nil, &protocol.Error{Code: protocol.CodeUnknownCapability, Message: `no capability "` + c.Capability + `"`}
}

func (f *fakeRun) Result(outputs map[string]json.RawMessage) *protocol.Error {
	if _, ok := outputs["greeting"]; !ok {
		return &protocol.Error{Code: protocol.CodeBadFrame, Message: "result refused: missing output greeting"}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.outputs = outputs
	return nil
}

func (f *fakeRun) HookError(protocol.ErrorBody) {}

func startFakeRun(t *testing.T) (*broker.Broker, *fakeRun) {
	t.Helper()
	dir, err := os.MkdirTemp("", "wh")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	f := &fakeRun{values: map[string]string{}}
	b, err := broker.Start(dir, f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	t.Setenv("WARDEN_SOCKET", b.SocketPath())
	t.Setenv("WARDEN_TOKEN", helperToken)
	return b, f
}

// helper runs `warden hook ARGS...` with stdin and returns exit code,
// stdout and stderr.
func helper(t *testing.T, stdin string, argv ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	a := &app{stdout: &out, stderr: &errb, stdin: strings.NewReader(stdin)}
	code := a.run(append([]string{"hook"}, argv...))
	return code, out.String(), errb.String()
}

func TestHookHelperOutsideAHook(t *testing.T) {
	t.Setenv("WARDEN_SOCKET", "")
	t.Setenv("WARDEN_TOKEN", "")
	for _, argv := range [][]string{{"context"}, {"log", "hi"}, {"secret", "get", "tok"}, {"call", "operator", "confirm", `["x"]`}, {"result", "{}"}} {
		code, out, errs := helper(t, "", argv...)
		if code != 2 || out != "" || !strings.Contains(errs, "not running inside a warden hook (WARDEN_SOCKET/WARDEN_TOKEN unset)") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", argv, code, out, errs)
		}
	}
}

func TestHookHelperContext(t *testing.T) {
	startFakeRun(t)
	code, out, errs := helper(t, "", "context")
	if code != 0 || errs != "" {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.HasSuffix(out, "}\n") || strings.Count(out, "\n") != 1 {
		t.Fatalf("want one line of JSON, got %q", out)
	}
	f, err := protocol.Decode([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := f.(*protocol.Context); !ok || c.Module != "hello" || c.Inputs["target"] != "world" {
		t.Fatalf("context %+v", f)
	}
	for _, tc := range []struct{ key, json, want string }{
		{"inputs.target", "", "world\n"},
		{"inputs.target", "--json", "\"world\"\n"},
		{"inputs.n", "", "3\n"},
		{"declared.secrets", "", "[\"tok\"]\n"},
		{"inputs.missing", "", ""},
		{"inputs.missing", "--json", "null\n"},
		{"module.deeper", "", ""},
	} {
		argv := []string{"context", tc.key}
		if tc.json != "" {
			argv = append(argv, tc.json)
		}
		code, out, errs := helper(t, "", argv...)
		if code != 0 || out != tc.want {
			t.Errorf("%v: exit %d, stdout %q (want %q), stderr %q", argv, code, out, tc.want, errs)
		}
	}
}

func TestHookHelperLog(t *testing.T) {
	_, f := startFakeRun(t)
	if code, _, errs := helper(t, "", "log", "hello", "there"); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if code, _, errs := helper(t, "", "log", "--level", "success", "done"); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if code, _, errs := helper(t, "", "log", "--level", "loud", "x"); code != 2 || !strings.Contains(errs, "--level") {
		t.Fatalf("bad level: exit %d: %s", code, errs)
	}
	if code, _, _ := helper(t, "", "log"); code != 2 {
		t.Fatalf("no message: exit %d", code)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if want := []string{"info: hello there", "success: done"}; !slices.Equal(f.logs, want) {
		t.Fatalf("logs %q", f.logs)
	}
}

func TestHookHelperStores(t *testing.T) {
	_, f := startFakeRun(t)
	run := func(stdin string, argv ...string) (int, string, string) { return helper(t, stdin, argv...) }
	if code, out, _ := run("", "secret", "get", "tok"); code != 0 || out != "" {
		t.Fatalf("unset get: %d %q", code, out)
	}
	if code, out, _ := run("", "secret", "get", "tok", "--json"); code != 0 || out != "null\n" {
		t.Fatalf("unset get --json: %d %q", code, out)
	}
	if code, _, errs := run("", "secret", "set", "tok", "s3cret"); code != 0 {
		t.Fatalf("set: %d %s", code, errs)
	}
	if code, out, _ := run("", "secret", "get", "tok"); code != 0 || out != "s3cret\n" {
		t.Fatalf("get: %d %q", code, out)
	}
	if code, _, errs := run("line one\nline two\n\n", "secret", "set", "tok", "-"); code != 0 {
		t.Fatalf("set -: %d %s", code, errs)
	}
	if code, out, _ := run("", "secret", "get", "tok", "--json"); code != 0 || out != "\"line one\\nline two\\n\"\n" {
		t.Fatalf("get --json after stdin set: %d %q", code, out)
	}
	if code, _, errs := run("Howdy", "config", "set", "word", "-"); code != 0 {
		t.Fatalf("config set: %d %s", code, errs)
	}
	if code, out, _ := run("", "config", "get", "word"); code != 0 || out != "Howdy\n" {
		t.Fatalf("config get: %d %q", code, out)
	}
	if code, _, _ := run("", "config", "delete", "word"); code != 0 {
		t.Fatalf("config delete: %d", code)
	}
	if code, out, _ := run("", "config", "get", "word"); code != 0 || out != "" {
		t.Fatalf("config get after delete: %d %q", code, out)
	}
	code, out, errs := run("", "secret", "set", "nope", "x")
	if code != 1 || out != "" || !strings.HasPrefix(errs, "warden: undeclared_name: module hello did not declare nope") {
		t.Fatalf("undeclared: %d %q %q", code, out, errs)
	}
	// Usage.
	for _, argv := range [][]string{{"secret", "set", "tok"}, {"secret", "get"}, {"secret", "frob", "x"}, {"config", "delete", "a", "b"}} {
		if code, _, _ := run("", argv...); code != 2 {
			t.Errorf("%v: exit %d, want 2", argv, code)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.values["config/word"]; ok || f.values["secrets/tok"] != "line one\nline two\n" {
		t.Fatalf("values %q", f.values)
	}
}

func TestHookHelperCall(t *testing.T) {
	_, f := startFakeRun(t)
	if code, out, errs := helper(t, "", "call", "operator", "confirm", `["Greet world?"]`); code != 0 || out != "true\n" {
		t.Fatalf("confirm: %d %q %s", code, out, errs)
	}
	if code, out, _ := helper(t, "", "call", "echo", "args"); code != 0 || out != "[]\n" {
		t.Fatalf("no args: %d %q", code, out)
	}
	if code, out, _ := helper(t, "", "call", "echo", "args", ` [1, {"a": [true, null]}] `); code != 0 || out != "[1,{\"a\":[true,null]}]\n" {
		t.Fatalf("echo: %d %q", code, out)
	}
	code, _, errs := helper(t, "", "call", "teleport", "now")
	if code != 1 || !strings.HasPrefix(errs, `warden: unknown_capability: no capability "teleport"`) {
		t.Fatalf("unknown capability: %d %q", code, errs)
	}
	for _, bad := range []string{`{"a":1}`, `null`, `[1,`, `"x"`, "[\"\xff\"]"} {
		if code, _, errs := helper(t, "", "call", "echo", "args", bad); code != 2 || errs == "" {
			t.Errorf("args %q: exit %d %q", bad, code, errs)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls[0] != `operator.confirm["Greet world?"]` {
		t.Fatalf("calls %q", f.calls)
	}
}

func TestHookHelperResult(t *testing.T) {
	_, f := startFakeRun(t)
	code, _, errs := helper(t, "", "result", `{"nope":1}`)
	if code != 1 || !strings.HasPrefix(errs, "warden: bad_frame: result refused: missing output greeting") {
		t.Fatalf("refused: %d %q", code, errs)
	}
	for _, bad := range []string{`[]`, `null`, `{`, ``} {
		if code, _, _ := helper(t, "", "result", bad); code != 2 {
			t.Errorf("result %q: exit %d", bad, code)
		}
	}
	if code, _, errs := helper(t, "", "result", `{"greeting":"Hello, world","confirmed":true}`); code != 0 {
		t.Fatalf("result: %d %s", code, errs)
	}
	code, _, errs = helper(t, "", "result", `{"greeting":"again"}`)
	if code != 1 || !strings.HasPrefix(errs, "warden: result_already_set: ") {
		t.Fatalf("second result: %d %q", code, errs)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if string(f.outputs["greeting"]) != `"Hello, world"` || string(f.outputs["confirmed"]) != "true" {
		t.Fatalf("outputs %s", f.outputs)
	}
}

func TestHookHelperAfterRunEnded(t *testing.T) {
	b, _ := startFakeRun(t)
	b.End()
	for _, argv := range [][]string{{"context"}, {"log", "late"}, {"secret", "get", "tok"}} {
		code, _, errs := helper(t, "", argv...)
		if code != 1 || !strings.HasPrefix(errs, "warden: run_ended: ") {
			t.Errorf("%v: exit %d %q", argv, code, errs)
		}
	}
	// The global --json does not move a helper's error off stderr.
	code, out, errs := helper(t, "", "--json", "log", "late")
	if code != 1 || out != "" || !strings.HasPrefix(errs, "warden: run_ended: ") {
		t.Errorf("--json log: exit %d %q %q", code, out, errs)
	}
}

func TestHookHelperWrongToken(t *testing.T) {
	startFakeRun(t)
	t.Setenv("WARDEN_TOKEN", "cap_wrong")
	code, _, errs := helper(t, "", "context")
	if code != 1 || !strings.HasPrefix(errs, "warden: unauthorized") {
		t.Fatalf("exit %d %q", code, errs)
	}
}

func TestHookHelperHelpHasExamples(t *testing.T) {
	var walk func(path string, cs []*hookcli.Command)
	walk = func(path string, cs []*hookcli.Command) {
		for _, c := range cs {
			if c.Run != nil && c.Example == "" {
				t.Errorf("%s %s has no example", path, c.Name())
			}
			walk(path+" "+c.Name(), c.Subs)
		}
	}
	walk("warden hook", hookcli.Commands(&hookcli.Env{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}, Stdin: strings.NewReader("")}))
}

// TestHookHelperConfirm: `hook confirm`'s exit status is the answer, so a
// "no" is not success and an engine failure is not a "no".
func TestHookHelperConfirm(t *testing.T) {
	startFakeRun(t)
	if code, out, errs := helper(t, "", "confirm", "Store it?"); code != 0 || out != "" {
		t.Fatalf("yes: exit %d %q %s, want 0 and no output", code, out, errs)
	}
	if code, out, errs := helper(t, "", "confirm", "Deny me?"); code != 1 || out != "" || errs != "" {
		t.Fatalf("no: exit %d %q %q, want 1 and nothing printed", code, out, errs)
	}
	if code, out, _ := helper(t, "", "--json", "confirm", "Deny me?"); code != 1 || out != "{\"confirmed\":false}\n" {
		t.Fatalf("no --json: exit %d %q", code, out)
	}
	if code, out, _ := helper(t, "", "--json", "confirm", "Store it?"); code != 0 || out != "{\"confirmed\":true}\n" {
		t.Fatalf("yes --json: exit %d %q", code, out)
	}
	if code, _, errs := helper(t, "", "confirm", "End the run?"); code != 3 || !strings.HasPrefix(errs, "warden: run_ended:") {
		t.Fatalf("engine threw: exit %d %q, want 3", code, errs)
	}
	for _, argv := range [][]string{{"confirm"}, {"confirm", "a", "b"}} {
		if code, _, _ := helper(t, "", argv...); code != 2 {
			t.Errorf("%v: exit %d, want 2", argv, code)
		}
	}
	t.Setenv("WARDEN_SOCKET", "")
	if code, _, _ := helper(t, "", "confirm", "Store it?"); code != 2 {
		t.Errorf("outside a hook: exit %d, want 2", code)
	}
}

// TestHookHelperConfirmInShellIf: the idiom of the README, in a real sh
// running the real binary: the branch taken follows the operator.
func TestHookHelperConfirmInShellIf(t *testing.T) {
	_, f := startFakeRun(t)
	bin := wardenLink(t, t.TempDir())
	script := `if warden hook confirm "$1"; then warden hook log yes; else warden hook log "no $?"; fi`
	for _, tc := range []struct{ question, want string }{
		{"Store it?", "info: yes"},
		{"Deny me?", "info: no 1"},
	} {
		cmd := exec.Command("sh", "-c", script, "hook", tc.question)
		cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%q: the hook script: %v %s", tc.question, err, out)
		}
		f.mu.Lock()
		logs := slices.Clone(f.logs)
		f.logs = nil
		f.mu.Unlock()
		if len(logs) != 1 || logs[0] != tc.want {
			t.Errorf("%q: the hook logged %q, want %q", tc.question, logs, tc.want)
		}
	}
}
