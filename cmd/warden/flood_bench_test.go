package main

// The serving engine's memory while a hook floods it, measured on real
// processes: `warden serve`, and `warden hook run` attached to it and
// following the run's stream (the way an operator watches a run), while
// the hook sends 1 MiB log frames as fast as one per millisecond for
// floodFor. The figure is serve's peak resident set (VmHWM).

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wardenhq/warden/engine/sdk/protocol"
)

const (
	floodFor  = 10 * time.Second
	floodVerb = "test-flood-frames" // never a real verb: TestMain catches it
)

// floodFrames is the hook: hello, then one log frame of exactly MaxFrame
// bytes per millisecond tick (slower when the engine pushes back).
func floodFrames() int {
	c, err := net.Dial("unix", os.Getenv("WARDEN_SOCKET"))
	if err != nil {
		fmt.Println("dial:", err)
		return 1
	}
	fmt.Fprintf(c, `{"type":"hello","protocol":1,"token":%q}`+"\n", os.Getenv("WARDEN_TOKEN"))
	r := protocol.NewReader(c)
	if f, err := r.ReadFrame(); err != nil || f.FrameType() != "context" {
		fmt.Println("hello refused:", f, err)
		return 1
	}
	go io.Copy(io.Discard, c) // nothing more is expected; never let replies block
	prefix, suffix := `{"type":"log","level":"info","message":"`, "\"}\n"
	frame := []byte(prefix + strings.Repeat("x", protocol.MaxFrame-len(prefix)-len(suffix)) + suffix)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	sent := 0
	for end := time.Now().Add(floodFor); time.Now().Before(end); sent++ {
		if _, err := c.Write(frame); err != nil {
			fmt.Println("write:", err)
			return 1
		}
		<-tick.C
	}
	fmt.Println("frames sent:", sent)
	return 0
}

// vmHWM is a process's peak resident set in bytes.
func vmHWM(tb testing.TB, pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmHWM:" {
			kb, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				tb.Fatal(err)
			}
			return kb << 10
		}
	}
	tb.Fatal("no VmHWM")
	return 0
}

// BenchmarkServeFloodPeakRSS reports serve-peak-RSS-MiB for: "idle", a
// hook that sleeps floodFor (the baseline); "flood", the flooding hook
// with `hook run` following it to /dev/null; "flood-stalled-client", the
// same with the client's stdout a pipe nobody reads. Run it with
// -benchtime 1x; the goal is a flood peak under 256 MiB.
func BenchmarkServeFloodPeakRSS(b *testing.B) {
	base := privateDir(b, "warden-flood-")
	bin := wardenLink(b, base)
	mod := filepath.Join(base, "modules", "flood")
	os.MkdirAll(mod, 0o755)
	yaml := "id: flood\nversion: 1.0.0\ndescription: floods\nhooks:\n  frames:\n    run: [./frames.sh]\n    timeout: 1m\n  idle:\n    run: [./idle.sh]\n    timeout: 1m\n"
	files := map[string]string{
		"module.yaml": yaml,
		"frames.sh":   "#!/bin/sh\nexec warden " + floodVerb + "\n",
		"idle.sh":     fmt.Sprintf("#!/bin/sh\nexec sleep %d\n", int(floodFor.Seconds())),
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(mod, name), []byte(body), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range []struct {
		name, hook string
		stalled    bool
	}{{"idle", "idle", false}, {"flood", "frames", false}, {"flood-stalled-client", "frames", true}} {
		b.Run(c.name, func(b *testing.B) {
			var peak uint64
			for i := range b.N {
				data := filepath.Join(base, fmt.Sprintf("data-%s-%d", c.name, i))
				if out, err := exec.Command(bin, "--data-dir", data, "module", "add", mod).CombinedOutput(); err != nil {
					b.Fatalf("module add: %v: %s", err, out)
				}
				srv := startServe(b, bin, data)
				run := exec.Command(bin, "--data-dir", data, "hook", "run", "flood", c.hook, "--jail=off")
				var stall *os.File
				if c.stalled {
					r, w, err := os.Pipe()
					if err != nil {
						b.Fatal(err)
					}
					run.Stdout, stall = w, r // r is never read
					defer r.Close()
					defer w.Close()
				}
				if err := run.Start(); err != nil {
					b.Fatal(err)
				}
				// The run's end, as serve records it (a stalled client
				// never gets that far by itself).
				waitUntil(b, "the run to end", floodFor+time.Minute, func() bool {
					out, err := exec.Command(bin, "--data-dir", data, "hook", "runs", "--json").Output()
					var runs []struct{ Status string }
					return err == nil && json.Unmarshal(out, &runs) == nil && len(runs) == 1 && runs[0].Status != "running"
				}, func() string { return "" })
				peak = max(peak, vmHWM(b, srv.Process.Pid))
				if stall != nil {
					run.Process.Kill()
				}
				run.Wait()
			}
			b.ReportMetric(float64(peak)/(1<<20), "serve-peak-RSS-MiB")
		})
	}
}
