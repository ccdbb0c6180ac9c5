package protocol

import (
	"bytes"
	"strings"
	"testing"
)

// TestAppendLogIsEncode: the fast log encoder gives the very bytes Encode
// does, for every ASCII byte, the separators JSON escapes and plain text.
func TestAppendLogIsEncode(t *testing.T) {
	var all strings.Builder
	for c := range 0x80 {
		all.WriteByte(byte(c))
	}
	msgs := []string{"", "plain line", all.String(), "grüße 日本語 🎉", "a\u2028b\u2029c", `"quoted" \back\ <tag> & amp`,
		strings.Repeat("x\t", 1000), "\x00\x1f\x7f"}
	for _, level := range levels {
		for _, m := range msgs {
			want, err := Encode(&Log{Level: level, Message: m})
			if err != nil {
				t.Fatal(err)
			}
			if got := AppendLog(nil, level, m); !bytes.Equal(got, want) {
				t.Errorf("%q:\nAppendLog %q\nEncode    %q", m, got, want)
			}
		}
	}
}
