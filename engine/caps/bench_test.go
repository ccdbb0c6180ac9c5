package caps

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/wardenhq/warden/storage"
)

// BenchmarkRevokeDeadSession is what the engine pays at open for each run
// a dead engine left: issue a session's token, then revoke the session in
// its own transaction, on a store holding few and many other live tokens,
// the two in turn every iteration. x-few is the ratio of the medians: not
// 1.0, since a bigger tree is deeper and a commit copies more pages, but
// nothing like a walk of every token, which the index spares the revoke
// (walk-p50-µs, timed on the same store in the same iterations):
//
//	go test -run '^$' -bench RevokeDeadSession -benchtime 200x ./engine/caps/
func BenchmarkRevokeDeadSession(b *testing.B) {
	open := func(others int) *Authority {
		st, err := storage.Open(storage.Options{Dir: filepath.Join(b.TempDir(), "data"), NoSync: true})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		a, err := Open(st, actor)
		if err != nil {
			b.Fatal(err)
		}
		for done := 0; done < others; done += 1000 {
			if _, err := st.Update(func(tx *storage.Tx) error {
				for i := done; i < min(done+1000, others); i++ {
					m, err := a.Mint(actor, "mod", "hook", fmt.Sprintf("other-%d", i), time.Hour)
					if err != nil {
						return err
					}
					if err := m.Record(tx); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				b.Fatal(err)
			}
		}
		return a
	}
	few, many := open(10), open(20_000)
	var df, dm, dw []time.Duration
	n := 0
	one := func(a *Authority) time.Duration {
		n++
		session := fmt.Sprintf("dead-%d", n)
		if _, err := a.Issue(actor, session, "hook", session, time.Hour); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if _, err := a.store.Update(func(tx *storage.Tx) error {
			return a.RevokeSessionTx(tx, "engine", session, "revoked session "+session+" (the run was found dead)")
		}); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	for b.Loop() {
		df = append(df, one(few))
		dm = append(dm, one(many))
		t0 := time.Now()
		many.store.View(func(tx *storage.Tx) error {
			return tx.EachToken(func(storage.TokenRecord) error { return nil })
		})
		dw = append(dw, time.Since(t0))
	}
	slices.Sort(df)
	slices.Sort(dm)
	slices.Sort(dw)
	pf, pm := df[len(df)/2], dm[len(dm)/2]
	b.ReportMetric(float64(dw[len(dw)/2].Microseconds()), "walk-p50-µs")
	b.ReportMetric(float64(pf.Microseconds()), "few-p50-µs")
	b.ReportMetric(float64(pm.Microseconds()), "many-p50-µs")
	b.ReportMetric(float64(pm)/float64(pf), "x-few")
}
