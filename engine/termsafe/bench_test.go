package termsafe

import (
	"strings"
	"testing"
)

// The cost of String against strings.ToValidUTF8, a single pass over the
// same text that copies only when it must: the baseline a line escaper
// can hardly beat. Run both in one go:
//
//	go test -run '^$' -bench . ./engine/termsafe/
var benchLines = map[string]string{
	"ascii":   strings.Repeat("2026-11-29 14:00:00 info all good, 42 items done ", 4),
	"utf8":    strings.Repeat("grüße 日本語 עברית 🎉 done ", 8),
	"hostile": strings.Repeat(hostile, 4),
}

func BenchmarkString(b *testing.B) {
	for _, name := range []string{"ascii", "utf8", "hostile"} {
		s := benchLines[name]
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(s)))
			for b.Loop() {
				_ = String(s)
			}
		})
	}
}

func BenchmarkBaselineToValidUTF8(b *testing.B) {
	for _, name := range []string{"ascii", "utf8", "hostile"} {
		s := benchLines[name]
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(s)))
			for b.Loop() {
				_ = strings.ToValidUTF8(s, "\ufffd")
			}
		})
	}
}
