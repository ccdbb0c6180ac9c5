package storage

import "time"

// SetTreeWalkDelay sets how long after Open the background walk starts,
// for the stores opened until the returned func restores it.
func SetTreeWalkDelay(d time.Duration) (restore func()) {
	old := treeWalkDelay
	treeWalkDelay = d
	return func() { treeWalkDelay = old }
}

// BackgroundWalkDone is closed once s's background walk has ended.
func BackgroundWalkDone(s *Store) <-chan struct{} { return s.walked }
