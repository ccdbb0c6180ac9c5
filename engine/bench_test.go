package engine

// Benchmarks of the hook path, each next to the baseline it is judged
// against, so both run on the same machine in the same `go test -bench`:
//
//	store get over the broker (hookkit)  vs  raw Unix-socket JSON ping-pong
//	1M output lines made durable         vs  the same command piped to a file
//	no-op hook run to its end receipt    vs  fork/exec of the same script
//
//	go test ./engine/ -run '^$' -bench 'StoreGet|PingPong|Ingest1M|RunToReceipt|ForkExec' -benchtime 3s

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/wardenhq/warden/engine/sdk/hookkit"
)

// opTimer collects per-op durations and reports their median, which the
// mean (ns/op) hides when a few ops hit an fsync or a GC.
type opTimer struct {
	b  *testing.B
	ds []time.Duration
	t0 time.Time
}

func newOpTimer(b *testing.B) *opTimer {
	return &opTimer{b: b, ds: make([]time.Duration, 0, b.N)}
}

func (o *opTimer) start() { o.t0 = time.Now() }
func (o *opTimer) stop()  { o.ds = append(o.ds, time.Since(o.t0)) }

func (o *opTimer) report() {
	if len(o.ds) == 0 {
		return
	}
	slices.Sort(o.ds)
	o.b.ReportMetric(float64(o.ds[len(o.ds)/2].Nanoseconds()), "p50-ns")
	o.b.ReportMetric(float64(o.ds[len(o.ds)*99/100].Nanoseconds()), "p99-ns")
}

// idleRunConfig starts an idle unjailed run whose module config holds
// region=eu-central and returns its config store, dialled as the hook's
// SDK would; the run is cancelled when the benchmark ends.
func idleRunConfig(b *testing.B) *hookkit.Store {
	e := setupScripts(b, Options{},
		map[string]string{"sleep.sh": "#!/bin/sh\nexec sleep 600\n"},
		map[string]string{"idle": "    run: [./sleep.sh]\n    timeout: 20m\n    idle_timeout: 10m\n"})
	if err := e.SetConfig(testActor, "testmod", "region", "eu-central"); err != nil {
		b.Fatal(err)
	}
	h, err := e.StartRun(testActor, RunRequest{Module: "testmod", Hook: "idle", Jail: JailOff})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		h.Cancel()
		h.Wait()
	})
	c, err := hookkit.Dial(h.r.brk.SocketPath(), h.r.token)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c.Config()
}

// p50ns is the median of d, in nanoseconds (d is sorted in place).
func p50ns(d []time.Duration) float64 {
	slices.Sort(d)
	return float64(d[len(d)/2].Nanoseconds())
}

// BenchmarkStoreGetHookkit: config.get round trips through the SDK, the
// socket, the broker, the run's Store handler and a storage read.
func BenchmarkStoreGetHookkit(b *testing.B) {
	cfg := idleRunConfig(b)
	ot := newOpTimer(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ot.start()
		v, ok, err := cfg.Get("region")
		ot.stop()
		if err != nil || !ok || v != "eu-central" {
			b.Fatalf("get: %q %v %v", v, ok, err)
		}
	}
	b.StopTimer()
	ot.report()
}

// BenchmarkUnixPingPongBaseline: the floor under a store get: one JSON
// line each way over a Unix socket, decoded and encoded on both ends, with
// no broker, no handler and no storage.
func BenchmarkUnixPingPongBaseline(b *testing.B) {
	ping := unixPingPong(b)
	ot := newOpTimer(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ot.start()
		if err := ping(); err != nil {
			b.Fatal(err)
		}
		ot.stop()
	}
	b.StopTimer()
	ot.report()
}

// BenchmarkStoreGetVsPingPong: the broker's goal, measured against its
// floor in turn: each iteration does one config.get through the SDK, the
// broker and storage (as BenchmarkStoreGetHookkit) and one raw ping-pong
// (as BenchmarkUnixPingPongBaseline), so a busy shared host slows both
// alike. It reports both medians and their ratio (goal: at most 1.5).
//
//	go test ./engine/ -run '^$' -bench StoreGetVsPingPong -benchtime 20000x -count 3
func BenchmarkStoreGetVsPingPong(b *testing.B) {
	cfg := idleRunConfig(b)
	ping := unixPingPong(b)
	var gets, pings []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		v, ok, err := cfg.Get("region")
		gets = append(gets, time.Since(t0))
		if err != nil || !ok || v != "eu-central" {
			b.Fatalf("get: %q %v %v", v, ok, err)
		}
		t0 = time.Now()
		if err := ping(); err != nil {
			b.Fatal(err)
		}
		pings = append(pings, time.Since(t0))
	}
	b.StopTimer()
	g, pp := p50ns(gets), p50ns(pings)
	b.ReportMetric(g, "get-p50-ns")
	b.ReportMetric(pp, "pingpong-p50-ns")
	b.ReportMetric(g/pp, "ratio")
}

// unixPingPong serves a peer on a Unix socket that answers each JSON
// line with one, and returns one round trip from a client: the request
// encoded, the answer read and decoded, its value decoded.
func unixPingPong(b *testing.B) func() error {
	sock := filepath.Join(b.TempDir(), "pp.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	type frame struct {
		Type   string            `json:"type"`
		ID     int64             `json:"id"`
		Store  string            `json:"store,omitempty"`
		Method string            `json:"method,omitempty"`
		Args   []json.RawMessage `json:"args,omitempty"`
		Value  json.RawMessage   `json:"value,omitempty"`
	}
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				return
			}
			var f frame
			if json.Unmarshal(line, &f) != nil {
				return
			}
			out, _ := json.Marshal(frame{Type: "return", ID: f.ID, Value: json.RawMessage(`"eu-central"`)})
			if _, err := c.Write(append(out, '\n')); err != nil {
				return
			}
		}
	}()
	c, err := net.Dial("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	r := bufio.NewReader(c)
	var id int64
	return func() error {
		id++
		req, _ := json.Marshal(frame{Type: "store", ID: id, Store: "config", Method: "get", Args: []json.RawMessage{json.RawMessage(`"region"`)}})
		if _, err := c.Write(append(req, '\n')); err != nil {
			return err
		}
		line, err := r.ReadBytes('\n')
		if err != nil {
			return err
		}
		var ans frame
		if err := json.Unmarshal(line, &ans); err != nil || ans.ID != id {
			return fmt.Errorf("answer %s: %v", line, err)
		}
		var v string
		return json.Unmarshal(ans.Value, &v)
	}
}

const (
	ingestLines = 1_000_000
	// 99 characters and a newline: 100 bytes a line, 100 MB in all.
	ingestScript = "#!/bin/sh\nyes \"$(printf '%099d' 0)\" | head -n 1000000\n"
)

func reportLinesPerSec(b *testing.B, lines int, d time.Duration) {
	b.ReportMetric(float64(lines)/d.Seconds(), "lines/s")
}

// BenchmarkIngest1M: a run whose child writes 1,000,000 lines of 100
// bytes; an op ends when the run has ended, which is after every line is
// durable (the ingester is closed before the verdict).
func BenchmarkIngest1M(b *testing.B) {
	e := setupScripts(b, Options{StreamLimit: 200 << 20},
		map[string]string{"flood.sh": ingestScript},
		map[string]string{"flood": "    run: [./flood.sh]\n"})
	b.SetBytes(100 * ingestLines)
	var total time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		o, err := e.RunHook(testActor, RunRequest{Module: "testmod", Hook: "flood", Jail: JailOff})
		total += time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
		if !o.OK() {
			b.Fatalf("run: %s", o.Run.Error)
		}
		b.StopTimer()
		m, err := e.StreamInfo(o.Run.ID)
		if err != nil || m.Lines != ingestLines || m.Dropped != 0 {
			b.Fatalf("stored %+v (%v): want exactly %d lines, none dropped", m, err, ingestLines)
		}
		b.StartTimer()
	}
	b.StopTimer()
	reportLinesPerSec(b, ingestLines*b.N, total)
}

// BenchmarkIngest1MPipeToFileBaseline: the same command with its stdout a
// file (fsync'd at the end, as the engine makes its lines durable).
func BenchmarkIngest1MPipeToFileBaseline(b *testing.B) {
	dir := b.TempDir()
	script := filepath.Join(dir, "flood.sh")
	if err := os.WriteFile(script, []byte(ingestScript), 0o755); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(100 * ingestLines)
	var total time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		f, err := os.Create(filepath.Join(dir, "out-"+strconv.Itoa(i)))
		if err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command(script)
		cmd.Stdout = f
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		total += time.Since(t0)
		b.StopTimer()
		st, _ := f.Stat()
		f.Close()
		if st.Size() != 100*ingestLines {
			b.Fatalf("file has %d bytes, want %d", st.Size(), 100*ingestLines)
		}
		os.Remove(f.Name())
		b.StartTimer()
	}
	b.StopTimer()
	reportLinesPerSec(b, ingestLines*b.N, total)
}

const noopScript = "#!/bin/sh\nexit 0\n"

// BenchmarkRunToReceiptNoop: a whole no-op run, jail off: preflight,
// token, broker, start receipt, fork/exec, wait, verdict, end receipt.
func BenchmarkRunToReceiptNoop(b *testing.B) {
	e := setupScripts(b, Options{},
		map[string]string{"noop.sh": noopScript},
		map[string]string{"noop": "    run: [./noop.sh]\n"})
	ot := newOpTimer(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ot.start()
		o, err := e.RunHook(testActor, RunRequest{Module: "testmod", Hook: "noop", Jail: JailOff})
		ot.stop()
		if err != nil || !o.OK() {
			b.Fatalf("run: %v %+v", err, o.Run)
		}
	}
	b.StopTimer()
	ot.report()
}

// BenchmarkForkExecBaseline: exec.Command(the same script).Run().
func BenchmarkForkExecBaseline(b *testing.B) {
	dir := scriptModule(b, map[string]string{"noop.sh": noopScript}, map[string]string{"noop": "    run: [./noop.sh]\n"})
	script := filepath.Join(dir, "noop.sh")
	ot := newOpTimer(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ot.start()
		err := exec.Command(script).Run()
		ot.stop()
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	ot.report()
}
