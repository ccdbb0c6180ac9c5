package engine

// The engine's memory under a frame flood: a real hook process sends
// 1 MiB log frames as fast as one per millisecond for floodFor, and the
// engine (this process) reports its peak resident set. The baseline in the
// same run is the same engine with a hook that sleeps as long and sends
// nothing; the ratio of the two is what the flood costs.

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wardenhq/warden/engine/sdk/protocol"
)

const floodFor = 10 * time.Second

// floodFrames is the hook side: hello, then one log frame of exactly
// MaxFrame bytes per millisecond tick (never faster; slower when the
// engine pushes back, since the socket write blocks).
func floodFrames() int {
	rc := dialRaw()
	if a := rc.hello(); !strings.Contains(a, `"context"`) {
		fmt.Println("hello refused:", a)
		return 1
	}
	prefix, suffix := `{"type":"log","level":"info","message":"`, "\"}\n"
	frame := []byte(prefix + strings.Repeat("x", protocol.MaxFrame-len(prefix)-len(suffix)) + suffix)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	sent := 0
	for end := time.Now().Add(floodFor); time.Now().Before(end); sent++ {
		if _, err := rc.c.Write(frame); err != nil {
			fmt.Println("write:", err)
			return 1
		}
		<-tick.C
	}
	fmt.Println("frames sent:", sent)
	return 0
}

// procStatus reads one "kB" field of /proc/self/status, in bytes.
func procStatus(tb testing.TB, field string) uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		tb.Fatal(err)
	}
	for _, l := range bytes.Split(b, []byte("\n")) {
		if f := strings.Fields(string(l)); len(f) == 3 && f[0] == field+":" {
			kb, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				tb.Fatal(err)
			}
			return kb << 10
		}
	}
	tb.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// peakRSS is this process's VmHWM in bytes; resetPeakRSS starts it over
// from the current resident set (Linux: clear_refs 5).
func peakRSS(tb testing.TB) uint64 { return procStatus(tb, "VmHWM") }

func resetPeakRSS(tb testing.TB) {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		tb.Fatalf("reset the peak RSS: %v", err)
	}
}

// BenchmarkFloodPeakRSS reports peak-RSS-MiB for the engine during one
// run: "idle" sleeps floodFor and sends nothing (the baseline), "flood"
// sends 1 MiB log frames every millisecond for floodFor, and
// "flood-stalled-subscriber" does the same while a subscriber (an
// attached console or `hook run` whose terminal has stopped reading)
// takes no events. Run it with -benchtime 1x; the goal is a flood peak
// under 256 MiB.
func BenchmarkFloodPeakRSS(b *testing.B) {
	e := setupScripts(b, Options{}, map[string]string{"idle.sh": fmt.Sprintf("#!/bin/sh\nexec sleep %d\n", int(floodFor.Seconds()))},
		map[string]string{
			"flood": hookYAML("flood-frames", ""),
			"idle":  "    run: [./idle.sh]\n",
		})
	for _, c := range []struct {
		name, hook string
		stalled    bool
	}{{"idle", "idle", false}, {"flood", "flood", false}, {"flood-stalled-subscriber", "flood", true}} {
		hook := c.hook
		b.Run(c.name, func(b *testing.B) {
			if c.stalled {
				sub := e.Subscribe()
				defer sub.Close()
			}
			var peak, anon uint64
			var stored uint64
			for i := 0; i < b.N; i++ {
				resetPeakRSS(b)
				// The heap's part of the resident set, sampled (the
				// kernel keeps no peak of it): the rest is the store's
				// file pages, mapped and read back by bbolt.
				stop, sampled := make(chan struct{}), make(chan uint64)
				go func() {
					var anon uint64
					for {
						anon = max(anon, procStatus(b, "RssAnon"))
						select {
						case <-stop:
							sampled <- anon
							return
						case <-time.After(20 * time.Millisecond):
						}
					}
				}()
				o, err := e.RunHook(testActor, RunRequest{Module: "testmod", Hook: hook, Jail: JailOff})
				close(stop)
				anon = max(anon, <-sampled)
				if err != nil {
					b.Fatal(err)
				}
				peak = max(peak, peakRSS(b))
				if !o.OK() {
					b.Fatalf("run: %s: %s", o.Run.Status, o.Run.Error)
				}
				m, err := e.StreamInfo(o.Run.ID)
				if err != nil {
					b.Fatal(err)
				}
				stored += m.Lines
			}
			b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
			b.ReportMetric(float64(anon)/(1<<20), "peak-anon-MiB")
			b.ReportMetric(float64(stored)/float64(b.N), "lines/run")
		})
	}
}
