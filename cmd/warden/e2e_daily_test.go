package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wardenhq/warden/storage"
)

// TestConsoleDailyE2E drives the real console in tmux through what daily
// use trips on: a second request arriving while the cursor rests on a
// decided one (toast, 2, y answers the new one), then x and q, which ask
// first and say what they cancel.
func TestConsoleDailyE2E(t *testing.T) {
	needTool(t, "tmux", "apt-get install tmux")
	needBwrap(t)
	base, bin, data := consoleHome(t, "warden-e2e-daily-", "hello", "tick")
	tm := startConsole(t, base, bin, data, "")
	tm.waitFor(t, "1 Streams", 10*time.Second)

	// A CLI run (attached to the console's engine) asks; the console
	// answers it.
	cliRun := func(target string) *exec.Cmd {
		c := exec.Command(bin, "--data-dir", data, "hook", "run", "hello", "greet", "--input", "target="+target)
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill() })
		return c
	}
	one := cliRun("one")
	tm.waitFor(t, "request 1 · press 2 to answer · hello/greet", 30*time.Second)
	tm.keys(t, "2")
	tm.waitFor(t, "operator.confirm: Greet one?", 10*time.Second)
	tm.keys(t, "y")
	tm.waitFor(t, "request 1: approve-once", 10*time.Second)
	if err := one.Wait(); err != nil {
		t.Fatalf("run one: %v", err)
	}
	// The cursor rests on request 1, decided. A new question: the toast,
	// then 2 lands on it and y answers it, not "already decided".
	tm.keys(t, "1")
	two := cliRun("two")
	tm.waitFor(t, "request 2 · press 2 to answer · hello/greet", 30*time.Second)
	tm.keys(t, "2")
	tm.waitRe(t, `▸#2\s+pending`, 10*time.Second)
	tm.keys(t, "y")
	tm.waitFor(t, "request 2: approve-once", 10*time.Second)
	if err := two.Wait(); err != nil {
		t.Fatalf("run two: %v", err)
	}
	// A third question, answered where its run's lines are: Streams,
	// the newest run (on top), y.
	tm.keys(t, "1")
	three := cliRun("three")
	tm.waitFor(t, "request 3 · press 2 to answer", 30*time.Second)
	tm.keys(t, "g")
	tm.waitFor(t, "⚠ request 3 asks: operator.confirm: Greet three? · y approve · n deny", 10*time.Second)
	tm.keys(t, "y")
	tm.waitFor(t, "request 3: approve-once", 10*time.Second)
	if err := three.Wait(); err != nil {
		t.Fatalf("run three: %v", err)
	}
	tm.waitRe(t, `request 3 \(operator\.confirm .*\): approve-once by loc`, 10*time.Second)
	var reqs []storage.RequestRecord
	out, err := exec.Command(bin, "--data-dir", data, "perms", "list", "--all", "--json").Output()
	if err != nil || json.Unmarshal(out, &reqs) != nil || len(reqs) != 3 {
		t.Fatalf("perms list: %v %s", err, out)
	}
	for _, r := range reqs {
		if r.Decision == nil || r.Decision.Verdict != "approve-once" {
			t.Errorf("request %d: %+v", r.ID, r.Decision)
		}
	}

	// x asks before it cancels, naming the run; y cancels it. Enter on a
	// hook without inputs asks before it starts one.
	startTick := func() {
		tm.keys(t, "4")
		tm.waitFor(t, "Modules (2)", 10*time.Second)
		tm.moveTo(t, "the tick hook", func(s string) bool { return strings.Contains(s, "▸   tick ") })
		tm.waitRe(t, `▸\s+tick\s+`, 10*time.Second)
		tm.keys(t, "Enter")
		tm.waitFor(t, "run tick/tick now, jailed (bwrap)? [y/N]", 10*time.Second)
		tm.keys(t, "y")
		tm.waitFor(t, "tick/tick · running", 20*time.Second)
		tm.waitFor(t, "tick 1 of 60", 20*time.Second)
	}
	startTick()
	tm.keys(t, "x")
	tm.waitRe(t, `cancel run \S+ \(tick/tick, running for \S+\)\? \[y/N\]`, 10*time.Second)
	time.Sleep(300 * time.Millisecond)
	if s := tm.capture(t); !strings.Contains(s, "tick/tick · running") {
		t.Fatalf("x alone stopped the run:\n%s", s)
	}
	tm.keys(t, "y")
	tm.waitFor(t, "tick/tick · cancelled", 20*time.Second)

	// q with a run going asks, naming it; n keeps the console; q y quits.
	startTick()
	tm.keys(t, "q")
	tm.waitFor(t, "quit and cancel 1 run (tick/tick)? [y/N]", 10*time.Second)
	tm.keys(t, "n")
	tm.waitFor(t, "nothing done", 10*time.Second)
	tm.keys(t, "q")
	tm.waitFor(t, "quit and cancel 1 run (tick/tick)?", 10*time.Second)
	tm.keys(t, "y")
	tm.waitGone(t, data, 20*time.Second)

	var runs []storage.RunRecord
	out, err = exec.Command(bin, "--data-dir", data, "hook", "runs", "--json").Output()
	if err != nil || json.Unmarshal(out, &runs) != nil {
		t.Fatalf("hook runs: %v %s", err, out)
	}
	cancelled := 0
	for _, r := range runs {
		if r.Module == "tick" && r.Status == storage.RunCancelled && strings.HasPrefix(r.Error, "cancelled by local:") {
			cancelled++
		}
	}
	if cancelled != 2 {
		t.Errorf("tick runs cancelled: %d, want 2 (x y, q y): %+v", cancelled, runs)
	}
}

// TestDemoUnderTmpHome runs scripts/demo as a newcomer whose HOME is
// under /tmp (where warden refuses modules): it picks a private dir for
// the modules by itself, finishes the tour, never advises loosening /tmp,
// and leaves warden on PATH (a link in ~/.local/bin) with the line to use
// it from another terminal.
func TestDemoUnderTmpHome(t *testing.T) {
	needBwrap(t)
	home, err := os.MkdirTemp("/tmp", "warden-demo-home-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	os.Chmod(home, 0o700)
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8"}
	// The Go caches stay the usual ones: the build is not what is tested.
	for _, k := range []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOFLAGS", "GOPROXY", "GOTOOLCHAIN"} {
		if out, err := exec.Command(goTool(t), "env", k).Output(); err == nil && strings.TrimSpace(string(out)) != "" {
			env = append(env, k+"="+strings.TrimSpace(string(out)))
		}
	}
	cmd := exec.Command("bash", filepath.Join("..", "..", "scripts", "demo"))
	cmd.Env, cmd.Stdin = env, nil
	out, err := cmd.CombinedOutput()
	text := string(out)
	if err != nil {
		t.Fatalf("demo under HOME=%s: %v\n%s", home, err, text)
	}
	for _, bad := range []string{"chmod go-w /tmp", "chmod go-w " + home} {
		if strings.Contains(text, bad) {
			t.Errorf("the demo advises %q:\n%s", bad, text)
		}
	}
	for _, want := range []string{
		"(not " + home + "/.local/share/warden: a directory others may write is on its path",
		"module hello 1.0.0 added from",
		"(the first build can take a few minutes)",
		"   built in ",
		"request.decide",
		"export PATH=\"" + home + "/.local/bin:$PATH\" WARDEN_DATA_DIR=" + home + "/.local/state/warden-demo",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the demo's output lacks %q:\n%s", want, text)
		}
	}
	link := filepath.Join(home, ".local", "bin", "warden")
	target, err := os.Readlink(link)
	if err != nil || strings.HasPrefix(target, "/tmp/") {
		t.Fatalf("~/.local/bin/warden: %q %v", target, err)
	}
	// The link works, on the demo's data dir, from "another terminal".
	ls := exec.Command(link, "--data-dir", filepath.Join(home, ".local", "state", "warden-demo"), "module", "list")
	if o, err := ls.CombinedOutput(); err != nil || !strings.Contains(string(o), "hello") || !strings.Contains(string(o), "tick") {
		t.Errorf("warden module list through the link: %v\n%s", err, o)
	}
}

// consoleHome builds warden into a private dir (prefix) and adds copies
// of the example modules named to a data dir there: the dir, the binary
// and the data dir.
func consoleHome(t *testing.T, prefix string, modules ...string) (base, bin, data string) {
	t.Helper()
	base = privateDir(t, prefix)
	bin = filepath.Join(base, "bin", "warden")
	data = filepath.Join(base, "data")
	buildWarden(t, bin)
	for _, m := range modules {
		dir := filepath.Join(base, "modules", m)
		os.MkdirAll(filepath.Dir(dir), 0o755)
		if out, err := exec.Command("cp", "-a", filepath.Join("..", "..", "examples", "modules", m), dir).CombinedOutput(); err != nil {
			t.Fatalf("copy %s: %v: %s", m, err, out)
		}
		if out, err := exec.Command(bin, "--data-dir", data, "module", "add", dir).CombinedOutput(); err != nil {
			t.Fatalf("module add %s: %v: %s", m, err, out)
		}
	}
	return base, bin, data
}
