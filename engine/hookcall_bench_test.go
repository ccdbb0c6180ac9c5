package engine

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wardenhq/warden/engine/jail"
	"github.com/wardenhq/warden/engine/sdk/hookkit"
)

// The in-jail helper's cost, each figure beside its baseline in the same
// run, for the full warden binary (the helper when warden-hook is absent)
// and warden-hook, both built here from this checkout:
//
//	go test ./engine/ -run '^$' -bench 'JailedHookCalls|HelperStart|LogStdin' -benchtime 3x
//
// BenchmarkJailedHookCalls: a jailed shell hook making 200 `warden hook
// log` calls, against the same hook printing 200 lines with echo and
// against it starting a Go hello-world 200 times; per-call p50/p90 from
// the gaps between the calls' arrival at the broker. And paired: one hook
// making 200 rounds of a hello-world start then a helper call, each timed
// from stdout marks around it, so that the two are measured milliseconds
// apart (a shared host's speed moves over seconds; paired-call/hello is
// the ratio that holds still).
// BenchmarkHelperStart: `warden-hook --version` (and `warden --version`)
// against a Go hello-world built here. BenchmarkLogStdin: 100,000 lines
// through `warden hook log --stdin` against the same lines on the hook's
// plain stdout.

const hookCalls = 200

// helperBins builds cmd/warden and cmd/warden-hook once per test process.
var helperBinsDir string

func helperBins(b testing.TB) (full, small string) {
	b.Helper()
	if helperBinsDir == "" {
		dir, err := os.MkdirTemp("", "warden-helper-bench-")
		if err != nil {
			b.Fatal(err)
		}
		// As the README builds them: warden-hook without cgo (static).
		out, err := exec.Command(goCmd(b), "build", "-o", dir+"/", "../cmd/warden").CombinedOutput()
		if err != nil {
			b.Fatalf("go build: %v\n%s", err, out)
		}
		cmd := exec.Command(goCmd(b), "build", "-o", dir+"/", "../cmd/warden-hook")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("go build warden-hook: %v\n%s", err, out)
		}
		helperBinsDir = dir
	}
	return filepath.Join(helperBinsDir, "warden"), filepath.Join(helperBinsDir, jail.HelperName)
}

func goCmd(b testing.TB) string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if p := "/usr/local/go/bin/go"; fileExists(p) {
		return p
	}
	b.Skip("no go command to build the helpers with")
	return ""
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// callsModule is a module whose hooks make the benchmarks' calls.
func callsModule(b *testing.B) string {
	b.Helper()
	dir := jailBenchModule(b)
	var lines strings.Builder
	for i := range 100_000 {
		fmt.Fprintf(&lines, "2026-12-03 13:00:00 item %06d processed, all good\n", i)
	}
	files := map[string]string{
		"logs.sh":   fmt.Sprintf("#!/bin/sh\ni=0\nwhile [ $i -lt %d ]; do warden hook log \"line $i\"; i=$((i+1)); done\n", hookCalls),
		"echoes.sh": fmt.Sprintf("#!/bin/sh\ni=0\nwhile [ $i -lt %d ]; do echo \"line $i\"; i=$((i+1)); done\n", hookCalls),
		"hellos.sh": fmt.Sprintf("#!/bin/sh\ni=0\nwhile [ $i -lt %d ]; do /module/hello >/dev/null; i=$((i+1)); done\n", hookCalls),
		// Each call beside a hello-world start, a few milliseconds apart:
		// a shared host that slows down for a second slows both alike.
		"paired.sh": fmt.Sprintf("#!/bin/sh\ni=0\nwhile [ $i -lt %d ]; do echo \"a $i\"; /module/hello >/dev/null; echo \"b $i\"; warden hook log \"c $i\"; echo \"d $i\"; i=$((i+1)); done\n", hookCalls),
		"stdin.sh":  "#!/bin/sh\nexec warden hook log --stdin < /module/lines.txt\n",
		"stdout.sh": "#!/bin/sh\nexec cat /module/lines.txt\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "lines.txt"), []byte(lines.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	manifest := "id: testmod\nversion: 1.0.0\ndescription: bench\nhooks:\n"
	hello, err := os.ReadFile(helloWorld(b))
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hello"), hello, 0o755); err != nil {
		b.Fatal(err)
	}
	for _, h := range []string{"logs", "echoes", "hellos", "paired", "stdin", "stdout"} {
		manifest += fmt.Sprintf("  %s:\n    run: [./%s.sh]\n    timeout: 5m\n", h, h)
	}
	if err := os.WriteFile(filepath.Join(dir, "module.yaml"), []byte(manifest), 0o644); err != nil {
		b.Fatal(err)
	}
	return dir
}

// helperEngine is an engine whose jails get helper as their warden.
func helperEngine(b *testing.B, helper, mod string) *Engine {
	b.Helper()
	e, err := Open(Options{DataDir: filepath.Join(b.TempDir(), "data"), helper: helper})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close() })
	if _, err := e.AddModule(testActor, mod); err != nil {
		b.Fatal(err)
	}
	return e
}

func runTimed(b *testing.B, e *Engine, hook string) (Outcome, time.Duration) {
	b.Helper()
	t0 := time.Now()
	o, err := e.RunHook(testActor, RunRequest{Module: "testmod", Hook: hook, Jail: JailBwrap})
	d := time.Since(t0)
	if err != nil {
		b.Fatal(err)
	}
	if !o.OK() {
		b.Fatalf("run %s: %s %s", hook, o.Run.Status, o.Run.Error)
	}
	return o, d
}

// pairedTimes are, for each of a paired run's rounds, the time from its
// "a" line to its "b" line (a hello-world start) and from "b" to "d" (a
// helper call), as the engine stamped the lines on arrival.
func pairedTimes(b *testing.B, e *Engine, run string) (hellos, calls []time.Duration) {
	b.Helper()
	lines, err := e.StreamLines(run, 0, 10*hookCalls)
	if err != nil {
		b.Fatal(err)
	}
	at := map[string]time.Time{}
	for _, l := range lines {
		at[l.Text] = l.At
	}
	for i := range hookCalls {
		a, okA := at[fmt.Sprintf("a %d", i)]
		m, okB := at[fmt.Sprintf("b %d", i)]
		d, okD := at[fmt.Sprintf("d %d", i)]
		if _, okC := at[fmt.Sprintf("c %d", i)]; !okA || !okB || !okD || !okC {
			b.Fatalf("run %s: round %d's lines are missing", run, i)
		}
		hellos, calls = append(hellos, m.Sub(a)), append(calls, d.Sub(m))
	}
	return hellos, calls
}

// callGaps are the gaps between the arrivals of a run's "line N" lines:
// one helper call each (its process start, connection, frame).
func callGaps(b *testing.B, e *Engine, run string) []time.Duration {
	b.Helper()
	lines, err := e.StreamLines(run, 0, 10*hookCalls)
	if err != nil {
		b.Fatal(err)
	}
	var at []time.Time
	for _, l := range lines {
		if strings.HasPrefix(l.Text, "line ") {
			at = append(at, l.At)
		}
	}
	if len(at) != hookCalls {
		b.Fatalf("run %s: %d call lines, want %d", run, len(at), hookCalls)
	}
	var gaps []time.Duration
	for i := 1; i < len(at); i++ {
		gaps = append(gaps, at[i].Sub(at[i-1]))
	}
	return gaps
}

func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func BenchmarkJailedHookCalls(b *testing.B) {
	needJail(b)
	full, small := helperBins(b)
	mod := callsModule(b)
	for _, h := range []struct{ name, path string }{{"old=warden", full}, {"new=warden-hook", small}} {
		b.Run(h.name, func(b *testing.B) {
			e := helperEngine(b, h.path, mod)
			var dEcho, dHello, dLogs time.Duration
			var gaps, pHellos, pCalls []time.Duration
			for b.Loop() {
				o, _ := runTimed(b, e, "paired")
				h, c := pairedTimes(b, e, o.Run.ID)
				pHellos, pCalls = append(pHellos, h...), append(pCalls, c...)
				_, d := runTimed(b, e, "echoes")
				dEcho += d
				_, d = runTimed(b, e, "hellos")
				dHello += d
				o, d = runTimed(b, e, "logs")
				dLogs += d
				gaps = append(gaps, callGaps(b, e, o.Run.ID)...)
			}
			n := float64(b.N)
			b.ReportMetric(ms(dEcho)/n, "echo-hook-ms")
			b.ReportMetric(ms(dLogs)/n, "log-hook-ms")
			b.ReportMetric(dLogs.Seconds()/dEcho.Seconds(), "log/echo")
			b.ReportMetric(ms(dHello)/n, "hello-hook-ms")
			b.ReportMetric(ms(dLogs-dEcho)/n/hookCalls, "ms/call-over-echo")
			b.ReportMetric(ms(dHello-dEcho)/n/hookCalls, "ms/hello-over-echo")
			b.ReportMetric((dLogs-dEcho).Seconds()/(dHello-dEcho).Seconds(), "call/hello")
			b.ReportMetric(ms(quantile(pCalls, 0.5)), "paired-call-p50-ms")
			b.ReportMetric(ms(quantile(pHellos, 0.5)), "paired-hello-p50-ms")
			b.ReportMetric(float64(quantile(pCalls, 0.5))/float64(quantile(pHellos, 0.5)), "paired-call/hello")
			b.ReportMetric(ms(quantile(gaps, 0.5)), "call-p50-ms")
			b.ReportMetric(ms(quantile(gaps, 0.9)), "call-p90-ms")
		})
	}
}

// helloWorld builds a Go hello-world, the start every Go program pays.
func helloWorld(b testing.TB) string {
	b.Helper()
	dir := b.TempDir()
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module hello\n\ngo 1.22\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nimport \"os\"\n\nfunc main() { os.Stdout.WriteString(\"hello 0.1.0\\n\") }\n"), 0o644)
	cmd := exec.Command(goCmd(b), "build", "-o", filepath.Join(dir, "hello"), ".")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build hello: %v\n%s", err, out)
	}
	return filepath.Join(dir, "hello")
}

func childCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkHelperStart: each iteration starts the hello-world, warden-hook
// and warden once, in turn (a busy shared host slows all three alike),
// and reports each one's median wall time and mean CPU, and the ratios.
func BenchmarkHelperStart(b *testing.B) {
	full, small := helperBins(b)
	hello := helloWorld(b)
	progs := []struct{ name, path string }{{"hello", hello}, {"warden-hook", small}, {"warden", full}}
	wall := make([][]time.Duration, len(progs))
	cpu := make([]time.Duration, len(progs))
	for b.Loop() {
		for i, p := range progs {
			c0, t0 := childCPU(), time.Now()
			if out, err := exec.Command(p.path, "--version").Output(); err != nil || len(out) == 0 {
				b.Fatalf("%s --version: %v %q", p.name, err, out)
			}
			wall[i] = append(wall[i], time.Since(t0))
			cpu[i] += childCPU() - c0
		}
	}
	n := float64(b.N)
	for i, p := range progs {
		b.ReportMetric(ms(quantile(wall[i], 0.5)), p.name+"-p50-ms")
		b.ReportMetric(ms(cpu[i])/n, p.name+"-cpu-ms")
	}
	b.ReportMetric(float64(quantile(wall[1], 0.5))/float64(quantile(wall[0], 0.5)), "warden-hook/hello")
	b.ReportMetric(float64(quantile(wall[2], 0.5))/float64(quantile(wall[0], 0.5)), "warden/hello")
}

func BenchmarkLogStdin(b *testing.B) {
	needJail(b)
	full, small := helperBins(b)
	mod := callsModule(b)
	for _, h := range []struct{ name, path string }{{"old=warden", full}, {"new=warden-hook", small}} {
		b.Run(h.name, func(b *testing.B) {
			e := helperEngine(b, h.path, mod)
			var dOut, dIn time.Duration
			for b.Loop() {
				o, d := runTimed(b, e, "stdout")
				dOut += d
				checkLines(b, e, o.Run.ID)
				o, d = runTimed(b, e, "stdin")
				dIn += d
				checkLines(b, e, o.Run.ID)
			}
			lines := 100_000 * float64(b.N)
			b.ReportMetric(lines/dOut.Seconds(), "stdout-lines/s")
			b.ReportMetric(lines/dIn.Seconds(), "stdin-lines/s")
			b.ReportMetric(dOut.Seconds()/dIn.Seconds(), "stdin/stdout")
		})
	}
}

// checkLines: every one of the 100,000 lines was stored.
func checkLines(b *testing.B, e *Engine, run string) {
	b.Helper()
	m, err := e.StreamInfo(run)
	if err != nil {
		b.Fatal(err)
	}
	// The engine adds a few lines of its own (start, end).
	if m.Lines < 100_000 || m.Lines > 100_010 {
		b.Fatalf("run %s stored %d lines, want 100,000 and the engine's own", run, m.Lines)
	}
}

// heldRun starts a run (jail off) whose hook only waits, and returns its
// broker's socket and token, and stop, which ends the run.
func heldRun(b *testing.B, helper string) (socket, token string, stop func()) {
	b.Helper()
	dir := jailBenchModule(b)
	hold := "#!/bin/sh\nprintf '%s\\n%s\\n' \"$WARDEN_SOCKET\" \"$WARDEN_TOKEN\" > env.tmp && mv env.tmp env.txt\nwhile [ ! -e stop ]; do sleep 0.02; done\n"
	if err := os.WriteFile(filepath.Join(dir, "hold.sh"), []byte(hold), 0o755); err != nil {
		b.Fatal(err)
	}
	manifest := "id: testmod\nversion: 1.0.0\ndescription: bench\nhooks:\n  hold:\n    run: [./hold.sh]\n    timeout: 10m\n"
	if err := os.WriteFile(filepath.Join(dir, "module.yaml"), []byte(manifest), 0o644); err != nil {
		b.Fatal(err)
	}
	e := helperEngine(b, helper, dir)
	done := make(chan error, 1)
	go func() {
		_, err := e.RunHook(testActor, RunRequest{Module: "testmod", Hook: "hold", Jail: JailOff})
		done <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); ; {
		raw, err := os.ReadFile(filepath.Join(dir, "env.txt"))
		if f := strings.Fields(string(raw)); err == nil && len(f) == 2 {
			socket, token = f[0], f[1]
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("the holding hook did not start")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return socket, token, func() {
		os.WriteFile(filepath.Join(dir, "stop"), nil, 0o644)
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHelperCallDirect: one `warden-hook hook log` call's own cost,
// without the shell and the jail around it. A run (jail off) holds its
// broker open while this process starts warden-hook against its socket,
// each call timed from exec to exit, alternating with a Go hello-world
// (a busy shared host slows both alike): call p50/p90 beside hello p50.
func BenchmarkHelperCallDirect(b *testing.B) {
	_, small := helperBins(b)
	hello := helloWorld(b)
	socket, token, stop := heldRun(b, small)
	env := append(os.Environ(), "WARDEN_SOCKET="+socket, "WARDEN_TOKEN="+token)
	var calls, hellos []time.Duration
	i := 0
	for b.Loop() {
		t0 := time.Now()
		if out, err := exec.Command(hello).Output(); err != nil || len(out) == 0 {
			b.Fatalf("hello: %v", err)
		}
		hellos = append(hellos, time.Since(t0))
		cmd := exec.Command(small, "hook", "log", fmt.Sprintf("line %d", i))
		cmd.Env = env
		t0 = time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("warden-hook hook log: %v\n%s", err, out)
		}
		calls = append(calls, time.Since(t0))
		i++
	}
	b.StopTimer()
	stop()
	b.ReportMetric(ms(quantile(calls, 0.5)), "call-p50-ms")
	b.ReportMetric(ms(quantile(calls, 0.9)), "call-p90-ms")
	b.ReportMetric(ms(quantile(hellos, 0.5)), "hello-p50-ms")
	b.ReportMetric(float64(quantile(calls, 0.5))/float64(quantile(hellos, 0.5)), "call/hello")
}

// BenchmarkBrokerLogCall: the broker's side of one `hook log` call, in
// process (no exec): connect, hello (token check, context), one log
// frame, close, against a held run's real broker and handler. Profile it
// with -cpuprofile to see where the engine's time per call goes.
func BenchmarkBrokerLogCall(b *testing.B) {
	_, small := helperBins(b)
	socket, token, stop := heldRun(b, small)
	b.ReportAllocs()
	for b.Loop() {
		c, err := hookkit.Dial(socket, token)
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Log("info", "a line"); err != nil {
			b.Fatal(err)
		}
		if err := c.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	stop()
}
