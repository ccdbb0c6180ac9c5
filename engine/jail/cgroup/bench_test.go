package cgroup

import (
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// What a run's group costs: create, start /bin/true in it, wait, delete;
// against starting /bin/true with no group, in the same run.
//
//	go test ./engine/jail/cgroup/ -run '^$' -bench . -benchtime 50x
func BenchmarkGroupLifecycle(b *testing.B) {
	if Probe().Version == 0 {
		b.Skip("no cgroups")
	}
	var tNew, tStart, tWait, tDel time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		g, err := New("bench-"+strconv.Itoa(i), Limits{Memory: 512 << 20, Pids: 256, CPU: 1})
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		c := exec.Command("/bin/true")
		if err := g.Start(c); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		c.Wait()
		t3 := time.Now()
		if err := g.Delete(); err != nil {
			b.Fatal(err)
		}
		t4 := time.Now()
		tNew += t1.Sub(t0)
		tStart += t2.Sub(t1)
		tWait += t3.Sub(t2)
		tDel += t4.Sub(t3)
	}
	n := float64(b.N)
	b.ReportMetric(float64(tNew.Nanoseconds())/n, "new-ns")
	b.ReportMetric(float64(tStart.Nanoseconds())/n, "start-ns")
	b.ReportMetric(float64(tWait.Nanoseconds())/n, "wait-ns")
	b.ReportMetric(float64(tDel.Nanoseconds())/n, "delete-ns")
}

func BenchmarkNoGroupBaseline(b *testing.B) {
	for i := 0; i < b.N; i++ {
		c := exec.Command("/bin/true")
		if err := c.Run(); err != nil {
			b.Fatal(err)
		}
	}
}
