package storage

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// All benchmarks run with fsync on, on a real file in b.TempDir().

func benchDraft(i int) Draft {
	return Draft{Kind: "hook.run", Actor: "engine", Subject: "mod/pre-commit", Summary: fmt.Sprintf("hook run %d finished: exit 0", i),
		Details: map[string]any{"run": fmt.Sprintf("run-%08d", i), "exit": 0, "duration_ms": 1234, "module": "mod"}}
}

func reportRate(b *testing.B, n int64) {
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(n)/s, "receipts/s")
	}
}

func BenchmarkAppendSingle(b *testing.B) {
	s := openStore(b, filepath.Join(b.TempDir(), "data"))
	defer s.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.AppendReceipt(benchDraft(i)); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportRate(b, int64(b.N))
}

func BenchmarkAppendGroup32(b *testing.B) {
	s := openStore(b, filepath.Join(b.TempDir(), "data"))
	defer s.Close()
	var n atomic.Int64
	b.SetParallelism(16) // 16 x GOMAXPROCS(2) = 32 goroutines
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.AppendReceipt(benchDraft(int(n.Add(1)))); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	reportRate(b, n.Load())
}

// BenchmarkBoltUpdateBaseline is one raw bbolt transaction per op, one
// ~300-byte value each, with the options Open uses: the floor a single
// fsync'd commit costs on this disk.
func BenchmarkBoltUpdateBaseline(b *testing.B) {
	db, err := bolt.Open(filepath.Join(b.TempDir(), "bolt.db"), 0o600, &bolt.Options{Timeout: time.Second, NoFreelistSync: true, FreelistType: bolt.FreelistMapType})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	val := bytes.Repeat([]byte("v"), 300)
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("b")); return err }); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket([]byte("b")).Put(u64key(uint64(i+1)), val) }); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s, "commits/s")
	}
}

func BenchmarkVerify100k(b *testing.B) {
	const total, perTx = 100_000, 2_000
	s := openStore(b, filepath.Join(b.TempDir(), "data"))
	defer s.Close()
	for done := 0; done < total; done += perTx {
		if _, err := s.Update(func(tx *Tx) error {
			for i := 0; i < perTx; i++ {
				if _, err := tx.AppendReceipt(benchDraft(done + i)); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("verify", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			v, err := s.VerifyReceipts()
			if err != nil || !v.Intact || v.Count != total {
				b.Fatalf("%+v %v", v, err)
			}
		}
	})
}

// BenchmarkFreelist measures bbolt's freelist choice on a store holding
// 10k runs' worth of records (a nested stream bucket, a run record and
// four receipts each): open (and close) time, and appends with fsync, one
// per commit, with the freelist rebuilt at open (NoFreelistSync, "scan")
// against written with every commit ("sync").
func BenchmarkFreelist(b *testing.B) {
	src := filepath.Join(b.TempDir(), "data")
	growRuns(b, src, 10_000, 1)
	s := openStore(b, src)
	s.Close()
	defer func(was bool) { noFreelistSync = was }(noFreelistSync)
	for _, mode := range []struct {
		name string
		scan bool
	}{{"scan", true}, {"sync", false}} {
		noFreelistSync = mode.scan
		dir := filepath.Join(b.TempDir(), "data")
		copyDir(b, src, dir)
		openStore(b, dir).Close() // the first open under a mode converts
		b.Run(mode.name+"/open", func(b *testing.B) {
			for b.Loop() {
				openStore(b, dir).Close()
			}
		})
		b.Run(mode.name+"/append", func(b *testing.B) {
			s := openStore(b, dir)
			defer s.Close()
			i := 0
			for b.Loop() {
				if _, err := s.AppendReceipt(benchDraft(i)); err != nil {
					b.Fatal(err)
				}
				i++
			}
			reportRate(b, int64(b.N))
		})
	}
}

// growRuns adds n runs' worth of records to the store in dir (a run
// record, a nested stream bucket of lines lines, four receipts each), 500
// runs a commit, and closes it.
func growRuns(b *testing.B, dir string, n, lines int) {
	s := openStore(b, dir)
	defer s.Close()
	for done := 0; done < n; done += 500 {
		if _, err := s.Update(func(tx *Tx) error {
			for i := done; i < min(done+500, n); i++ {
				id := s.NewRunID(time.Now())
				r := RunRecord{ID: id, Module: "m", Hook: "h", Actor: "local:b", Status: RunSucceeded, JailMode: "off", Started: time.Now(), Ended: new(time.Time)}
				*r.Ended = r.Started
				if err := tx.CreateRun(r); err != nil {
					return err
				}
				ls := make([]Line, lines)
				for j := range ls {
					ls[j] = Line{At: time.Now(), Level: LevelInfo, Text: fmt.Sprintf("line %d of a hook's output", j)}
				}
				if _, _, err := tx.AppendLines(id, ls, 0); err != nil {
					return err
				}
				for j := 0; j < 4; j++ {
					if _, err := tx.AppendReceipt(benchDraft(i)); err != nil {
						return err
					}
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOpenGrown is what every CLI verb pays for the store: Open,
// the newest run read (`hook runs --limit 1`), Close, on an empty store
// and on one grown by 5,000 runs and by 100,000 (16 and 243 MiB, a few
// seconds to build), alternated in one loop so that both see the same
// machine. It reports each one's time an op and grown/empty, the
// figure the open-time indexes are held to (goal at most 1.5).
func BenchmarkOpenGrown(b *testing.B) {
	empty := filepath.Join(b.TempDir(), "empty")
	openStore(b, empty).Close()
	for _, n := range []int{5_000, 100_000} {
		grown := filepath.Join(b.TempDir(), fmt.Sprint(n))
		growRuns(b, grown, n, 8)
		fi, err := os.Stat(filepath.Join(grown, DBFile))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("runs=%d", n), func(b *testing.B) {
			var took [2]time.Duration
			for b.Loop() {
				for i, dir := range []string{empty, grown} {
					start := time.Now()
					s := openStore(b, dir)
					if err := s.View(func(tx *Tx) error { _, err := tx.Runs(1); return err }); err != nil {
						b.Fatal(err)
					}
					s.Close()
					took[i] += time.Since(start)
				}
			}
			b.ReportMetric(float64(took[0].Nanoseconds())/float64(b.N), "empty-ns/op")
			b.ReportMetric(float64(took[1].Nanoseconds())/float64(b.N), "grown-ns/op")
			b.ReportMetric(float64(took[1])/float64(took[0]), "grown/empty")
			b.ReportMetric(float64(fi.Size())/(1<<20), "grown-MiB")
		})
	}
}

func copyDir(b *testing.B, from, to string) {
	if err := os.MkdirAll(to, 0o700); err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{DBFile, SealKeyFile} {
		raw, err := os.ReadFile(filepath.Join(from, name))
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, name), raw, 0o600); err != nil {
			b.Fatal(err)
		}
	}
}
