package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wardenhq/warden/cmd/serve/control"
	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/engine/hands/handstest"
)

// mcpModule writes a module of one shell hook into a private dir.
func mcpModule(t testing.TB, base, id, hook, manifestHook, script string) string {
	t.Helper()
	dir := filepath.Join(base, "modules", id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	manifest := fmt.Sprintf("id: %s\nversion: 1.0.0\ndescription: Test module %s.\nhooks:\n  %s:\n    run: [./hook.sh]\n%s", id, id, hook, manifestHook)
	if err := os.WriteFile(filepath.Join(dir, "module.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hook.sh"), []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// mcpEnv is a served data dir with test modules, and an MCP client
// connected to a real `warden mcp serve` subprocess.
type mcpEnv struct {
	t        testing.TB
	c        *cli
	bin      string
	base     string
	ctl      *control.Client // a control client of the test: it plays the attached console
	detach   func()
	changed  chan struct{}
	stderr   *lockedBuffer // the last mcp serve's
	serve    *exec.Cmd     // the warden serve holding the data dir, if any
	mu       sync.Mutex
	progress []string
}

func newMCPEnv(t testing.TB) *mcpEnv { return newMCPEnvServed(t, true) }

// newMCPEnvServed is newMCPEnv; without serve, nobody holds the data dir
// until `warden mcp serve` does (connect, then dial).
func newMCPEnvServed(t testing.TB, serve bool) *mcpEnv {
	t.Helper()
	needBwrap(t)
	c := newCLI(t)
	base := privateDir(t, "warden-mcp-")
	env := &mcpEnv{t: t, c: c, bin: wardenLink(t, base), base: base, changed: make(chan struct{}, 16)}
	echo := mcpModule(t, base, "echo", "say", "    timeout: 1m\n    inputs: {word: string, times: number}\n    outputs: {said: string}\n",
		`w=$(warden hook context inputs.word)
echo "saying $w"
warden hook result "{\"said\":\"$w\"}"
`)
	noop := mcpModule(t, base, "noop", "nothing", "    timeout: 1m\n", "exit 0\n")
	slow := mcpModule(t, base, "slow", "wait", "    timeout: 2m\n    idle_timeout: 1m\n", "echo started\nexec sleep 60\n")
	for _, m := range []string{echo, noop, slow, example(t, "flood"), example(t, "hello")} {
		c.ok("module", "add", m)
	}
	if !serve {
		return env
	}
	env.serve = startServe(t, env.bin, c.dir)
	env.dial()
	return env
}

// dial attaches the test to the data dir's holder as a control client.
func (env *mcpEnv) dial() {
	t, c := env.t, env.c
	ctl, err := control.Dial(c.dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctl.Close() })
	env.ctl = ctl
}

// attach makes the test an attached operator (as a console is).
func (env *mcpEnv) attach() {
	if env.detach == nil {
		env.detach = env.ctl.AttachOperator()
		// The attachment is a one-way message: a round trip after it
		// means the server has it.
		env.ctl.MCPSessions()
	}
}

func (env *mcpEnv) detachOperator() {
	if env.detach != nil {
		env.detach()
		env.detach = nil
		env.ctl.MCPSessions()
	}
}

// connect starts `warden mcp serve` and connects the SDK's client to it.
func (env *mcpEnv) connect(name string, extra ...string) *mcp.ClientSession {
	env.t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1.0"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case env.changed <- struct{}{}:
			default:
			}
		},
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			env.mu.Lock()
			env.progress = append(env.progress, r.Params.Message)
			env.mu.Unlock()
		},
	})
	cmd := exec.Command(env.bin, append([]string{"--data-dir", env.c.dir, "mcp", "serve"}, extra...)...)
	stderr := &lockedBuffer{}
	env.stderr = stderr
	cmd.Stderr = stderr
	cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		env.t.Fatalf("connecting to warden mcp serve: %v\n%s", err, stderr.String())
	}
	env.t.Cleanup(func() { cs.Close() })
	return cs
}

// pendingFor waits for the pending request of an MCP client's call.
func (env *mcpEnv) pendingFor(subject, tool string) engine.Request {
	env.t.Helper()
	var got engine.Request
	waitUntil(env.t, "a pending request of "+subject, 15*time.Second, func() bool {
		rs, err := env.ctl.Requests(engine.RequestFilter{})
		if err != nil {
			env.t.Fatal(err)
		}
		for _, r := range rs {
			if r.Subject == subject && r.Requester.Hook == tool && r.Decision == nil {
				got = r
				return true
			}
		}
		return false
	}, func() string { return "" })
	return got
}

func (env *mcpEnv) warden(args ...string) string {
	env.t.Helper()
	out, err := exec.Command(env.bin, append([]string{"--data-dir", env.c.dir}, args...)...).CombinedOutput()
	if err != nil {
		env.t.Fatalf("warden %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (env *mcpEnv) receipts(kind string) []engine.Receipt {
	env.t.Helper()
	rs, err := env.ctl.Receipts(engine.ReceiptFilter{Kind: kind})
	if err != nil {
		env.t.Fatal(err)
	}
	return rs
}

type callResult struct {
	res *mcp.CallToolResult
	err error
}

func callAsync(ctx context.Context, cs *mcp.ClientSession, p *mcp.CallToolParams) chan callResult {
	ch := make(chan callResult, 1)
	go func() {
		r, err := cs.CallTool(ctx, p)
		ch <- callResult{r, err}
	}()
	return ch
}

func resultText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func wait(t testing.TB, ch chan callResult) *mcp.CallToolResult {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("call: %v", r.err)
		}
		return r.res
	case <-time.After(60 * time.Second):
		t.Fatal("the call did not end")
	}
	return nil
}

// TestMCPGateway drives a real `warden mcp serve` with the SDK's own
// client, on a data dir held by `warden serve`, with the test attached as
// the operator over the control socket (as a console is) and deciding
// with `warden perms` subprocesses.
func TestMCPGateway(t *testing.T) {
	env := newMCPEnv(t)
	cs := env.connect("Test Agent")
	ctx := context.Background()
	const subject = "mcp:test-agent"

	t.Run("tools and schemas", func(t *testing.T) {
		lt, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		byName := map[string]*mcp.Tool{}
		for _, tl := range lt.Tools {
			byName[tl.Name] = tl
		}
		for _, want := range []string{"echo__say", "noop__nothing", "slow__wait", "flood__lines", "hello__greet", "hands_exec", "hands_read", "hands_write"} {
			if byName[want] == nil {
				t.Fatalf("tool %s missing; tools: %v", want, lt.Tools)
			}
		}
		say := byName["echo__say"]
		if !strings.Contains(say.Description, "Test module echo.") {
			t.Errorf("description %q lacks the manifest's", say.Description)
		}
		in, _ := json.Marshal(say.InputSchema)
		var schema struct {
			Type       string                       `json:"type"`
			Properties map[string]map[string]string `json:"properties"`
			Required   []string                     `json:"required"`
		}
		json.Unmarshal(in, &schema)
		if schema.Type != "object" || schema.Properties["word"]["type"] != "string" || schema.Properties["times"]["type"] != "number" ||
			strings.Join(schema.Required, ",") != "times,word" {
			t.Errorf("echo__say input schema: %s", in)
		}
		out, _ := json.Marshal(say.OutputSchema)
		if !strings.Contains(string(out), `"said":{"type":"string"}`) {
			t.Errorf("echo__say output schema: %s", out)
		}
		if byName["noop__nothing"].OutputSchema != nil {
			t.Errorf("a hook without outputs has an output schema: %v", byName["noop__nothing"].OutputSchema)
		}
	})

	t.Run("no operator: refused at once", func(t *testing.T) {
		env.detachOperator()
		start := time.Now()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo__say", Arguments: map[string]any{"word": "hi", "times": 1}})
		if err != nil {
			t.Fatal(err)
		}
		if !res.IsError || !strings.Contains(resultText(res), "no operator is attached to answer") {
			t.Fatalf("result: error=%v %q", res.IsError, resultText(res))
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("the refusal took %s", d)
		}
		gates := env.receipts("mcp.gate")
		last := gates[len(gates)-1]
		if last.Actor != subject || detail(last, "outcome") != engine.MCPNoOperator || detail(last, "session") == "" {
			t.Errorf("gate receipt: %+v", last)
		}
	})

	t.Run("schema-invalid arguments: nothing runs", func(t *testing.T) {
		env.attach()
		starts, reqs := len(env.receipts("hook.start")), len(env.receipts("request.open"))
		for _, args := range []map[string]any{{"word": 5, "times": 1}, {"word": "x"}, {"word": "x", "times": 1, "extra": true}, {"word": strings.Repeat("x", 300<<10), "times": 1}} {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo__say", Arguments: args})
			if err != nil {
				t.Fatal(err)
			}
			if !res.IsError || !strings.Contains(resultText(res), "invalid arguments for echo__say, nothing ran") {
				t.Errorf("args %v: %q", args, resultText(res))
			}
		}
		if n := len(env.receipts("hook.start")); n != starts {
			t.Errorf("a hook started on invalid arguments")
		}
		if n := len(env.receipts("request.open")); n != reqs {
			t.Errorf("a request was opened on invalid arguments")
		}
		gates := env.receipts("mcp.gate")
		if last := gates[len(gates)-1]; detail(last, "outcome") != "invalid" {
			t.Errorf("the refusal is not receipted as invalid: %+v", last)
		}
	})

	t.Run("approved from another process", func(t *testing.T) {
		env.attach()
		ch := callAsync(ctx, cs, &mcp.CallToolParams{Name: "echo__say", Arguments: map[string]any{"word": "approved", "times": 2}})
		req := env.pendingFor(subject, "echo__say")
		if !strings.Contains(string(req.Content), `"tool":"echo__say"`) || !strings.Contains(string(req.Content), `"word":"approved"`) {
			t.Errorf("the request does not show the exact tool and arguments: %s", req.Content)
		}
		list := env.warden("perms", "list")
		if !strings.Contains(list, subject) || !strings.Contains(list, "echo__say") {
			t.Errorf("perms list does not show the call:\n%s", list)
		}
		show := env.warden("perms", "show", strconv.FormatUint(req.ID, 10))
		if !strings.Contains(show, "requester  MCP client "+subject+", tool echo__say, session mcp-") || !strings.Contains(show, `"word": "approved"`) {
			t.Errorf("perms show:\n%s", show)
		}
		env.warden("perms", "approve", strconv.FormatUint(req.ID, 10))
		res := wait(t, ch)
		if res.IsError {
			t.Fatalf("approved call failed: %s", resultText(res))
		}
		sc, _ := json.Marshal(res.StructuredContent)
		if string(sc) != `{"said":"approved"}` {
			t.Errorf("structuredContent %s", sc)
		}
		if !strings.Contains(resultText(res), "saying approved") {
			t.Errorf("the result lacks the stream's last lines: %q", resultText(res))
		}
		starts := env.receipts("hook.start")
		last := starts[len(starts)-1]
		if last.Actor != subject || detail(last, "session") == "" {
			t.Errorf("hook.start receipt does not name the MCP client and session: %+v", last)
		}
	})

	// The hook's own text (its stream's last lines) reaches the client
	// escaped, bidi overrides and isolates included, and so does
	// structuredContent, string by string: a client may print it too.
	t.Run("hostile text in the result", func(t *testing.T) {
		env.attach()
		word := "evil\u202egnp.exe\u2066x\u2069\u200b\u061c!"
		ch := callAsync(ctx, cs, &mcp.CallToolParams{Name: "echo__say", Arguments: map[string]any{"word": word, "times": 1}})
		req := env.pendingFor(subject, "echo__say")
		env.warden("perms", "approve", strconv.FormatUint(req.ID, 10))
		res := wait(t, ch)
		if res.IsError {
			t.Fatalf("approved call failed: %s", resultText(res))
		}
		txt := resultText(res)
		if strings.ContainsAny(txt, "\u202e\u2066\u2069\u200b\u061c") || !strings.Contains(txt, "saying evil␦gnp.exe␦x␦␦␦!") {
			t.Errorf("the result's text reaches the client raw: %q", txt)
		}
		if said, _ := res.StructuredContent.(map[string]any)["said"].(string); said != "evil␦gnp.exe␦x␦␦␦!" {
			t.Errorf("structuredContent said %q, want it escaped as the text is", said)
		}
	})

	t.Run("denied with a reason", func(t *testing.T) {
		env.attach()
		ch := callAsync(ctx, cs, &mcp.CallToolParams{Name: "echo__say", Arguments: map[string]any{"word": "no", "times": 1}})
		req := env.pendingFor(subject, "echo__say")
		env.warden("perms", "deny", strconv.FormatUint(req.ID, 10), "--reason", "not on a friday")
		res := wait(t, ch)
		txt := resultText(res)
		if !res.IsError || !strings.Contains(txt, "denied by local:") || !strings.Contains(txt, "not on a friday") {
			t.Fatalf("denied call: error=%v %q", res.IsError, txt)
		}
		gates := env.receipts("mcp.gate")
		if last := gates[len(gates)-1]; detail(last, "outcome") != engine.MCPDenied {
			t.Errorf("gate receipt: %+v", last)
		}
	})

	t.Run("approve-always lets the identical call through", func(t *testing.T) {
		env.attach()
		args := map[string]any{"word": "always", "times": 3}
		ch := callAsync(ctx, cs, &mcp.CallToolParams{Name: "echo__say", Arguments: args})
		req := env.pendingFor(subject, "echo__say")
		env.warden("perms", "approve-always", strconv.FormatUint(req.ID, 10))
		if res := wait(t, ch); res.IsError {
			t.Fatalf("first call: %s", resultText(res))
		}
		opened := len(env.receipts("request.open"))
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo__say", Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("second identical call: %v %v", err, res)
		}
		if n := len(env.receipts("request.open")); n != opened {
			t.Errorf("the second identical call opened a request")
		}
		// Other arguments still ask.
		ch = callAsync(ctx, cs, &mcp.CallToolParams{Name: "echo__say", Arguments: map[string]any{"word": "other", "times": 3}})
		req = env.pendingFor(subject, "echo__say")
		env.warden("perms", "approve-always", "--tool", strconv.FormatUint(req.ID, 10))
		if res := wait(t, ch); res.IsError {
			t.Fatalf("call approved for the whole tool: %s", resultText(res))
		}
		opened = len(env.receipts("request.open"))
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo__say", Arguments: map[string]any{"word": "anything", "times": 9}})
		if err != nil || res.IsError {
			t.Fatalf("call after a whole-tool rule: %v %v", err, res)
		}
		if n := len(env.receipts("request.open")); n != opened {
			t.Errorf("a call after a whole-tool rule opened a request")
		}
	})

	t.Run("cancelled call cancels the run", func(t *testing.T) {
		env.attach()
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		ch := callAsync(cctx, cs, &mcp.CallToolParams{Name: "slow__wait", Arguments: map[string]any{}})
		req := env.pendingFor(subject, "slow__wait")
		before := len(env.receipts("hook.start"))
		env.warden("perms", "approve", strconv.FormatUint(req.ID, 10))
		var run string
		waitUntil(t, "the slow run to start", 20*time.Second, func() bool {
			rs := env.receipts("hook.start")
			if len(rs) > before {
				run = detail(rs[len(rs)-1], "run")
				return true
			}
			return false
		}, func() string { return "" })
		cancel()
		<-ch
		waitUntil(t, "the run to end cancelled", 20*time.Second, func() bool {
			r, err := env.ctl.Run(run)
			return err == nil && r.Status == engine.RunCancelled
		}, func() string { r, _ := env.ctl.Run(run); return fmt.Sprintf("%+v", r) })
		ends := env.receipts("hook.end")
		found := false
		for _, r := range ends {
			if detail(r, "run") == run && detail(r, "verdict") == engine.RunCancelled && r.Actor == subject {
				found = true
			}
		}
		if !found {
			t.Errorf("no cancelled hook.end receipt by %s for run %s", subject, run)
		}
	})

	t.Run("progress from the flood example", func(t *testing.T) {
		env.attach()
		p := &mcp.CallToolParams{Name: "flood__lines", Arguments: map[string]any{}}
		p.SetProgressToken("flood-1")
		ch := callAsync(ctx, cs, p)
		req := env.pendingFor(subject, "flood__lines")
		env.warden("perms", "approve", strconv.FormatUint(req.ID, 10))
		res := wait(t, ch)
		if res.IsError {
			t.Fatalf("flood: %s", resultText(res))
		}
		env.mu.Lock()
		got := append([]string{}, env.progress...)
		env.mu.Unlock()
		if len(got) == 0 {
			t.Fatal("no progress notifications from a 200,000-line run")
		}
		if got[len(got)-1] == "" {
			t.Errorf("progress without the latest line: %q", got)
		}
	})

	t.Run("list_changed on module add and remove", func(t *testing.T) {
		for len(env.changed) > 0 {
			<-env.changed
		}
		extra := mcpModule(t, env.base, "late", "arrive", "    timeout: 1m\n", "exit 0\n")
		env.warden("module", "add", extra)
		select {
		case <-env.changed:
		case <-time.After(15 * time.Second):
			t.Fatalf("no notifications/tools/list_changed after module add; mcp serve said:\n%s", env.stderr.String())
		}
		lt, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, tl := range lt.Tools {
			found = found || tl.Name == "late__arrive"
		}
		if !found {
			t.Fatal("late__arrive not listed after module add")
		}
		env.warden("module", "remove", "late")
		select {
		case <-env.changed:
		case <-time.After(15 * time.Second):
			t.Fatal("no notifications/tools/list_changed after module remove")
		}
	})

	t.Run("policy lets a tool run without asking", func(t *testing.T) {
		env.detachOperator() // nobody to ask: only the policy can let it through
		p, _, err := env.ctl.Policy(subject)
		if err != nil {
			t.Fatal(err)
		}
		env.warden("perms", "policy", "set", subject, "--revision", strconv.FormatUint(p.Revision, 10), "--allow-tool", "noop__nothing")
		opened := len(env.receipts("request.open"))
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "noop__nothing", Arguments: map[string]any{}})
		if err != nil || res.IsError {
			t.Fatalf("allowed tool: %v %s", err, resultText(res))
		}
		if n := len(env.receipts("request.open")); n != opened {
			t.Error("a tool the policy allows opened a request")
		}
		starts := env.receipts("hook.start")
		if g := detail(starts[len(starts)-1], "gate"); !strings.Contains(g, "rule mcp.call") {
			t.Errorf("the run's receipt does not say which rule let it through: %q", g)
		}
		show := env.warden("perms", "policy", "show", subject)
		if !strings.Contains(show, `mcp.call`) || !strings.Contains(show, `"tool":"noop__nothing"`) {
			t.Errorf("policy show:\n%s", show)
		}
	})

	t.Run("sessions", func(t *testing.T) {
		ss, err := env.ctl.MCPSessions()
		if err != nil || len(ss) != 1 || ss[0].Client != subject || ss[0].Name != "Test Agent" {
			t.Fatalf("sessions: %v %+v", err, ss)
		}
		if len(env.receipts("mcp.connect")) == 0 {
			t.Error("no mcp.connect receipt")
		}
	})
}

// TestMCPRequestExpires: a call nobody decides is refused when its
// request expires, and says so.
func TestMCPRequestExpires(t *testing.T) {
	env := newMCPEnv(t)
	env.attach()
	cs := env.connect("expiry-agent", "--request-ttl", "1s")
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "noop__nothing", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(resultText(res), "the request expired after 1s") {
		t.Fatalf("expired call: error=%v %q", res.IsError, resultText(res))
	}
	gates := env.receipts("mcp.gate")
	if last := gates[len(gates)-1]; detail(last, "outcome") != engine.MCPExpired {
		t.Errorf("gate receipt: %+v", last)
	}
	if n := len(env.receipts("hook.start")); n != 0 {
		t.Errorf("%d runs started", n)
	}
}

// detail is a receipt detail as text ("" when absent).
func detail(r engine.Receipt, key string) string {
	var m map[string]any
	json.Unmarshal(r.Details, &m)
	switch v := m[key].(type) {
	case nil:
		return ""
	case string:
		return v
	default:
		return fmt.Sprint(v)
	}
}

// TestMCPHandsTools: hands_write then hands_read on a real hands root
// (access none): each call passes the MCP client's gate, then the root's
// own policy asks the operator too, as for a hook.
func TestMCPHandsTools(t *testing.T) {
	sock := handstest.Docker(t)
	env := newMCPEnv(t)
	root := filepath.Join(handstest.Base(t, sock), "hands")
	env.warden("hands", "init", "--root", root, "--engine-socket", sock, "--image", handstest.Image, "--access", "none")
	t.Cleanup(func() { exec.Command(env.bin, "--data-dir", env.c.dir, "hands", "finish", "--root", root).Run() })
	env.attach()
	cs := env.connect("hands-agent")
	ctx := context.Background()

	// approve decides the MCP gate's request, then the root's.
	approve := func(tool string) {
		req := env.pendingFor("mcp:hands-agent", tool)
		env.warden("perms", "approve", strconv.FormatUint(req.ID, 10))
		var hreq engine.Request
		waitUntil(t, "the hands root's request", 20*time.Second, func() bool {
			rs, _ := env.ctl.Requests(engine.RequestFilter{})
			for _, r := range rs {
				if r.Subject == "hands:"+root {
					hreq = r
					return true
				}
			}
			return false
		}, func() string { return "" })
		env.warden("perms", "approve", strconv.FormatUint(hreq.ID, 10))
	}
	ch := callAsync(ctx, cs, &mcp.CallToolParams{Name: "hands_write", Arguments: map[string]any{"root": root, "path": "/workspace/a.txt", "content": "from the agent"}})
	approve("hands_write")
	if res := wait(t, ch); res.IsError {
		t.Fatalf("hands_write: %s", resultText(res))
	}
	ch = callAsync(ctx, cs, &mcp.CallToolParams{Name: "hands_read", Arguments: map[string]any{"root": root, "path": "/workspace/a.txt"}})
	approve("hands_read")
	res := wait(t, ch)
	sc, _ := json.Marshal(res.StructuredContent)
	if res.IsError || string(sc) != `{"content":"from the agent"}` {
		t.Fatalf("hands_read: %v %s %s", res.IsError, sc, resultText(res))
	}
	hs := env.receipts("mcp.hands")
	if len(hs) != 2 || hs[0].Actor != "mcp:hands-agent" {
		t.Errorf("mcp.hands receipts: %+v", hs)
	}
}

// TestMCPInstallRoundTrip: `warden mcp install` for each client at its
// usual path (under a private HOME), the entry it wrote started by the
// SDK's client as the MCP client would, --dry-run changing nothing, and
// uninstall taking the entry out again.
func TestMCPInstallRoundTrip(t *testing.T) {
	c := newCLI(t)
	base := privateDir(t, "warden-mcpinstall-")
	home := filepath.Join(base, "home")
	for _, d := range []string{".config/Claude", ".cursor", ".codex"} {
		if err := os.MkdirAll(filepath.Join(home, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(home, 0o700)
	t.Setenv("HOME", home)
	t.Setenv("CODEX_HOME", "")
	// A real copy of this binary (a symlink would not be admitted).
	self, _ := os.Executable()
	bin := filepath.Join(base, "bin", "warden")
	os.MkdirAll(filepath.Dir(bin), 0o755)
	if out, err := exec.Command("cp", self, bin).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	claudeJSON := filepath.Join(home, ".claude.json")
	os.WriteFile(claudeJSON, []byte("{\n  \"theme\": \"dark\",\n  \"mcpServers\": {\n    \"other\": {\"command\": \"/usr/bin/other\", \"args\": []}\n  }\n}\n"), 0o600)
	before, _ := os.ReadFile(claudeJSON)

	paths := map[string]string{
		"claude-code":    claudeJSON,
		"claude-desktop": filepath.Join(home, ".config/Claude/claude_desktop_config.json"),
		"cursor":         filepath.Join(home, ".cursor/mcp.json"),
		"codex":          filepath.Join(home, ".codex/config.toml"),
	}
	// --dry-run: the diff, and nothing changes.
	r := c.ok("mcp", "install", "--client", "cursor", "--warden", bin, "--dry-run")
	if !strings.Contains(r.stdout, "+++ b/"+strings.TrimPrefix(paths["cursor"], "/")) || !strings.Contains(r.stdout, "dry run: nothing was changed") {
		t.Errorf("dry run: %s", r)
	}
	if fileExists(paths["cursor"]) {
		t.Fatal("--dry-run created the config")
	}
	for client, path := range paths {
		r := c.ok("mcp", "install", "--client", client, "--warden", bin)
		if !strings.Contains(r.stdout, "added \"warden\" in "+client+"'s config "+path) {
			t.Errorf("%s: %s", client, r)
		}
		b, _ := os.ReadFile(path)
		if !strings.Contains(string(b), bin) || !strings.Contains(string(b), c.dir) {
			t.Errorf("%s: config lacks the entry:\n%s", client, b)
		}
		if r := c.ok("mcp", "install", "--client", client, "--warden", bin); !strings.Contains(r.stdout, "nothing to change") {
			t.Errorf("%s: second install: %s", client, r)
		}
	}
	after, _ := os.ReadFile(claudeJSON)
	if !strings.Contains(string(after), `"other": {"command": "/usr/bin/other", "args": []}`) || !strings.Contains(string(after), `"type": "stdio"`) {
		t.Errorf("claude-code config:\n%s", after)
	}

	// The entry works: start it as Cursor would and list the tools.
	var cfg struct {
		MCPServers map[string]struct {
			Command string   `json:"command"`
			Args    []string `json:"args"`
		} `json:"mcpServers"`
	}
	b, _ := os.ReadFile(paths["cursor"])
	json.Unmarshal(b, &cfg)
	w := cfg.MCPServers["warden"]
	client := mcp.NewClient(&mcp.Implementation{Name: "cursor"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: exec.Command(w.Command, w.Args...)}, nil)
	if err != nil {
		t.Fatalf("starting the installed entry %s %v: %v", w.Command, w.Args, err)
	}
	lt, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(lt.Tools) < 3 {
		t.Errorf("tools of the installed entry: %v %v", err, lt)
	}
	cs.Close()

	// doctor names each configured client and whether its warden is admitted.
	r = c.run("doctor")
	for client := range paths {
		if !strings.Contains(r.stdout, "ok      mcp client "+client) && !strings.Contains(r.stdout, "mcp client "+client+"  ") {
			t.Errorf("doctor does not report %s:\n%s", client, r.stdout)
		}
	}
	if !strings.Contains(r.stdout, "(admitted)") {
		t.Errorf("doctor:\n%s", r.stdout)
	}
	for client, path := range paths {
		r := c.ok("mcp", "uninstall", "--client", client)
		if !strings.Contains(r.stdout, "removed \"warden\"") {
			t.Errorf("%s uninstall: %s", client, r)
		}
		b, _ := os.ReadFile(path)
		if strings.Contains(string(b), bin) {
			t.Errorf("%s: entry still there:\n%s", client, b)
		}
		if !fileExists(path + ".bak") {
			t.Errorf("%s: no backup", client)
		}
	}
	if b, _ := os.ReadFile(claudeJSON); string(b) != string(before) {
		t.Errorf("claude-code config after install+uninstall:\n%s\nwant\n%s", b, before)
	}

	// Refusals exit 1 naming the check and the fix, and change nothing.
	os.Chmod(paths["cursor"], 0o666)
	snap, _ := os.ReadFile(paths["cursor"])
	r = c.run("mcp", "install", "--client", "cursor", "--warden", bin)
	if r.code != 1 || !strings.Contains(r.stderr, "not group/world writable check") || !strings.Contains(r.stderr, "fix: chmod go-w") {
		t.Errorf("0666 config: %s", r)
	}
	if b, _ := os.ReadFile(paths["cursor"]); string(b) != string(snap) {
		t.Error("a refused install changed the file")
	}
	if strings.HasPrefix(self, "/tmp/") {
		// This test binary sits under /tmp (world-writable): not admitted.
		os.Chmod(paths["cursor"], 0o600)
		r = c.run("mcp", "install", "--client", "cursor")
		if r.code != 1 || !strings.Contains(r.stderr, "warden binary: ancestors") {
			t.Errorf("a warden binary under /tmp: %s", r)
		}
	}
	if r := c.run("mcp", "install", "--client", "vim"); r.code != 2 {
		t.Errorf("unknown client: %s", r)
	}
}

// TestMCPServeHoldsDataDir: with nobody holding the data dir, `warden mcp
// serve` holds it and serves it: a console (here the test's control
// client) and `warden perms approve` attach to it.
func TestMCPServeHoldsDataDir(t *testing.T) {
	env := newMCPEnvServed(t, false)
	cs := env.connect("held-agent")
	env.dial()
	env.attach()
	ch := callAsync(context.Background(), cs, &mcp.CallToolParams{Name: "echo__say", Arguments: map[string]any{"word": "held", "times": 1}})
	req := env.pendingFor("mcp:held-agent", "echo__say")
	env.warden("perms", "approve", strconv.FormatUint(req.ID, 10))
	res := wait(t, ch)
	sc, _ := json.Marshal(res.StructuredContent)
	if res.IsError || string(sc) != `{"said":"held"}` {
		t.Fatalf("%v %s %s", res.IsError, sc, resultText(res))
	}
	if !strings.Contains(env.stderr.String(), "mcp serve: session") {
		t.Errorf("stderr: %s", env.stderr.String())
	}
}

// TestMCPServeSurvivesHolderLeaving: when the process holding the data
// dir stops, an attached `warden mcp serve` takes the data dir over, like
// an attached console, and the MCP client's calls carry on.
func TestMCPServeSurvivesHolderLeaving(t *testing.T) {
	env := newMCPEnv(t)
	env.warden("perms", "policy", "set", "mcp:steady-agent", "--revision", "0", "--allow-tool", "noop__nothing")
	cs := env.connect("steady-agent")
	call := func() (*mcp.CallToolResult, error) {
		return cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "noop__nothing", Arguments: map[string]any{}})
	}
	if res, err := call(); err != nil || res.IsError {
		t.Fatalf("before: %v %v", err, res)
	}
	env.ctl.Close()
	env.serve.Process.Signal(syscall.SIGTERM)
	env.serve.Wait()
	var last string
	waitUntil(t, "a call after the holder left", 20*time.Second, func() bool {
		res, err := call()
		if err != nil {
			last = err.Error()
			return false
		}
		last = resultText(res)
		return !res.IsError
	}, func() string { return last + "\n" + env.stderr.String() })
	// It says what it did once it has: nobody else was left, so it holds
	// the data dir (not "taking over" before it knew).
	if !strings.Contains(env.stderr.String(), "went away; attaching to the next holder, or holding the data dir") ||
		!strings.Contains(env.stderr.String(), "holding "+env.c.dir) || strings.Contains(env.stderr.String(), "taking over") {
		t.Errorf("stderr: %s", env.stderr.String())
	}
	// The data dir is now mcp serve's: a CLI attaches to it.
	if out := env.warden("receipts", "list", "--kind", "mcp.connect"); strings.Count(out, "steady-agent") < 2 {
		t.Errorf("the session was not recorded again on the new engine:\n%s", out)
	}
}

// --dry-run for a client whose config directory does not exist yet (the
// client never ran): the diff still shows, well-formed, and says the
// real run needs the directory; the real run refuses, and neither
// creates it.
func TestMCPInstallDryRunWithoutTheClientDir(t *testing.T) {
	c := newCLI(t)
	base := privateDir(t, "warden-mcpnodir-")
	home := filepath.Join(base, "home")
	os.MkdirAll(home, 0o700)
	t.Setenv("HOME", home)
	self, _ := os.Executable()
	bin := filepath.Join(base, "bin", "warden")
	os.MkdirAll(filepath.Dir(bin), 0o755)
	if out, err := exec.Command("cp", self, bin).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	dir := filepath.Join(home, ".cursor")
	path := filepath.Join(dir, "mcp.json")

	r := c.ok("mcp", "install", "--client", "cursor", "--warden", bin, "--dry-run")
	plus := 0
	for _, l := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(l, "+") && !strings.HasPrefix(l, "+++ ") {
			plus++
		}
	}
	if plus == 0 || !strings.Contains(r.stdout, "--- /dev/null\n+++ b/"+strings.TrimPrefix(path, "/")+"\n"+fmt.Sprintf("@@ -0,0 +1,%d @@\n", plus)) {
		t.Errorf("dry run's diff header:\n%s", r)
	}
	if !strings.Contains(r.stdout, "dry run: nothing was changed\nthe real run needs the directory "+dir+", which does not exist") ||
		!strings.Contains(r.stdout, "mkdir -p -m 700 "+dir) {
		t.Errorf("dry run does not say the real run needs %s:\n%s", dir, r)
	}
	var j map[string]any
	c.json(0, &j, "mcp", "install", "--client", "cursor", "--warden", bin, "--dry-run")
	if j["missingDir"] != dir || !strings.Contains(fmt.Sprint(j["diff"]), "+++ b/") {
		t.Errorf("--json dry run: %v", j)
	}
	if r := c.run("mcp", "install", "--client", "cursor", "--warden", bin); r.code != 1 || !strings.Contains(r.stderr, "create the directory first (mkdir -p -m 700 "+dir+")") {
		t.Errorf("the real run: %s", r)
	}
	if fileExists(dir) {
		t.Error("warden created the client's directory")
	}
}
