package engine

import (
	"testing"
	"warden/storage"
)

func BenchmarkZZUpdateNoop(b *testing.B) {
	e := openEngine(b, Options{})
	for i := 0; i < b.N; i++ {
		e.store.Update(func(tx *storage.Tx) error { return nil })
	}
}
func BenchmarkZZPrune(b *testing.B) {
	e := openEngine(b, Options{})
	for i := 0; i < b.N; i++ {
		e.pruneStreams()
	}
}
