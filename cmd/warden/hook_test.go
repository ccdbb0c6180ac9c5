package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wardenhq/warden/engine"
)

// TestMain lets this test binary be the `warden` a hook finds first on its
// PATH (the run dir's link, or the read-only bind inside the jail), so the
// shell examples' `warden hook ...` calls reach real CLI code.
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == "hostile-hook" {
		os.Exit(hostileHook(os.Args[1:]))
	}
	if filepath.Base(os.Args[0]) == "warden" && len(os.Args) == 2 && os.Args[1] == floodVerb {
		os.Exit(floodFrames()) // the hook of BenchmarkServeFloodPeakRSS
	}
	if filepath.Base(os.Args[0]) == "warden" {
		a := &app{stdout: os.Stdout, stderr: os.Stderr, stdin: os.Stdin}
		os.Exit(a.run(os.Args[1:]))
	}
	// Child processes that are this test binary (wardenLink) would each
	// sleep a second at exit under -race (GORACE's atexit_sleep_ms).
	if os.Getenv("GORACE") == "" {
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	code := m.Run()
	if hookBin != "" {
		os.RemoveAll(filepath.Dir(hookBin)) // wardenHookBinary's build
	}
	os.Exit(code)
}

// example copies an example module to a private dir under the user's
// cache: module admission refuses code under world-writable ancestors, and
// the checkout may well be under /tmp.
func example(t testing.TB, name string) string {
	t.Helper()
	src, err := filepath.Abs(filepath.Join("..", "..", "examples", "modules", name))
	if err != nil {
		t.Fatal(err)
	}
	base, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(base, 0o700)
	dir, err := os.MkdirTemp(base, "warden-example-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	dst := filepath.Join(dir, name)
	if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("copy %s: %v: %s", name, err, out)
	}
	return dst
}

func needBwrap(t testing.TB) {
	if _, err := os.Stat("/usr/bin/bwrap"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("bubblewrap is missing in CI: the test command installs it (apt-get install bubblewrap)")
		}
		t.Skip("bubblewrap is not installed: apt-get install bubblewrap")
	}
}

func TestModuleVerbs(t *testing.T) {
	c := newCLI(t)
	hello := example(t, "hello")
	if r := c.ok("module", "add", hello); !strings.Contains(r.stdout, "module hello 1.0.0 added") {
		t.Fatalf("add: %s", r)
	}
	var mods []engine.Module
	c.json(0, &mods, "module", "list")
	if len(mods) != 1 || mods[0].Record.ID != "hello" || mods[0].Manifest == nil {
		t.Fatalf("list: %+v", mods)
	}
	if r := c.ok("module", "show", "hello"); !strings.Contains(r.stdout, "hook greet") || !strings.Contains(r.stdout, "target: string") {
		t.Errorf("show: %s", r)
	}
	// A relative path is refused by admission and nothing is registered.
	if r := c.run("module", "add", "examples/modules/hello"); r.code != 1 || !strings.Contains(r.stderr, "relative") {
		t.Errorf("relative path: %s", r)
	}
	c.ok("module", "remove", "hello")
	if r := c.run("module", "show", "hello"); r.code != 1 || !strings.Contains(r.stderr, "warden module add") {
		t.Errorf("show after remove: %s", r)
	}
}

func TestHookRunJailedExample(t *testing.T) {
	needBwrap(t)
	c := newCLI(t)
	c.ok("module", "add", example(t, "hello"))
	r := c.run("hook", "run", "hello", "greet", "--input", "target=world")
	if r.code != 0 {
		t.Fatalf("run: %s", r)
	}
	for _, want := range []string{"greet starting in /module", "greeting word: Hello", "stored a fresh visit_token", "no operator attached"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stream lacks %q:\n%s", want, r.stdout)
		}
	}
	if !strings.Contains(r.stderr, "(jail bwrap)") || !strings.Contains(r.stderr, "succeeded") {
		t.Errorf("summary: %s", r.stderr)
	}
	var runs []engine.RunRecord
	c.json(0, &runs, "hook", "runs")
	if len(runs) != 1 || runs[0].JailMode != "bwrap" || runs[0].Status != "succeeded" {
		t.Fatalf("runs: %+v", runs)
	}
	// The stream is read back from storage.
	logs := c.ok("hook", "logs", runs[0].ID)
	if !strings.Contains(logs.stdout, "greeting word: Hello") {
		t.Errorf("logs: %s", logs)
	}
	var lj struct {
		Lines []struct{ Level, Text string }
	}
	c.json(0, &lj, "hook", "logs", runs[0].ID)
	if len(lj.Lines) == 0 {
		t.Fatal("logs --json has no lines")
	}
	// The hook's secret is listed by name; its value never reaches output.
	if r := c.ok("secrets", "list", "hello"); strings.TrimSpace(r.stdout) != "visit_token" {
		t.Errorf("secrets list: %s", r)
	}
}

func TestHookRunJailOffIsRecorded(t *testing.T) {
	c := newCLI(t)
	c.ok("module", "add", example(t, "hello"))
	var o engine.Outcome
	c.json(0, &o, "hook", "run", "hello", "greet", "--input", "target=x", "--jail=off")
	if o.Run.JailMode != "off" || !o.OK() {
		t.Fatalf("outcome: %+v", o.Run)
	}
	var rs []engine.Receipt
	c.json(0, &rs, "receipts", "list", "--kind", "hook.")
	for _, r := range rs {
		var d map[string]any
		json.Unmarshal(r.Details, &d)
		if d["jail"] != "off" {
			t.Errorf("receipt %d does not record jail off: %s", r.Seq, r.Details)
		}
	}
	if len(rs) != 2 {
		t.Fatalf("want start and end receipts, got %d", len(rs))
	}
}

func TestHookRunFailureExitsOne(t *testing.T) {
	c := newCLI(t)
	c.ok("module", "add", example(t, "hello"))
	// A missing, unknown or malformed input is the caller's mistake, a
	// usage error (exit 2) as README says, refused before anything runs.
	if r := c.run("hook", "run", "hello", "greet", "--jail=off"); r.code != 2 || !strings.Contains(r.stderr, `input "target" missing`) || !strings.Contains(r.stderr, "usage: warden hook run") {
		t.Errorf("missing input: %s", r)
	}
	if r := c.run("hook", "run", "hello", "greet", "--input", "target=x", "--input", "nope=1", "--jail=off"); r.code != 2 || !strings.Contains(r.stderr, `unknown input "nope"`) {
		t.Errorf("unknown input: %s", r)
	}
	if r := c.run("receipts", "list", "--kind", "hook.start"); !strings.Contains(r.stdout+r.stderr, "no receipts") && strings.Contains(r.stdout, "hook.start") {
		t.Errorf("a refused input started a run: %s", r)
	}
	if r := c.run("hook", "run", "hello", "nosuch", "--jail=off"); r.code != 1 || !strings.Contains(r.stderr, "greet") {
		t.Errorf("unknown hook: %s", r)
	}
	if r := c.run("hook", "run", "hello", "greet", "--jail=chroot"); r.code != 2 {
		t.Errorf("bad jail flag: %s", r)
	}
}

func TestHookPlan(t *testing.T) {
	c := newCLI(t)
	c.ok("module", "add", example(t, "hello"))
	r := c.ok("hook", "plan", "hello", "greet")
	for _, want := range []string{"/module", "/run/warden", "/opt/warden/bin/warden", "required", "tmpfs", "network: none",
		"limits: memory 512MiB, pids 256, cpu 1, tmp 64MiB, run_dir 16MiB"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("plan lacks %q:\n%s", want, r.stdout)
		}
	}
	var hp engine.HookPlan
	c.json(0, &hp, "hook", "plan", "hello", "greet")
	if hp.Plan == nil || len(hp.Plan.Rows) == 0 || hp.Network {
		t.Fatalf("plan json: %+v", hp)
	}
}

// The egress example: its plan shows the proxy and its list; the policy
// takes names (and refuses an IP literal, naming the entry), and shows
// them.
func TestEgressExamplePlanAndPolicy(t *testing.T) {
	c := newCLI(t)
	c.ok("module", "add", example(t, "ghstars"))
	r := c.ok("hook", "plan", "ghstars", "stars")
	for _, want := range []string{"network: egress proxy", "the hook declares: api.github.com:443", "allows: nothing yet"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("plan lacks %q:\n%s", want, r.stdout)
		}
	}
	var hp engine.HookPlan
	c.json(0, &hp, "hook", "plan", "ghstars", "stars")
	if hp.NetworkMode != "egress" || len(hp.Destinations) != 1 || hp.Destinations[0] != "api.github.com:443" {
		t.Errorf("plan json: mode %q destinations %v", hp.NetworkMode, hp.Destinations)
	}

	bad := c.run("perms", "policy", "set", "module:ghstars", "--revision", "0", "--network", "api.github.com:443,203.0.113.7:443")
	if bad.code != 1 || !strings.Contains(bad.stderr, "entry 1") || !strings.Contains(bad.stderr, "write ip:203.0.113.7:443") {
		t.Errorf("an IP literal in the list: %s", bad)
	}
	c.ok("perms", "policy", "set", "module:ghstars", "--revision", "0", "--network", "API.github.com:443, *.githubusercontent.com:443")
	r = c.ok("perms", "policy", "show", "module:ghstars")
	for _, want := range []string{"2 destinations, through the egress proxy", "allow api.github.com:443", "allow *.githubusercontent.com:443"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("policy show lacks %q:\n%s", want, r.stdout)
		}
	}
	r = c.ok("hook", "plan", "ghstars", "stars")
	if !strings.Contains(r.stdout, "allows: api.github.com:443, *.githubusercontent.com:443") {
		t.Errorf("plan does not show the policy's names:\n%s", r.stdout)
	}
	c.ok("perms", "policy", "set", "module:ghstars", "--revision", "0", "--network", "true")
	if r = c.ok("perms", "policy", "show", "module:ghstars"); !strings.Contains(r.stdout, "TRUE: the host's whole network") {
		t.Errorf("network true is not loud:\n%s", r.stdout)
	}
}
