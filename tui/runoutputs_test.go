package tui

import (
	"strings"
	"testing"
)

// A finished run's outputs show in its stream's title, escaped: they were
// only in `hook runs --json`.
func TestStreamsShowsARunsOutputs(t *testing.T) {
	e := newEngine(t)
	addModule(t, e, "addr", map[string]string{"get": "exec warden result address 10.0.0.7"},
		map[string]string{"get": "    outputs: {address: string}\n"})
	if o := runHook(t, e, "addr", "get"); o.Run.Status != "succeeded" {
		t.Fatalf("run: %+v", o.Run)
	}
	c := startConsoleSize(t, e, 140, 30)
	c.wait("addr/get", "outputs address=10.0.0.7")
	c.final()
}

// An output's text is escaped in the title like any hook text.
func TestStreamsOutputsEscaped(t *testing.T) {
	e := newEngine(t)
	addModule(t, e, "addr", map[string]string{"get": "exec warden result address \"$(printf 'x\\033[31my')\""},
		map[string]string{"get": "    outputs: {address: string}\n"})
	runHook(t, e, "addr", "get")
	c := startConsoleSize(t, e, 140, 30)
	c.wait("outputs address=")
	if v := c.final(); strings.Contains(v, "\x1b[31m") {
		t.Errorf("an output's escape reached the screen raw:\n%q", v)
	}
}
