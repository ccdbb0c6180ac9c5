package fleet

import (
	"testing"
	"time"
)

// TestJitterSpreadsHosts: hosts started together draw first rounds
// across the whole period and later periods within ±10%, so they do
// not stay in lockstep.
func TestJitterSpreadsHosts(t *testing.T) {
	const p = 5 * time.Second
	var lo, hi time.Duration = p, 0
	firsts := map[time.Duration]bool{}
	for range 1000 {
		f := FirstAfter(p)
		if f < 0 || f >= p {
			t.Fatalf("FirstAfter(%s) = %s, outside [0, %s)", p, f, p)
		}
		firsts[f/(p/10)] = true // which tenth of the period
		j := Jittered(p)
		if j < p*9/10 || j > p*11/10 {
			t.Fatalf("Jittered(%s) = %s, outside ±10%%", p, j)
		}
		lo, hi = min(lo, j), max(hi, j)
	}
	if len(firsts) != 10 {
		t.Errorf("1000 first rounds fell in %d of the period's 10 tenths: hosts would bunch", len(firsts))
	}
	if hi-lo < p/10 {
		t.Errorf("periods vary only from %s to %s: hosts in step stay in step", lo, hi)
	}
}
