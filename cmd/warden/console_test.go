package main

import (
	"os"
	"strings"
	"testing"
)

// `warden` with no verb opens the console only on a terminal; otherwise it
// prints the help and exits 2, without opening (creating) the data dir.
func TestConsoleNeedsATerminal(t *testing.T) {
	c := newCLI(t)
	r := c.run()
	if r.code != 2 || r.stdout != "" || !strings.Contains(r.stderr, "needs a terminal") || !strings.Contains(r.stderr, "Available Commands") {
		t.Errorf("warden with no verb and no terminal: %s", r)
	}
	for _, args := range [][]string{{"--theme", "neon"}, {"--jail", "maybe"}} {
		r := c.run(args...)
		if r.code != 2 || !strings.Contains(r.stderr, "want") {
			t.Errorf("warden %s: want a usage error, got %s", strings.Join(args, " "), r)
		}
	}
	r = c.run("--theme", "light", "bogus")
	if r.code != 2 || !strings.Contains(r.stderr, "unknown command") {
		t.Errorf("warden bogus: %s", r)
	}
	if _, err := os.Stat(c.dir); err == nil {
		t.Error("the data dir was created")
	}
}
