package main

import (
	"context"
	"os/exec"
	"strconv"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkMCPCall: an MCP tool call of a no-op hook the client may run
// without asking (an approve-always rule for the tool), end to end from
// the SDK's client through a real `warden mcp serve`, against `warden
// hook run` of the same hook; both jailed, both on the data dir `warden
// serve` holds. Goal: the MCP path costs at most 1.2x the CLI path.
func BenchmarkMCPCall(b *testing.B) {
	env := newMCPEnv(b)
	env.attach()
	cs := env.connect("bench-agent")
	ctx := context.Background()
	ch := callAsync(ctx, cs, &mcp.CallToolParams{Name: "noop__nothing", Arguments: map[string]any{}})
	req := env.pendingFor("mcp:bench-agent", "noop__nothing")
	env.warden("perms", "approve-always", "--tool", strconv.FormatUint(req.ID, 10))
	if res := wait(b, ch); res.IsError {
		b.Fatal(resultText(res))
	}
	env.detachOperator() // no request may be needed from here on

	b.Run("mcp", func(b *testing.B) {
		for b.Loop() {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "noop__nothing", Arguments: map[string]any{}})
			if err != nil || res.IsError {
				b.Fatalf("%v %v", err, res)
			}
		}
	})
	b.Run("cli", func(b *testing.B) {
		for b.Loop() {
			if out, err := exec.Command(env.bin, "--data-dir", env.c.dir, "hook", "run", "noop", "nothing").CombinedOutput(); err != nil {
				b.Fatalf("%v %s", err, out)
			}
		}
	})
}
