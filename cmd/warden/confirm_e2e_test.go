package main

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wardenhq/warden/cmd/serve/control"
	"github.com/wardenhq/warden/engine"
)

// TestHookConfirmShellIfFollowsOperator: a real shell hook, run by `warden
// hook run` attached to `warden serve`, asks `if warden hook confirm`; an
// operator approves from another process, then denies, and the hook takes
// the matching branch each time (a "no" is not success).
func TestHookConfirmShellIfFollowsOperator(t *testing.T) {
	c := newCLI(t)
	base := privateDir(t, "warden-confirm-")
	bin := wardenLink(t, base)
	c.ok("module", "add", mcpModule(t, base, "vault", "store", "    timeout: 1m\n",
		`if warden hook confirm "Store it?"; then warden hook log "branch: stored"; else warden hook log "branch: not stored ($?)"; fi
`))
	startServe(t, bin, c.dir)
	ctl, err := control.Dial(c.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	detach := ctl.AttachOperator() // the test is the console that answers
	defer detach()
	ctl.MCPSessions() // a round trip: serve has the attachment

	for _, tc := range []struct{ verb, want, not string }{
		{"approve", "branch: stored", "branch: not stored"},
		{"deny", "branch: not stored (1)", "branch: stored"},
	} {
		var out lockedBuffer
		run := exec.Command(bin, "--data-dir", c.dir, "hook", "run", "vault", "store", "--jail=off")
		run.Stdout, run.Stderr = &out, &out
		if err := run.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- run.Wait() }()
		var id uint64
		waitUntil(t, "the hook's confirm request", 20*time.Second, func() bool {
			rs, err := ctl.Requests(engine.RequestFilter{})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rs {
				if r.Decision == nil && r.Requester.Hook == "store" {
					id = r.ID
					return true
				}
			}
			return false
		}, out.String)
		if b, err := exec.Command(bin, "--data-dir", c.dir, "perms", tc.verb, strconv.FormatUint(id, 10)).CombinedOutput(); err != nil {
			t.Fatalf("perms %s: %v %s", tc.verb, err, b)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%s: hook run: %v\n%s", tc.verb, err, out.String())
			}
		case <-time.After(30 * time.Second):
			run.Process.Kill()
			t.Fatalf("%s: hook run still running after 30s\n%s", tc.verb, out.String())
		}
		if got := out.String(); !strings.Contains(got, tc.want) || strings.Contains(got, tc.not) {
			t.Errorf("perms %s: the hook did not take the %q branch:\n%s", tc.verb, tc.want, got)
		}
	}
}

// TestHookRunSaysWhichRequestWaits: `warden hook run … --json` with no
// terminal, attached to `warden serve` with a console attached: the
// hook's question waits for that console, and stderr says so at once,
// naming the request, where to answer it and the verb that does (before,
// it printed nothing until the request expired).
func TestHookRunSaysWhichRequestWaits(t *testing.T) {
	c := newCLI(t)
	base := privateDir(t, "warden-waits-")
	bin := wardenLink(t, base)
	c.ok("module", "add", mcpModule(t, base, "vault", "store", "    timeout: 1m\n", `warden hook confirm "Store it?" && warden hook log stored
`))
	srv := startServe(t, bin, c.dir)
	ctl, err := control.Dial(c.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	detach := ctl.AttachOperator()
	defer detach()
	ctl.MCPSessions()

	var stdout, stderr lockedBuffer
	run := exec.Command(bin, "--data-dir", c.dir, "--json", "hook", "run", "vault", "store", "--jail=off")
	run.Stdout, run.Stderr = &stdout, &stderr
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	defer run.Process.Kill()
	var id uint64
	waitUntil(t, "the notice on stderr", 20*time.Second, func() bool {
		rs, _ := ctl.Requests(engine.RequestFilter{})
		for _, r := range rs {
			if r.Decision == nil {
				id = r.ID
			}
		}
		return id != 0 && strings.Contains(stderr.String(), "waits for an operator")
	}, stderr.String)
	want := []string{"request " + strconv.FormatUint(id, 10) + " (operator.confirm) waits for an operator", "pid " + strconv.Itoa(srv.Process.Pid),
		"warden perms approve " + strconv.FormatUint(id, 10)}
	for _, w := range want {
		if !strings.Contains(stderr.String(), w) {
			t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
		}
	}
	if b, err := exec.Command(bin, "--data-dir", c.dir, "perms", "approve", strconv.FormatUint(id, 10)).CombinedOutput(); err != nil {
		t.Fatalf("perms approve: %v %s", err, b)
	}
	if err := run.Wait(); err != nil || !strings.Contains(stdout.String(), `"status": "succeeded"`) {
		t.Errorf("hook run --json after the approval: %v\n%s", err, stdout.String())
	}
}
