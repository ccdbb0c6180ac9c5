package termsafe

import (
	"bytes"
	"testing"
	"unicode/utf8"
)

// screenHolds: out keeps the invariant of Screen.
func screenHolds(t *testing.T, out []byte) {
	t.Helper()
	for i := 0; i+1 < len(out); i++ {
		if out[i] == 0x1b {
			switch out[i+1] {
			case ']', 'P', '_', '^', 'X':
				t.Fatalf("a string sequence passed: %q", out)
			}
		}
	}
	for i := 0; i < len(out); {
		r, n := utf8.DecodeRune(out[i:])
		if r >= 0x80 && r <= 0x9f {
			t.Fatalf("a C1 control passed: %q", out)
		}
		i += n
	}
}

// screen filters in through a Screen, written in pieces of size step.
func screen(in []byte, step int) []byte {
	var b bytes.Buffer
	s := NewScreen(&b)
	for len(in) > 0 {
		n := min(step, len(in))
		s.Write(in[:n])
		in = in[n:]
	}
	return b.Bytes()
}

func TestScreen(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain ✓ text\r\n", "plain ✓ text\r\n"},
		{"\x1b[1;31mred\x1b[0m \x1b[?1049h\x1b[2J\x1b[H", "\x1b[1;31mred\x1b[0m \x1b[?1049h\x1b[2J\x1b[H"},
		{"a\x1b]52;c;aGVsbG8=\x07b", "ab"},                    // clipboard write
		{"a\x1b]0;title\x1b\\b", "ab"},                        // title, ST-terminated
		{"a\x1bP$q\"p\x1b\\b", "ab"},                          // DECRQSS query
		{"a\x1b_apc\x1b\\\x1b^pm\x1b\\\x1bXsos\x1b\\b", "ab"}, // APC, PM, SOS
		{"a\u009b31mb\u009d0;x\u0007c", "a31mb0;x\u0007c"},    // C1 as runes
		{"\x1b7\x1b8\x1b=", "\x1b7\x1b8\x1b="},                // two-byte ESC sequences
		{"x\x7fy\xc3(z", "xy(z"},                              // DEL, invalid UTF-8
	} {
		for _, step := range []int{1, 2, 3, 1000} {
			if got := string(screen([]byte(tc.in), step)); got != tc.want {
				t.Errorf("Screen(%q) in pieces of %d = %q, want %q", tc.in, step, got, tc.want)
			}
		}
	}
}

// FuzzScreen: whatever the program writes, split wherever, no string
// sequence and no C1 control reaches the terminal, and text with no
// escape in it passes whole.
func FuzzScreen(f *testing.F) {
	for _, s := range []string{"\x1b]52;c;eA==\x07", "\x1b[31mx", "\x1bP1$r\x1b\\", "\xc2\x9b", "\x1b\x1b]0;t\x07", "é\x1b[", "plain"} {
		f.Add([]byte(s), uint8(1))
	}
	f.Fuzz(func(t *testing.T, in []byte, step uint8) {
		out := screen(in, int(step)+1)
		screenHolds(t, out)
		if !bytes.ContainsAny(in, "\x1b\x7f") && utf8.Valid(in) && !bytes.ContainsFunc(in, func(r rune) bool { return r >= 0x80 && r <= 0x9f }) && !bytes.Equal(out, in) {
			t.Fatalf("plain text changed: %q -> %q", in, out)
		}
	})
}
