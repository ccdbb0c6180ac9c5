package main

import (
	"bufio"
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestMCPServeAnswersBadLines: each bad line below is answered with the
// JSON-RPC error the spec names, not by ending `warden mcp serve`, and the
// session goes on: tools/list still answers after.
func TestMCPServeAnswersBadLines(t *testing.T) {
	env := newMCPEnv(t)
	cmd := exec.Command(env.bin, "--data-dir", env.c.dir, "mcp", "serve")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
		}
	})
	lines := make(chan string, 16)
	go func() {
		r := bufio.NewReaderSize(stdout, 1<<20)
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				close(lines)
				return
			}
			lines <- l
		}
	}()
	send := func(line string) {
		t.Helper()
		if _, err := io.WriteString(stdin, line+"\n"); err != nil {
			t.Fatalf("write %.40q: %v (serve's stderr: %s)", line, err, stderr.String())
		}
	}
	type answer struct {
		ID     any             `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	next := func(what string) answer {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("after %s: serve closed its output (exit %v); stderr: %s", what, <-exited, stderr.String())
			}
			var a answer
			if err := json.Unmarshal([]byte(l), &a); err != nil {
				t.Fatalf("after %s: not JSON: %q", what, l)
			}
			return a
		case <-time.After(20 * time.Second):
			t.Fatalf("after %s: no answer in 20 s; stderr: %s", what, stderr.String())
		}
		return answer{}
	}

	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bad-lines","version":"1"}}}`)
	if a := next("initialize"); a.Error != nil || len(a.Result) == 0 {
		t.Fatalf("initialize: %+v", a)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	deep := strings.Repeat("[", 20000) + strings.Repeat("]", 20000)
	for _, c := range []struct {
		name, line string
		code       int
		id         any
	}{
		{"invalid UTF-8", "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\xff\"}", -32700, nil},
		{"not JSON", `{not json}`, -32700, nil},
		{"an empty batch", `[]`, -32600, nil},
		{"a batch", `[{"jsonrpc":"2.0","id":3,"method":"ping"}]`, -32600, nil},
		{"a bare number", `42`, -32600, nil},
		{"no method", `{"jsonrpc":"2.0","id":4}`, -32600, float64(4)},
		{"an object as id", `{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, -32600, nil},
		{"no version", `{"id":"five","method":"ping"}`, -32600, "five"},
		{"nesting 20,000 deep", deep, -32600, nil},
		{"nesting inside params", `{"jsonrpc":"2.0","id":6,"method":"ping","params":` + deep + `}`, -32600, nil},
	} {
		send(c.line)
		a := next(c.name)
		if a.Error == nil || a.Error.Code != c.code || a.ID != c.id {
			t.Errorf("%s: got %+v (error %+v), want code %d id %v", c.name, a, a.Error, c.code, c.id)
		}
	}

	send(`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`)
	a := next("tools/list")
	if a.Error != nil || !strings.Contains(string(a.Result), "echo__say") {
		t.Fatalf("tools/list after the bad lines: %+v %s", a.Error, a.Result)
	}
	select {
	case err := <-exited:
		t.Fatalf("serve exited: %v; stderr: %s", err, stderr.String())
	default:
	}
}
