package engine

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Log calls a few milliseconds apart, each its own connection, share
// commits: with the spacing set to an hour, the first line is written at
// once and the other 199 wait for the run's end, where all are written
// in one more commit (one lines event each), in order. Without the
// spacing each call is a commit, and two fdatasyncs, of its own.
func TestLogCallsShareCommits(t *testing.T) {
	e := openEngine(t, Options{streamCommitEvery: time.Hour})
	if _, err := e.AddModule(testActor, testModule(t, map[string]string{"calls": "    run: [./hook.sh, log-calls, \"200\", \"2\"]\n"})); err != nil {
		t.Fatal(err)
	}
	sub := e.bus.subscribe(1 << 16)
	defer sub.Close()
	o := runScript(t, e, "calls")
	lines, err := e.StreamLines(o.Run.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var calls []string
	for _, l := range lines {
		if strings.HasPrefix(l.Text, "call ") {
			calls = append(calls, l.Text)
		}
	}
	if len(calls) != 200 || calls[0] != "call 0" || calls[199] != "call 199" {
		t.Fatalf("stored %d call lines (%q ... ), want call 0 to call 199 in order", len(calls), calls[:min(3, len(calls))])
	}
	for i, c := range calls {
		if c != fmt.Sprintf("call %d", i) {
			t.Fatalf("line %d is %q", i, c)
		}
	}
	evs, missed := drain(t, sub)
	writes := 0
	for _, ev := range evs {
		if ev.Kind == EventLines && ev.Lines.Run == o.Run.ID {
			writes++
		}
	}
	if missed || writes > 2 {
		t.Errorf("200 log calls took %d stream writes (missed events: %v), want at most 2: the first, and the rest at the run's end", writes, missed)
	}
}

const (
	kill9EngineEnv = "WARDEN_TEST_KILL9_ENGINE"
	kill9ModuleEnv = "WARDEN_TEST_KILL9_MODULE"
)

// kill9Engine is the engine TestStreamLinesSurviveKill9 kills: it opens
// dir, adds the module, starts its "calls" hook with the jail off and the
// default commit spacing, and prints "run ID", then "acked N TEXT" for
// each of the run's lines as it is published, which is what the console
// shows, until it is killed.
func kill9Engine(dir, module string) int {
	e, err := Open(Options{DataDir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, err := e.AddModule(testActor, module); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	sub := e.bus.subscribe(1 << 20)
	h, err := e.StartRun(testActor, RunRequest{Module: "testmod", Hook: "calls", Jail: JailOff})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("run %s\n", h.ID)
	for {
		ev, err := sub.Next(context.Background())
		if err != nil {
			return 1
		}
		if ev.Kind == EventLines && ev.Lines.Run == h.ID {
			var b strings.Builder
			for _, l := range ev.Lines.Lines {
				fmt.Fprintf(&b, "acked %d %s\n", l.N, l.Text)
			}
			os.Stdout.WriteString(b.String())
		}
	}
}

// An engine killed outright (SIGKILL) in the middle of a run whose hook
// makes log calls loses none of the lines it had published: the docs
// promise a line is durable before anyone is shown it, and commits
// spaced for the hook's calls must not weaken that. The engine is a
// child process (this test binary again) on a real store; after the
// kill the store is opened again and holds every line the child printed
// as published, with the text it had, in an unbroken numbering.
func TestStreamLinesSurviveKill9(t *testing.T) {
	dir := newDataDir(t)
	module := testModule(t, map[string]string{"calls": "    run: [./hook.sh, log-calls, \"0\", \"1\"]\n    timeout: 5m\n"})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), kill9EngineEnv+"="+dir, kill9ModuleEnv+"="+module)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	sc := bufio.NewScanner(out)
	var run string
	acked := map[uint64]string{}
	killed := false
	for sc.Scan() {
		line := sc.Text()
		if id, ok := strings.CutPrefix(line, "run "); ok {
			run = id
			continue
		}
		f := strings.SplitN(line, " ", 3)
		n, err := strconv.ParseUint(f[1], 10, 64)
		if len(f) != 3 || f[0] != "acked" || err != nil {
			t.Fatalf("the engine printed %q", line)
		}
		acked[n] = f[2]
		if !killed && len(acked) >= 300 {
			// Mid-run: the hook keeps calling, lines keep arriving.
			cmd.Process.Signal(syscall.SIGKILL)
			killed = true
		}
	}
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !killed || !ok || !ws.Signaled() {
		t.Fatalf("the engine ended before the kill (%d lines acknowledged): %v", len(acked), err)
	}
	e := openEngine(t, Options{DataDir: dir})
	lines, err := e.StreamLines(run, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range lines {
		if l.N != uint64(i) {
			t.Fatalf("stored line %d is numbered %d", i, l.N)
		}
	}
	lost := 0
	for n, text := range acked {
		if n >= uint64(len(lines)) || lines[n].Text != text {
			lost++
		}
	}
	t.Logf("%d lines published before the kill, %d stored after it", len(acked), len(lines))
	if lost > 0 {
		t.Errorf("%d of the %d lines published before the kill are not stored as published", lost, len(acked))
	}
}
