package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	bolt "go.etcd.io/bbolt"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/engine/hooks"
	"github.com/wardenhq/warden/engine/jail"
	"github.com/wardenhq/warden/storage"
	"github.com/wardenhq/warden/tui"
)

// The scale benchmark grows a data dir to 1k, 10k (and, with
// WARDEN_SCALE_BIG=1, 100k) runs, each with the records a real no-op run
// leaves (its run record, 20 stream lines, its token record and its
// receipts: copied from a real run, with fresh ids), and measures, at
// each size, beside the empty store (the two in turn, every iteration):
//
//	open         engine.Open and Close
//	hook-runs    `warden hook runs` as its own process, nothing holding the store
//	hook-run     `warden hook run bench noop --jail=off`, likewise
//	first-frame  open, build the console, draw its first frame, close
//	run          one no-op run on an open engine (start to outcome)
//	verify-full  the whole receipt chain
//	verify-ckpt  from the newest checkpoint
//
// and reports each figure's median on both, their ratio (x-empty), db
// bytes per run (and logs where they go, bucket by bucket) and the verbs'
// peak RSS:
//
//	go test -run '^$' -bench 'Scale' -benchtime 20x ./cmd/warden/
//	WARDEN_SCALE_BIG=1 go test -run '^$' -bench 'Scale' -benchtime 10x -timeout 30m ./cmd/warden/
//
// WARDEN_SCALE_DIR=<dir> grows the stores there once and reuses them in
// later runs (never removed; the run benchmarks add a few runs to them
// each time), to measure a change again without growing 100k runs.
func BenchmarkScale(b *testing.B) {
	sizes := []int{1000, 10_000}
	if os.Getenv("WARDEN_SCALE_BIG") != "" {
		sizes = append(sizes, 100_000)
	}
	for _, n := range sizes {
		b.Run("runs="+strconv.Itoa(n), func(b *testing.B) {
			empty, st := scaleStore(b, 0), scaleStore(b, n)
			b.Run("open", func(b *testing.B) {
				paired(b, func(st *scaleData) {
					e, err := engine.Open(engine.Options{DataDir: st.dir})
					if err != nil {
						b.Fatal(err)
					}
					e.Close()
				}, empty, st)
				reportDBSize(b, st)
			})
			b.Run("hook-runs", func(b *testing.B) { benchVerb(b, empty, st, "hook", "runs") })
			b.Run("hook-run", func(b *testing.B) { benchVerb(b, empty, st, "hook", "run", "bench", "noop", "--jail=off") })
			b.Run("first-frame", func(b *testing.B) { paired(b, func(st *scaleData) { firstFrame(b, st.dir) }, empty, st) })
			engines := map[*scaleData]*engine.Engine{}
			for _, s := range []*scaleData{empty, st} {
				e, err := engine.Open(engine.Options{DataDir: s.dir})
				if err != nil {
					b.Fatal(err)
				}
				defer e.Close()
				engines[s] = e
			}
			b.Run("run", func(b *testing.B) {
				paired(b, func(st *scaleData) {
					o, err := runToEnd(engines[st], "local:bench", engine.RunRequest{Module: "bench", Hook: "noop", Jail: engine.JailOff})
					if err != nil || !o.OK() {
						b.Fatalf("run: %+v %v", o, err)
					}
				}, empty, st)
			})
			for _, c := range []struct {
				name   string
				verify func(*engine.Engine) (engine.Verification, error)
			}{
				{"verify-full", (*engine.Engine).VerifyReceipts},
				{"verify-ckpt", func(e *engine.Engine) (engine.Verification, error) { return e.VerifyReceiptsSince(0) }},
			} {
				b.Run(c.name, func(b *testing.B) {
					var count uint64
					paired(b, func(s *scaleData) {
						v, err := c.verify(engines[s])
						if err != nil || !v.Intact {
							b.Fatalf("verify: %+v %v", v, err)
						}
						if s == st {
							count = v.Count
						}
					}, empty, st)
					b.ReportMetric(float64(count), "receipts")
				})
			}
		})
	}
}

// firstFrame opens the engine on dir, builds the console, draws its first
// frame and closes both.
func firstFrame(b *testing.B, dir string) {
	e, err := engine.Open(engine.Options{DataDir: dir})
	if err != nil {
		b.Fatal(err)
	}
	a := tui.New(e, tui.Options{Actor: "local:bench", Jail: engine.JailOff, Bell: func() {}})
	a.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
	if v := a.View(); !strings.Contains(v, "noop") {
		b.Fatalf("first frame shows no run:\n%s", v)
	}
	a.Close()
	e.Close()
}

// BenchmarkFirstFrameRequests: the console's first frame on a store with
// 2,000 decided requests (an operator's answers to hooks and MCP tools;
// the scale benchmark's no-op runs ask nothing) against the same store
// without them, in turn. Goal, as for history: at most 1.5x.
func BenchmarkFirstFrameRequests(b *testing.B) {
	empty := scaleStore(b, 0)
	asked := &scaleData{dir: filepath.Join(b.TempDir(), "data")}
	if out, err := exec.Command("cp", "-a", empty.dir, asked.dir).CombinedOutput(); err != nil {
		b.Fatalf("copy the store: %v: %s", err, out)
	}
	st, err := storage.Open(storage.Options{Dir: asked.dir, NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	at := time.Now().UTC().Add(-time.Hour)
	content := []byte(`{"key":"db/password","store":"secrets","why":"` + strings.Repeat("x", 200) + `"}`)
	if _, err := st.Update(func(tx *storage.Tx) error {
		for i := 1; i <= 2000; i++ {
			if err := tx.PutRequest(storage.RequestRecord{ID: uint64(i), Subject: "bench", Operation: "store.get", Content: content,
				Requester: storage.Requester{Run: "20261129T140932-3fa2c1", Module: "bench", Hook: "noop"}, Digest: strings.Repeat("ab", 32),
				Revision: 1, Created: at, Expires: at.Add(time.Minute),
				Decision: &storage.Decision{Verdict: "approve-once", By: "local:ann", At: at.Add(time.Second), Reason: "ok"}}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	st.Close()
	paired(b, func(s *scaleData) { firstFrame(b, s.dir) }, empty, asked)
}

// paired runs op on the empty store and on st in turn, every iteration,
// so both see the same machine (this one is shared and its load drifts),
// and reports the medians and their ratio, x-empty.
func paired(b *testing.B, op func(*scaleData), empty, st *scaleData) {
	var de, dn []time.Duration
	for b.Loop() {
		t0 := time.Now()
		op(empty)
		t1 := time.Now()
		op(st)
		de, dn = append(de, t1.Sub(t0)), append(dn, time.Since(t1))
	}
	reportPair(b, de, dn)
}

func reportPair(b *testing.B, de, dn []time.Duration) {
	slices.Sort(de)
	slices.Sort(dn)
	e, n := de[len(de)/2], dn[len(dn)/2]
	b.ReportMetric(float64(e.Microseconds())/1000, "empty-p50-ms")
	b.ReportMetric(float64(n.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(n)/float64(e), "x-empty")
}

// BenchmarkBudgetCliff: no-op runs per second on a store holding 10k
// runs' streams with the stored output over its stream budget (so runs'
// output keeps waking the pruner) against the same store under it: two
// copies, run in turn on the same machine. Goal: over/under >= 0.8.
func BenchmarkBudgetCliff(b *testing.B) {
	st := scaleStore(b, 10_000)
	over := &scaleData{dir: st.dir + "-over", runs: st.runs, bin: st.bin}
	if out, err := exec.Command("cp", "-a", st.dir, over.dir).CombinedOutput(); err != nil {
		b.Fatalf("copy the store: %v: %s", err, out)
	}
	total := st.streamTotal(b)
	under, err := engine.Open(engine.Options{DataDir: st.dir, StreamBudget: 1 << 40})
	if err != nil {
		b.Fatal(err)
	}
	defer under.Close()
	// 200 bytes under what is stored: the first run's 51 bytes pass it.
	overE, err := engine.Open(engine.Options{DataDir: over.dir, StreamBudget: total - 200})
	if err != nil {
		b.Fatal(err)
	}
	defer overE.Close()
	run := func(e *engine.Engine) time.Duration {
		t0 := time.Now()
		o, err := runToEnd(e, "local:bench", engine.RunRequest{Module: "bench", Hook: "noop", Jail: engine.JailOff})
		if err != nil || !o.OK() {
			b.Fatalf("run: %+v %v", o, err)
		}
		return time.Since(t0)
	}
	var du, do time.Duration
	for b.Loop() {
		du += run(under)
		do += run(overE)
	}
	b.ReportMetric(float64(b.N)/du.Seconds(), "under-runs/s")
	b.ReportMetric(float64(b.N)/do.Seconds(), "over-runs/s")
	b.ReportMetric(du.Seconds()/do.Seconds(), "over/under")
}

type scaleData struct {
	dir  string
	runs int
	bin  string // the product's `warden`, built by go build (buildProduct)
}

func (s *scaleData) streamTotal(b *testing.B) uint64 {
	st, err := storage.Open(storage.Options{Dir: s.dir})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	var n uint64
	st.View(func(tx *storage.Tx) error { n = tx.StreamTotal(); return nil })
	return n
}

var (
	scaleMu     sync.Mutex
	scaleStores = map[int]*scaleData{}
	scaleBase   string
)

// scaleStore is a data dir with the bench module and n generated runs on
// top of one real run, made once per test process.
func scaleStore(b *testing.B, n int) *scaleData {
	b.Helper()
	scaleMu.Lock()
	defer scaleMu.Unlock()
	if s := scaleStores[n]; s != nil {
		return s
	}
	if scaleBase == "" && os.Getenv("WARDEN_SCALE_DIR") != "" {
		// A dir kept from an earlier run (or a fresh one): stores already
		// grown there are reused, so a change can be measured again
		// without growing 100k runs each time. Never removed.
		scaleBase = os.Getenv("WARDEN_SCALE_DIR")
		if err := os.MkdirAll(scaleBase, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	if scaleBase == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			b.Fatal(err)
		}
		os.MkdirAll(base, 0o700)
		if scaleBase, err = os.MkdirTemp(base, "warden-scale-"); err != nil {
			b.Fatal(err)
		}
		os.Chmod(scaleBase, 0o755)
		// Each top-level benchmark removes it when it is done (unless
		// WARDEN_SCALE_KEEP is set, to look at the stores afterwards).
		b.Cleanup(func() {
			if os.Getenv("WARDEN_SCALE_KEEP") != "" {
				b.Logf("kept the stores in %s", scaleBase)
				return
			}
			scaleMu.Lock()
			defer scaleMu.Unlock()
			os.RemoveAll(scaleBase)
			scaleBase, scaleStores = "", map[int]*scaleData{}
		})
	}
	mod := filepath.Join(scaleBase, "module")
	if _, err := os.Stat(mod); err != nil {
		os.MkdirAll(mod, 0o755)
		os.WriteFile(filepath.Join(mod, "module.yaml"), []byte("id: bench\nversion: 1.0.0\ndescription: scale\nhooks:\n  noop:\n    run: [./noop.sh]\n"), 0o644)
		os.WriteFile(filepath.Join(mod, "noop.sh"), []byte("#!/bin/sh\nseq 1 20\n"), 0o755)
	}
	dir := filepath.Join(scaleBase, "data-"+strconv.Itoa(n))
	grown := filepath.Join(scaleBase, "grown-"+strconv.Itoa(n))
	bin := filepath.Join(scaleBase, "bin", "warden")
	if _, err := os.Stat(grown); err == nil {
		// Grown by an earlier run in WARDEN_SCALE_DIR: the marker is
		// written only once growing finished.
		buildProduct(b, bin)
		s := &scaleData{dir: dir, runs: n, bin: bin}
		scaleStores[n] = s
		b.Logf("reusing the store of %d runs in %s", n, dir)
		return s
	}
	os.RemoveAll(dir) // a half-grown store from a run that was stopped
	e, err := engine.Open(engine.Options{DataDir: dir})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := e.AddModule("local:bench", mod); err != nil {
		b.Fatal(err)
	}
	before := len(mustReceipts(b, e))
	o, err := runToEnd(e, "local:bench", engine.RunRequest{Module: "bench", Hook: "noop", Jail: engine.JailOff})
	if err != nil || !o.OK() {
		b.Fatalf("template run: %+v %v", o, err)
	}
	tplReceipts := mustReceipts(b, e)[before:]
	e.Close()
	if n > 0 {
		start := time.Now()
		growStore(b, dir, n, o.Run, tplReceipts)
		b.Logf("grew a store to %d runs in %s", n, time.Since(start).Round(time.Millisecond))
	}
	buildProduct(b, bin)
	if os.Getenv("WARDEN_SCALE_DIR") != "" {
		os.WriteFile(grown, nil, 0o644)
	}
	s := &scaleData{dir: dir, runs: n, bin: bin}
	scaleStores[n] = s
	return s
}

// buildProduct builds warden into bin (buildWarden) once per test
// process; a reused WARDEN_SCALE_DIR may hold an earlier build's. Not
// this test binary: every verb it runs would pay for the start of the
// tests' packages too.
func buildProduct(b *testing.B, bin string) {
	if productBuilt == bin {
		return
	}
	buildWarden(b, bin)
	productBuilt = bin
}

// productBuilt is the bin buildProduct built in this process.
var productBuilt string

func mustReceipts(b *testing.B, e *engine.Engine) []engine.Receipt {
	rs, err := e.Receipts(engine.ReceiptFilter{})
	if err != nil {
		b.Fatal(err)
	}
	return rs
}

// growStore adds n runs like tpl: each with the template's records under
// a fresh run id (its receipts re-appended with the id replaced, so the
// chain stays intact), 20 stream lines and a revoked token,
// genBatch runs per commit.
func growStore(b *testing.B, dir string, n int, tpl engine.RunRecord, receipts []engine.Receipt) {
	st, err := storage.Open(storage.Options{Dir: dir, NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	lines := make([]storage.Line, 20)
	for i := range lines {
		lines[i] = storage.Line{Level: storage.LevelInfo, Text: strconv.Itoa(i + 1)}
	}
	// The template run's token was revoked when it ended, so only its
	// tombstone is kept; each generated run gets a token like it (issued
	// for the run's session, revoked at its end) under a random-looking id
	// (a real id is SHA-256 of a random token, so ids land anywhere in
	// the key space).
	var trust storage.TrustRecord
	st.View(func(tx *storage.Tx) (err error) { trust, _, err = tx.Trust(); return err })
	if trust.Generation == 0 {
		b.Fatal("the template store has no trust root")
	}
	tok := storage.TokenRecord{MAC: strings.Repeat("ab", 32), Scope: "hook", Generation: trust.Generation}
	at := time.Now().Add(-time.Duration(n) * time.Second) // one run a second, ending now
	for done := 0; done < n; {
		batch := min(genBatch, n-done)
		if _, err := st.Update(func(tx *storage.Tx) error {
			for i := 0; i < batch; i++ {
				now := at.Add(time.Duration(done+i) * time.Second).UTC()
				r := tpl
				r.ID = st.NewRunID(now)
				ended := now.Add(5 * time.Millisecond)
				r.Started, r.Deadline, r.Ended = now, now.Add(time.Minute), &ended
				if err := tx.CreateRun(r); err != nil {
					return err
				}
				for j := range lines {
					lines[j].At = now
				}
				if _, _, err := tx.AppendLines(r.ID, lines, 0); err != nil {
					return err
				}
				t := tok
				id := sha256.Sum256([]byte(r.ID))
				t.ID = hex.EncodeToString(id[:])
				t.Session, t.Subject = r.ID, r.ID
				t.Created, t.Expires, t.Revoked = now, now.Add(time.Minute), &ended
				if err := tx.PutToken(t); err != nil {
					return err
				}
				for _, rc := range receipts {
					d := storage.Draft{Kind: rc.Kind, Actor: strings.ReplaceAll(rc.Actor, tpl.ID, r.ID), Subject: strings.ReplaceAll(rc.Subject, tpl.ID, r.ID),
						Summary: strings.ReplaceAll(rc.Summary, tpl.ID, r.ID)}
					if len(rc.Details) > 0 {
						d.Details = rawJSON(bytes.ReplaceAll(rc.Details, []byte(tpl.ID), []byte(r.ID)))
					}
					if _, err := tx.AppendReceipt(d); err != nil {
						return err
					}
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		done += batch
	}
}

// genBatch is how many runs the generator writes per commit (real runs
// commit alone or a few at a time: the fill of the receipts and tokens
// pages differs by a few percent either way, and a thousand a commit
// keeps 100k runs to half a minute).
const genBatch = 1000

// rawJSON marshals as itself.
type rawJSON []byte

func (r rawJSON) MarshalJSON() ([]byte, error) { return r, nil }

// reportDBSize reports the file's size and the bytes of it in use (the
// file grows in steps of up to 1 GiB; free pages are reused first), per
// run. The store must not be open.
func reportDBSize(b *testing.B, st *scaleData) {
	path := filepath.Join(st.dir, storage.DBFile)
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	var used int64
	var buckets []string
	db.View(func(tx *bolt.Tx) error {
		used = tx.Size() - int64(db.Stats().FreePageN*db.Info().PageSize)
		// Where the bytes go: each top-level bucket's pages (nested
		// buckets' included) per run, and how full its leaf pages are.
		ps := db.Info().PageSize
		return tx.ForEach(func(name []byte, bk *bolt.Bucket) error {
			s := bk.Stats()
			pages := s.BranchPageN + s.BranchOverflowN + s.LeafPageN + s.LeafOverflowN
			if pages > 0 && st.runs > 0 {
				buckets = append(buckets, fmt.Sprintf("%s %.0f B/run (%d keys, leaf pages %.0f%% full)", name,
					float64(pages*ps)/float64(st.runs), s.KeyN, 100*float64(s.LeafInuse)/float64((s.LeafPageN+s.LeafOverflowN)*ps)))
			}
			return nil
		})
	})
	if len(buckets) > 0 {
		b.Logf("%d runs: %s", st.runs, strings.Join(buckets, "; "))
	}
	b.ReportMetric(float64(fi.Size())/(1<<20), "db-MiB")
	if st.runs > 0 {
		b.ReportMetric(float64(fi.Size())/float64(st.runs), "file-B/run")
		b.ReportMetric(float64(used)/float64(st.runs), "used-B/run")
	}
}

// benchVerb runs a warden verb as its own process on the empty store and
// on st in turn (no holder: it opens the store itself) and reports the
// medians and peak RSS of both. The RSS is read through GNU time when it
// is installed: a child forked from this (large) benchmark process would
// report this process's RSS as its own peak (Linux carries the pre-exec
// high-water mark over an exec).
func benchVerb(b *testing.B, empty, st *scaleData, argv ...string) {
	gnuTime := "/usr/bin/time"
	if _, err := os.Stat(gnuTime); err != nil {
		gnuTime = ""
		b.Log("no /usr/bin/time (apt-get install time): peak RSS not measured")
	}
	rss := map[*scaleData]int64{}
	run := func(s *scaleData) time.Duration {
		args := append([]string{"--data-dir", s.dir}, argv...)
		cmd := exec.Command(s.bin, args...)
		if gnuTime != "" {
			cmd = exec.Command(gnuTime, append([]string{"-f", "RSS %M", s.bin}, args...)...)
		}
		cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		t0 := time.Now()
		if err := cmd.Run(); err != nil {
			b.Fatalf("warden %s: %v\n%s%s", strings.Join(argv, " "), err, out.String(), errb.String())
		}
		d := time.Since(t0)
		if i := strings.LastIndex(errb.String(), "RSS "); i >= 0 {
			if kib, err := strconv.ParseInt(strings.TrimSpace(errb.String()[i+4:]), 10, 64); err == nil {
				rss[s] = max(rss[s], kib)
			}
		}
		return d
	}
	var de, dn []time.Duration
	for b.Loop() {
		de, dn = append(de, run(empty)), append(dn, run(st))
	}
	reportPair(b, de, dn)
	if rss[st] > 0 && rss[empty] > 0 {
		b.ReportMetric(float64(rss[empty])/1024, "empty-RSS-MiB")
		b.ReportMetric(float64(rss[st])/1024, "RSS-MiB")
		b.ReportMetric(float64(rss[st])/float64(rss[empty]), "RSS-x-empty")
	}
}

// BenchmarkFourLoops: four `warden hook run bench noop` loops attached to
// a `warden serve` (each run a CLI process, jailed), against four loops
// of the bare bwrap command line the spawner builds for that hook (same
// plan and environment, no engine, no CLI), in turn: each iteration is
// loopRuns runs of each of four loops attached, then the same bare. A
// loop starts its next run as soon as its last one ended (it does not
// wait for the other three), as four operators' or agents' loops would.
// Goal: attached/bare >= 0.6 in runs per second.
//
// On a shared host, runs per second measure the neighbours' load as much
// as warden; the machine time each run costs does not. So it also
// reports CPU ms per run: for attached runs, the CLI processes' and the
// serve process's (with the jails it reaped; its share is also given
// alone), and for bare runs, the
// bwrap processes'; and what a host with that machine time alone would
// give, cpu-bare/cpu-attached.
//
//	go test -run '^$' -bench FourLoops -benchtime 4x -count 3 ./cmd/warden/
func BenchmarkFourLoops(b *testing.B) {
	if _, err := os.Stat(jail.DefaultBwrap); err != nil {
		b.Skip("bubblewrap is not installed: apt-get install bubblewrap")
	}
	st := scaleStore(b, 0)
	srv := exec.Command(st.bin, "--data-dir", st.dir, "serve")
	var out lockedBuffer
	srv.Stdout, srv.Stderr = &out, &out
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(out.String(), "serving data dir"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("serve did not start: %s", out.String())
		}
	}

	jl, err := jail.New(jail.DefaultBwrap)
	if err != nil {
		b.Fatal(err)
	}
	runDir := b.TempDir()
	os.WriteFile(filepath.Join(runDir, jail.SocketName), nil, 0o600) // the broker's socket, a required row of the plan
	plan, err := jail.BuildPlan(jail.PlanInput{ModuleDir: filepath.Join(filepath.Dir(st.dir), "module"), RunDir: runDir, Warden: st.bin})
	if err != nil {
		b.Fatal(err)
	}
	env := hooks.BuildEnv(os.Environ(), map[string]string{"WARDEN_SOCKET": jail.SocketTarget, "WARDEN_TOKEN": "cap_" + strings.Repeat("0", 64),
		"WARDEN_RUN": "bench", "WARDEN_MODULE": "bench", "WARDEN_HOOK": "noop"}, jail.BinDir)
	bare := func() error {
		s := jl.Spawner(plan, false)
		cmd, err := s.Command(hooks.Spawn{Argv: []string{jail.ModuleTarget + "/noop.sh"}, Dir: jail.ModuleTarget, Env: env})
		if err != nil {
			return err
		}
		cmd.Stdout = io.Discard
		err = cmd.Start()
		s.Release()
		if err == nil {
			err = cmd.Wait()
		}
		return err
	}
	attached := func() error {
		cmd := exec.Command(st.bin, "--data-dir", st.dir, "hook", "run", "bench", "noop")
		cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
		if o, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%v: %s", err, o)
		}
		return nil
	}
	const loopRuns = 10
	four := func(run func() error) time.Duration {
		t0 := time.Now()
		errs := make(chan error, 4)
		for i := 0; i < 4; i++ {
			go func() {
				for range loopRuns {
					if err := run(); err != nil {
						errs <- err
						return
					}
				}
				errs <- nil
			}()
		}
		for i := 0; i < 4; i++ {
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(t0)
	}
	var da, db, ca, cs, cb time.Duration
	for b.Loop() {
		c0, s0 := childrenCPU(), procCPU(srv.Process.Pid)
		da += four(attached)
		c1, s1 := childrenCPU(), procCPU(srv.Process.Pid)
		db += four(bare)
		c2 := childrenCPU()
		ca += c1 - c0 + s1 - s0
		cs += s1 - s0
		cb += c2 - c1
	}
	runs := float64(4 * loopRuns * b.N)
	b.ReportMetric(runs/da.Seconds(), "attached-runs/s")
	b.ReportMetric(runs/db.Seconds(), "bare-runs/s")
	b.ReportMetric(db.Seconds()/da.Seconds(), "attached/bare")
	b.ReportMetric(float64(ca.Microseconds())/1000/runs, "cpu-ms/attached")
	b.ReportMetric(float64(cs.Microseconds())/1000/runs, "cpu-ms/attached-serve")
	b.ReportMetric(float64(cb.Microseconds())/1000/runs, "cpu-ms/bare")
	b.ReportMetric(cb.Seconds()/ca.Seconds(), "cpu-bare/attached")
}

// childrenCPU is the user and system time of this process's reaped
// children (and theirs).
func childrenCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU is the user and system time of process pid and of the children
// it reaped, from /proc (clock ticks: 10 ms each here).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	// After the comm: state is field 3, utime 14, stime 15, cutime 16,
	// cstime 17 (1-based in proc(5)).
	var ticks int64
	for _, k := range []int{14, 15, 16, 17} {
		if len(f) > k-3 {
			n, _ := strconv.ParseInt(f[k-3], 10, 64)
			ticks += n
		}
	}
	return time.Duration(ticks) * (time.Second / 100)
}

// runToEnd starts a run and waits for its outcome.
func runToEnd(e interface {
	StartRun(engine.Actor, engine.RunRequest) (*engine.RunHandle, error)
}, actor engine.Actor, req engine.RunRequest) (engine.Outcome, error) {
	h, err := e.StartRun(actor, req)
	if err != nil {
		return engine.Outcome{}, err
	}
	return h.Wait(), nil
}
