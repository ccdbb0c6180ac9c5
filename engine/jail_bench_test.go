package engine

// What the jail costs a hook run, against two baselines measured in the
// same `go test -bench`:
//
//	no-op hook run, jailed      vs  the same run with --jail=off
//	no-op hook run, jailed      vs  the bare bwrap command line the
//	                                spawner builds for it (no engine)
//
//	go test ./engine/ -run '^$' -bench 'Noop|BareBwrap' -benchtime 50x
//
// and the landlock backend against bwrap and a bare process:
//
//	go test ./engine/ -run '^$' -bench 'NoopJailed$|NoopLandlock|NoopBareProcess' -benchtime 50x

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wardenhq/warden/engine/hooks"
	"github.com/wardenhq/warden/engine/jail"
)

// jailBenchModule writes a module with one hook, noop.sh (`exit 0`).
func jailBenchModule(b *testing.B) string {
	b.Helper()
	base, err := os.UserCacheDir()
	if err != nil {
		b.Fatal(err)
	}
	os.MkdirAll(base, 0o700)
	dir, err := os.MkdirTemp(base, "warden-bench-module-")
	if err != nil {
		b.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	b.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.WriteFile(filepath.Join(dir, "noop.sh"), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		b.Fatal(err)
	}
	manifest := "id: testmod\nversion: 1.0.0\ndescription: bench\nhooks:\n  noop:\n    run: [./noop.sh]\n"
	if err := os.WriteFile(filepath.Join(dir, "module.yaml"), []byte(manifest), 0o644); err != nil {
		b.Fatal(err)
	}
	return dir
}

// reportP50 adds the median of ds (the mean, ns/op, hides a few slow ops
// such as an fsync or a GC).
func reportP50(b *testing.B, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Nanoseconds()), "p50-ns")
}

func benchNoop(b *testing.B, mode string) { benchNoopLimits(b, mode, true) }

func benchNoopLimits(b *testing.B, mode string, limits bool) {
	if mode == JailBwrap {
		needJail(b)
	}
	e := openTestEngine(b)
	if !limits {
		jl, err := e.jails.Bwrap()
		if err != nil {
			b.Fatal(err)
		}
		e.noLimits, jl.Prlimit = true, ""
	}
	if _, err := e.AddModule(testActor, jailBenchModule(b)); err != nil {
		b.Fatal(err)
	}
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		o, err := e.RunHook(testActor, RunRequest{Module: "testmod", Hook: "noop", Jail: mode})
		ds = append(ds, time.Since(t0))
		if err != nil {
			b.Fatal(err)
		}
		if !o.OK() {
			b.Fatalf("run %s: %s", o.Run.Status, o.Run.Error)
		}
	}
	b.StopTimer()
	reportP50(b, ds)
}

// BenchmarkNoopJailed: a no-op hook, jailed, from StartRun to its end
// receipt.
func BenchmarkNoopJailed(b *testing.B) { benchNoop(b, JailBwrap) }

// BenchmarkNoopJailedNoLimits: the same jailed run without its resource
// limits (no cgroup, unsized tmpfs, no prlimit): the baseline of what the
// limits cost (BenchmarkNoopJailed has them; goal: at most 1.2x).
//
//	go test ./engine/ -run '^$' -bench 'NoopJailed' -benchtime 50x
func BenchmarkNoopJailedNoLimits(b *testing.B) { benchNoopLimits(b, JailBwrap, false) }

// BenchmarkLimitsCost: what the resource limits cost a jailed no-op run,
// measured against itself: each iteration runs the hook on an engine with
// limits and on one without, alternately (so that a busy shared host
// slows both alike), and reports both medians and their ratio.
//
//	go test ./engine/ -run '^$' -bench LimitsCost -benchtime 100x
func BenchmarkLimitsCost(b *testing.B) {
	needJail(b)
	mod := jailBenchModule(b)
	var engines [2]*Engine
	for i := range engines {
		engines[i] = openTestEngine(b)
		if _, err := engines[i].AddModule(testActor, mod); err != nil {
			b.Fatal(err)
		}
	}
	jl, err := engines[1].jails.Bwrap()
	if err != nil {
		b.Fatal(err)
	}
	engines[1].noLimits, jl.Prlimit = true, ""
	var ds [2][]time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k, e := range engines {
			t0 := time.Now()
			o, err := e.RunHook(testActor, RunRequest{Module: "testmod", Hook: "noop", Jail: JailBwrap})
			ds[k] = append(ds[k], time.Since(t0))
			if err != nil || !o.OK() {
				b.Fatalf("run: %v %s %s", err, o.Run.Status, o.Run.Error)
			}
		}
	}
	b.StopTimer()
	p50 := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Nanoseconds())
	}
	on, off := p50(ds[0]), p50(ds[1])
	b.ReportMetric(on, "limits-p50-ns")
	b.ReportMetric(off, "nolimits-p50-ns")
	b.ReportMetric(on/off, "ratio")
}

// BenchmarkNoopJailOff: the same with the jail off.
func BenchmarkNoopJailOff(b *testing.B) { benchNoop(b, JailOff) }

// BenchmarkJailedVsBare: the goal of the jailed run path, measured
// against its baseline in turn: each iteration runs the no-op hook jailed
// through the engine (StartRun to its end receipt, limits on) and then
// the bare bwrap command line the spawner builds for it (as
// BenchmarkBareBwrap/hook), so that a busy shared host slows both alike.
// It reports both medians and their ratio (goal: at most 1.5).
//
//	go test ./engine/ -run '^$' -bench JailedVsBare -benchtime 200x -count 3
func BenchmarkJailedVsBare(b *testing.B) {
	needJail(b)
	e := openTestEngine(b)
	mod := jailBenchModule(b)
	if _, err := e.AddModule(testActor, mod); err != nil {
		b.Fatal(err)
	}
	bare := bareBwrap(b, mod, []string{jail.ModuleTarget + "/noop.sh"})
	var jailed, baseline []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		o, err := e.RunHook(testActor, RunRequest{Module: "testmod", Hook: "noop", Jail: JailBwrap})
		jailed = append(jailed, time.Since(t0))
		if err != nil || !o.OK() {
			b.Fatalf("run: %v %s %s", err, o.Run.Status, o.Run.Error)
		}
		t0 = time.Now()
		if err := bare(); err != nil {
			b.Fatal(err)
		}
		baseline = append(baseline, time.Since(t0))
	}
	b.StopTimer()
	j, bw := p50ns(jailed), p50ns(baseline)
	b.ReportMetric(j, "jailed-p50-ns")
	b.ReportMetric(bw, "bare-p50-ns")
	b.ReportMetric(j/bw, "ratio")
}

// bareBwrap returns one run of the bwrap command line the spawner builds
// for argv in module dir mod (same plan, same environment, fresh
// seccomp/passwd/args memfds each time), to its exit, with no engine
// around it.
func bareBwrap(b *testing.B, mod string, argv []string) func() error {
	jl, err := jail.New(jail.DefaultBwrap)
	if err != nil {
		b.Fatal(err)
	}
	runDir := b.TempDir()
	os.WriteFile(filepath.Join(runDir, jail.SocketName), nil, 0o600) // the broker's socket
	plan, err := jail.BuildPlan(jail.PlanInput{ModuleDir: mod, RunDir: runDir, Warden: wardenBinary()})
	if err != nil {
		b.Fatal(err)
	}
	env := hooks.BuildEnv(os.Environ(), map[string]string{
		"WARDEN_SOCKET": jail.SocketTarget,
		"WARDEN_TOKEN":  "cap_" + strings.Repeat("0", 64),
		"WARDEN_RUN":    "bench",
		"WARDEN_MODULE": "testmod",
		"WARDEN_HOOK":   "noop",
	}, jail.BinDir)
	return func() error {
		s := jl.Spawner(plan, false)
		cmd, err := s.Command(hooks.Spawn{Argv: argv, Dir: jail.ModuleTarget, Env: env})
		if err != nil {
			return err
		}
		err = cmd.Start()
		s.Release()
		if err == nil {
			err = cmd.Wait()
		}
		if err != nil {
			return fmt.Errorf("%v: %w", argv, err)
		}
		return nil
	}
}

// BenchmarkBareBwrap: the bwrap command line the spawner builds for that
// hook (same plan, same environment, fresh seccomp/passwd/args memfds each
// time), run to its exit with no engine around it: "hook" runs the same
// /module/noop.sh, "true" runs /bin/true (no shell).
func BenchmarkBareBwrap(b *testing.B) {
	needJail(b)
	mod := jailBenchModule(b)
	for _, c := range []struct {
		name string
		argv []string
	}{
		{"hook", []string{jail.ModuleTarget + "/noop.sh"}},
		{"true", []string{"/bin/true"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			run := bareBwrap(b, mod, c.argv)
			ds := make([]time.Duration, 0, b.N)
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				err := run()
				ds = append(ds, time.Since(t0))
				if err != nil {
					b.Fatal(err)
				}
			}
			reportP50(b, ds)
		})
	}
}

// BenchmarkNoopLandlock: the same no-op run under the landlock backend
// (the stage's re-exec, ruleset and filter instead of bwrap's
// namespaces), limits on as under bwrap.
func BenchmarkNoopLandlock(b *testing.B) {
	if abi := jail.ProbeHost().LandlockABI; abi < jail.MinLandlockABI {
		b.Skipf("Landlock ABI %d here", abi)
	}
	benchNoop(b, JailLandlock)
}

// BenchmarkNoopBareProcess: the no-op hook's script exec'd and waited
// for, nothing else: the floor under both backends.
func BenchmarkNoopBareProcess(b *testing.B) {
	script := filepath.Join(jailBenchModule(b), "noop.sh")
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if err := exec.Command(script).Run(); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(t0))
	}
	b.StopTimer()
	reportP50(b, ds)
}
