package main

// A scripted model server: it speaks the streamed Anthropic Messages API
// (what Claude Code calls) and the streamed OpenAI Responses API (what
// Codex calls), and answers from a script of tool calls, one step per
// tool result the agent has sent back. Real agents run against it, so
// what the agent does in warden's jail is the test's choice.

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// agentStep is one answer of the script: a shell command for the agent's
// shell tool, or (Command "") a final text.
type agentStep struct {
	Command string
	Text    string
	// Tool, for the Responses API: a call of this function of namespace
	// Namespace (an MCP server's tools are "mcp__<server>") with Args.
	Tool, Namespace, Args string
}

// modelServer serves the script on 127.0.0.1.
type modelServer struct {
	URL  string
	Port int

	script []agentStep
	mu     sync.Mutex
	calls  []string // METHOD PATH of every request
	auth   []string // the x-api-key and Authorization headers it got
	bodies [][]byte // every request's body
	seen   []string // every tool result the agent sent back, in order
}

func newModelServer(t *testing.T, script []agentStep) *modelServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ms := &modelServer{script: script, Port: ln.Addr().(*net.TCPAddr).Port}
	ms.URL = fmt.Sprintf("http://localhost:%d", ms.Port)
	srv := &http.Server{Handler: ms}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ms
}

func (ms *modelServer) Calls() []string {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	return append([]string(nil), ms.calls...)
}

// SawKey: some request carried key (as x-api-key or a bearer token).
func (ms *modelServer) SawKey(key string) bool {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	for _, a := range ms.auth {
		if a == key || a == "Bearer "+key {
			return true
		}
	}
	return false
}

// ToolResults are the tool outputs the agent sent back, in order.
func (ms *modelServer) ToolResults() []string {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	return append([]string(nil), ms.seen...)
}

func (ms *modelServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ms.mu.Lock()
	ms.calls = append(ms.calls, r.Method+" "+r.URL.Path)
	ms.auth = append(ms.auth, r.Header.Get("X-Api-Key"), r.Header.Get("Authorization"))
	ms.mu.Unlock()
	body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	ms.mu.Lock()
	ms.bodies = append(ms.bodies, body)
	ms.mu.Unlock()
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/v1/messages"):
		ms.messages(w, body)
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/v1/responses"):
		ms.responses(w, body)
	default:
		w.WriteHeader(http.StatusOK)
	}
}

// step is the script's answer to a conversation that has sent back n
// tool results.
func (ms *modelServer) step(results []string) agentStep {
	ms.mu.Lock()
	if len(results) > len(ms.seen) {
		ms.seen = append([]string(nil), results...)
	}
	ms.mu.Unlock()
	if len(results) < len(ms.script) {
		return ms.script[len(results)]
	}
	return agentStep{Text: "done"}
}

// messages answers POST /v1/messages (stream: true) from the script.
func (ms *modelServer) messages(w http.ResponseWriter, body []byte) {
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	json.Unmarshal(body, &req)
	var results []string
	for _, m := range req.Messages {
		var blocks []struct {
			Type    string          `json:"type"`
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(m.Content, &blocks) != nil {
			continue
		}
		for _, b := range blocks {
			if b.Type == "tool_result" {
				results = append(results, string(b.Content))
			}
		}
	}
	s := ms.step(results)
	w.Header().Set("Content-Type", "text/event-stream")
	ev := func(name string, v any) {
		raw, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, raw)
	}
	ev("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": fmt.Sprintf("msg_%d", len(results)), "type": "message", "role": "assistant",
		"model": req.Model, "content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": map[string]int{"input_tokens": 10, "output_tokens": 1}}})
	stop := "end_turn"
	if s.Command != "" || s.Tool != "" {
		stop = "tool_use"
		name, input := "Bash", s.Args
		if s.Tool != "" {
			name = s.Tool // an MCP tool: mcp__<server>__<tool>
		} else {
			raw, _ := json.Marshal(map[string]string{"command": s.Command, "description": "scripted step"})
			input = string(raw)
		}
		ev("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_%d", len(results)), "name": name, "input": map[string]any{}}})
		ev("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": input}})
	} else {
		ev("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		ev("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": s.Text}})
	}
	ev("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	ev("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]int{"output_tokens": 5}})
	ev("message_stop", map[string]any{"type": "message_stop"})
}

// responses answers POST /v1/responses (stream: true) from the script,
// with the shell tool Codex offers (exec_command, {"cmd": ...}).
func (ms *modelServer) responses(w http.ResponseWriter, body []byte) {
	var req struct {
		Model string            `json:"model"`
		Input []json.RawMessage `json:"input"`
	}
	json.Unmarshal(body, &req)
	var results []string
	for _, item := range req.Input {
		var it struct {
			Type   string          `json:"type"`
			Output json.RawMessage `json:"output"`
		}
		if json.Unmarshal(item, &it) == nil && it.Type == "function_call_output" {
			results = append(results, string(it.Output))
		}
	}
	s := ms.step(results)
	w.Header().Set("Content-Type", "text/event-stream")
	seq := 0
	ev := func(v map[string]any) {
		v["sequence_number"] = seq
		seq++
		raw, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", v["type"], raw)
	}
	id := fmt.Sprintf("resp_%d", len(results))
	resp := map[string]any{"id": id, "object": "response", "model": req.Model, "status": "in_progress", "output": []any{}}
	ev(map[string]any{"type": "response.created", "response": resp})
	var item map[string]any
	if s.Tool != "" {
		item = map[string]any{"type": "function_call", "id": "fc_" + id, "call_id": "call_" + id, "name": s.Tool, "arguments": s.Args, "status": "completed"}
		if s.Namespace != "" {
			item["namespace"] = s.Namespace
		}
	} else if s.Command != "" {
		args, _ := json.Marshal(map[string]string{"cmd": s.Command})
		item = map[string]any{"type": "function_call", "id": "fc_" + id, "call_id": "call_" + id, "name": "exec_command", "arguments": string(args), "status": "completed"}
	} else {
		item = map[string]any{"type": "message", "id": "msg_" + id, "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": s.Text, "annotations": []any{}}}}
	}
	ev(map[string]any{"type": "response.output_item.added", "output_index": 0, "item": item})
	if s.Command == "" && s.Tool == "" {
		ev(map[string]any{"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "item_id": "msg_" + id, "delta": s.Text})
	}
	ev(map[string]any{"type": "response.output_item.done", "output_index": 0, "item": item})
	resp["status"] = "completed"
	resp["output"] = []any{item}
	resp["usage"] = map[string]any{"input_tokens": 10, "output_tokens": 5, "total_tokens": 15, "input_tokens_details": map[string]int{"cached_tokens": 0}, "output_tokens_details": map[string]int{"reasoning_tokens": 0}}
	ev(map[string]any{"type": "response.completed", "response": resp})
}
