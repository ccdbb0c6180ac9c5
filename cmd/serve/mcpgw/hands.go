package mcpgw

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/engine/termsafe"
)

// The hands tools act on a hands root registered with `warden hands init`,
// through the same capabilities a hook calls: the root's policy applies
// after the client's gate.

func str(desc string) *jsonschema.Schema {
	return &jsonschema.Schema{Type: "string", Description: desc}
}

func object(props map[string]*jsonschema.Schema) *jsonschema.Schema {
	req := make([]string, 0, len(props))
	for n := range props {
		req = append(req, n)
	}
	sortStrings(req)
	return &jsonschema.Schema{Type: "object", Properties: props, Required: req, AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}}}
}

func handsTools() map[string]*tool {
	root := &jsonschema.Schema{Type: "string", Pattern: "^/", Description: "the hands root, as `warden hands list` shows it"}
	defs := map[string]struct {
		desc    string
		in, out *jsonschema.Schema
	}{
		"hands_exec": {"Runs a command in a warden hands container (no network, read-only root file system, a tmpfs workspace). The root's policy, or a warden operator, decides.",
			object(map[string]*jsonschema.Schema{"root": root, "argv": {Type: "array", Items: str(""), MinItems: jsonschema.Ptr(1), Description: "the command and its arguments"}}),
			object(map[string]*jsonschema.Schema{"exit": {Type: "number"}, "stdout": str(""), "stderr": str("")})},
		"hands_read": {"Reads a file in a warden hands container's workspace. The root's policy, or a warden operator, decides.",
			object(map[string]*jsonschema.Schema{"root": root, "path": str("a path inside the container, e.g. /workspace/notes.txt")}),
			object(map[string]*jsonschema.Schema{"content": str("")})},
		"hands_write": {"Writes a file in a warden hands container's workspace; the operator sees the exact bytes. The root's policy, or a warden operator, decides.",
			object(map[string]*jsonschema.Schema{"root": root, "path": str("a path inside the container, e.g. /workspace/notes.txt"), "content": str("the file's new content")}),
			object(map[string]*jsonschema.Schema{"written": {Type: "boolean"}})},
	}
	out := map[string]*tool{}
	for name, d := range defs {
		r, err := d.in.Resolve(nil)
		if err != nil {
			panic(fmt.Sprintf("tool %s: %v", name, err)) // a programming error: the schemas are fixed
		}
		out[name] = &tool{name: name, desc: d.desc, in: d.in, out: d.out, resolved: r, print: "hands", hands: true}
	}
	return out
}

// handsCall performs a gated hands tool call.
func (g *Gateway) handsCall(ctx context.Context, call engine.MCPCall) *mcp.CallToolResult {
	raw, err := g.opts.Engine.MCPHands(ctx, g.opts.Actor, call)
	if err != nil {
		return failed(err.Error())
	}
	var structured map[string]any
	switch call.Tool {
	case "hands_exec":
		json.Unmarshal(raw, &structured)
	case "hands_read":
		var s string
		json.Unmarshal(raw, &s)
		structured = map[string]any{"content": s}
	default:
		structured = map[string]any{"written": true}
	}
	text, _ := json.Marshal(structured)
	return &mcp.CallToolResult{StructuredContent: termsafe.Value(structured), Content: []mcp.Content{&mcp.TextContent{Text: string(termsafe.JSON(text))}}}
}
