package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/wardenhq/warden/engine/hooks"
	"github.com/wardenhq/warden/engine/jail"
)

// BenchmarkWardenRunVsBare: a whole `warden run -- true` (the CLI
// process: its start, the engine it opens, the store's commits, the jail)
// beside the bare bwrap command line the spawner builds for the same
// plan, alternately, so that a busy host slows both alike. It reports
// both medians and their ratio (goal: at most 1.5), and the same for the
// time to the first byte of `echo first` on stdout.
//
//	go test ./cmd/warden/ -run '^$' -bench WardenRunVsBare -benchtime 30x
func BenchmarkWardenRunVsBare(b *testing.B) {
	needBwrap(b)
	base := privateDir(b, "warden-run-bench-")
	bin := filepath.Join(base, "warden")
	buildWarden(b, bin)
	data, ws, home, runDir := filepath.Join(base, "data"), filepath.Join(base, "ws"), filepath.Join(base, "home"), filepath.Join(base, "run")
	for _, d := range []string{ws, home, runDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	if os.Geteuid() == 0 {
		os.Chown(ws, jail.DefaultUID, jail.DefaultUID)
	}
	os.WriteFile(filepath.Join(runDir, jail.SocketName), nil, 0o600)
	jl, err := jail.New(jail.DefaultBwrap)
	if err != nil {
		b.Fatal(err)
	}
	plan, err := jail.BuildPlan(jail.PlanInput{RunDir: runDir, Warden: bin, Command: &jail.Command{Exe: "/usr/bin/true", Workspace: ws, Home: home}})
	if err != nil {
		b.Fatal(err)
	}
	env := hooks.BuildEnv(os.Environ(), map[string]string{"WARDEN_RUN": "bench"}, jail.BinDir)
	// A command and what to do once it started (the spawner holds the
	// jail's files until then).
	type started struct {
		cmd     *exec.Cmd
		release func()
	}
	bare := func(argv ...string) started {
		s := jl.Spawner(plan, false)
		cmd, err := s.Command(hooks.Spawn{Argv: argv, Dir: ws, Env: env})
		if err != nil {
			b.Fatal(err)
		}
		return started{cmd, s.Release}
	}
	wardenRun := func(argv ...string) started {
		cmd := exec.Command(bin, append([]string{"--data-dir", data, "run", "--jail", "bwrap", "--workspace", ws, "--"}, argv...)...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + base, "XDG_CONFIG_HOME=" + filepath.Join(base, "config")}
		return started{cmd, func() {}}
	}
	// One run first: the data dir is made once, not in the loop.
	if out, err := wardenRun("true").cmd.CombinedOutput(); err != nil {
		b.Fatalf("warden run: %v\n%s", err, out)
	}
	whole := func(s started) time.Duration {
		t0 := time.Now()
		err := s.cmd.Start()
		s.release()
		if err == nil {
			err = s.cmd.Wait()
		}
		if err != nil {
			b.Fatalf("%v: %v", s.cmd.Args, err)
		}
		return time.Since(t0)
	}
	firstByte := func(s started) time.Duration {
		out, _ := s.cmd.StdoutPipe()
		t0 := time.Now()
		err := s.cmd.Start()
		s.release()
		if err != nil {
			b.Fatal(err)
		}
		bufio.NewReader(out).ReadByte()
		d := time.Since(t0)
		s.cmd.Wait()
		return d
	}
	var run, raw, runFirst, rawFirst []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		run = append(run, whole(wardenRun("/usr/bin/true")))
		raw = append(raw, whole(bare("/usr/bin/true")))
		runFirst = append(runFirst, firstByte(wardenRun("/bin/echo", "first")))
		rawFirst = append(rawFirst, firstByte(bare("/bin/echo", "first")))
	}
	b.StopTimer()
	med := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Nanoseconds())
	}
	b.ReportMetric(med(run), "run-p50-ns")
	b.ReportMetric(med(raw), "bare-p50-ns")
	b.ReportMetric(med(run)/med(raw), "ratio")
	b.ReportMetric(med(runFirst)/med(rawFirst), "first-byte-ratio")
}
