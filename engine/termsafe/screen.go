package termsafe

import (
	"io"
	"unicode/utf8"
)

// Screen passes a full-screen program's output to the operator's terminal
// (`warden run` from a terminal, where the command draws its own TUI)
// with only what drawing needs: text, C0 layout controls, CSI sequences
// (cursor, colour, erase, modes) and two-byte ESC sequences. It drops, whole, every
// string sequence (OSC, DCS, APC, PM, SOS), which can write the clipboard
// (OSC 52), set the title, rename files in some terminals, or query the
// terminal so that its reply lands on the operator's shell after the
// program ends; and every C1 control, 7-bit or as a UTF-8 rune. A
// sequence split across writes is held until its end, and one that grows
// past maxSequence is dropped.
//
// The invariant, for any input split any way: the output holds no ESC
// followed by ] P _ ^ or X, and no rune U+0080..U+009F.
type Screen struct {
	w     io.Writer
	state screenState
	seq   []byte // the escape sequence being read, kept until it ends
	rune  []byte // a UTF-8 rune split across writes
}

type screenState uint8

const (
	screenText   screenState = iota
	screenEsc                // after ESC
	screenCSI                // ESC [ ... until a final byte
	screenString             // OSC, DCS, APC, PM, SOS: dropped until ST or BEL
	screenStrEsc             // ESC inside a string: ST is ESC \
)

// maxSequence bounds a CSI sequence: a longer one is not drawing.
const maxSequence = 256

// NewScreen returns a Screen writing to w.
func NewScreen(w io.Writer) *Screen { return &Screen{w: w} }

// Write filters p to the underlying writer. It reports len(p) written
// when the underlying write succeeds (dropped bytes count as written).
func (s *Screen) Write(p []byte) (int, error) {
	out := make([]byte, 0, len(p))
	for _, c := range p {
		out = s.step(out, c)
	}
	if len(out) > 0 {
		if _, err := s.w.Write(out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

func (s *Screen) step(out []byte, c byte) []byte {
	switch s.state {
	case screenEsc:
		switch c {
		case '[':
			s.state, s.seq = screenCSI, append(s.seq[:0], 0x1b, '[')
		case ']', 'P', '_', '^', 'X':
			s.state = screenString
		case 0x1b:
			// ESC ESC: the first is dropped, the second starts over.
		default:
			s.state = screenText
			if c >= 0x20 && c < 0x7f {
				out = append(out, 0x1b, c)
			}
		}
	case screenCSI:
		switch {
		case c >= 0x40 && c <= 0x7e: // the final byte
			out = append(append(out, s.seq...), c)
			s.state = screenText
		case c >= 0x20 && c <= 0x3f && len(s.seq) < maxSequence:
			s.seq = append(s.seq, c)
		case c == 0x1b:
			s.state = screenEsc // an unfinished CSI is dropped
		default: // a control, or too long: not a drawing, dropped
			s.state = screenText
		}
	case screenString:
		switch c {
		case 0x07:
			s.state = screenText
		case 0x1b:
			s.state = screenStrEsc
		}
	case screenStrEsc:
		if c == '\\' {
			s.state = screenText
		} else {
			s.state = screenString
		}
	default:
		out = s.text(out, c)
	}
	return out
}

// text takes one byte of text: a C0 control other than ESC passes (a
// program draws with CR, LF, BS, TAB), DEL is dropped, and UTF-8 runes
// pass whole unless they are C1 controls (or invalid).
func (s *Screen) text(out []byte, c byte) []byte {
	switch {
	case len(s.rune) > 0 || c >= 0x80:
		s.rune = append(s.rune, c)
		if !utf8.FullRune(s.rune) {
			if len(s.rune) >= utf8.UTFMax {
				s.rune = s.rune[:0]
			}
			return out
		}
		r, n := utf8.DecodeRune(s.rune)
		rest := append([]byte(nil), s.rune[n:]...)
		s.rune = s.rune[:0]
		if r != utf8.RuneError && !(r >= 0x80 && r <= 0x9f) {
			out = utf8.AppendRune(out, r)
		}
		// An invalid first byte is dropped alone: what followed it is
		// read again, as text.
		for _, b := range rest {
			out = s.step(out, b)
		}
	case c == 0x1b:
		s.state = screenEsc
	case c != 0x7f:
		out = append(out, c)
	}
	return out
}
