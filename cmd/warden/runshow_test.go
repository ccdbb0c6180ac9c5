package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/wardenhq/warden/engine"
)

// A past run's outputs can be read without --json: `hook runs RUN` shows
// the run and the outputs its result carried, escaped (a hook's text never
// drives the terminal), and --json the record exact.
func TestHookRunsShowsARunsOutputs(t *testing.T) {
	c := newCLI(t)
	base := privateDir(t, "warden-runshow-")
	c.ok("module", "add", mcpModule(t, base, "addr", "get", "    outputs: {address: string, n: number}\n",
		`warden hook result '{"address":"10.0.0.7\u001b[31m","n":3}'
`))
	var o engine.Outcome
	c.json(0, &o, "hook", "run", "addr", "get", "--jail=off")
	id := o.Run.ID
	r := c.ok("hook", "runs", id)
	for _, want := range []string{"run      " + id, "status   succeeded", "hook     addr/get", "outputs\n", `  address = "10.0.0.7\u001b[31m"`, "  n = 3", "warden hook logs " + id} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("hook runs %s lacks %q:\n%s", id, want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "\x1b") {
		t.Errorf("hook runs RUN printed an escape raw:\n%q", r.stdout)
	}
	var rec engine.RunRecord
	c.json(0, &rec, "hook", "runs", id)
	var outs map[string]any
	if json.Unmarshal(rec.Outputs, &outs); outs["address"] != "10.0.0.7\x1b[31m" || outs["n"] != 3.0 {
		t.Errorf("hook runs RUN --json outputs: %s", rec.Outputs)
	}
	if r := c.run("hook", "runs", "20261129T140932-000000"); r.code != 1 || !strings.Contains(r.stderr, "no run") {
		t.Errorf("an unknown run: %s", r)
	}
	if r := c.run("hook", "runs", "nope"); r.code != 2 {
		t.Errorf("a malformed run id: %s", r)
	}
	if r := c.run("hook", "runs", id, "--limit", "3"); r.code != 2 {
		t.Errorf("RUN with --limit: %s", r)
	}
}
