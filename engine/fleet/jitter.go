package fleet

import (
	"math/rand/v2"
	"time"
)

// A fleet's hosts are often started together (a rollout, a reboot of
// every machine, the fleet's server coming back), and periodic work on
// plain tickers would then keep them in lockstep: every host publishing
// its heartbeat, its timed checkpoint, in the same millisecond, for
// ever. The server works through such a burst one message at a time, so
// an operator's decision arriving in it waits behind hundreds of stores
// (the load test measured 15-50 ms, against 1.2 ms otherwise). Periodic
// work therefore starts at a random phase and each period varies by
// ±10%, which spreads the hosts out within a few periods whatever their
// start.

// FirstAfter is the wait before periodic work's first round: a random
// point in one period.
func FirstAfter(period time.Duration) time.Duration {
	if period <= 0 {
		return 0
	}
	return rand.N(period)
}

// Jittered is one period's wait: period ±10%.
func Jittered(period time.Duration) time.Duration {
	if period < 10 {
		return period
	}
	return period - period/10 + rand.N(period/5)
}
