// Package termsafe makes text that a hook or a module author wrote safe to
// put on an operator's terminal: the CLI's human output and every pane of
// the console draw such text through this package and nothing else.
//
// The invariant: what String returns holds no C0 control (tab and newline
// included), no DEL, no C1 control, no Unicode format control (the bidi
// overrides and isolates, zero-width characters, BOM...), no line or
// paragraph separator and no invalid UTF-8. So the text cannot move the
// cursor, clear the screen, set the title, write the clipboard (OSC 52),
// overwrite itself with a carriage return, or reorder what is shown. Every
// other rune (printable ASCII, letters of any script, marks, symbols,
// emoji, spaces) is kept as it is.
//
// Escaped runes stay visible: a C0 control becomes its Unicode "control
// picture" (ESC shows as ␛, CR as ␍, NUL as ␀), DEL becomes ␡, and every
// other hidden rune (a C1 control, a bidi or zero-width format character,
// a line or paragraph separator) becomes Substitute, ␦. A tab becomes the
// spaces to the next tab stop.
//
// U+FFFD (�) is not one of warden's marks: it is the usual sign of bytes
// that were not UTF-8, and the engine writes it for such bytes when it
// stores a hook's line. So a U+FFFD in the text is drawn as itself, and an
// invalid byte is drawn as U+FFFD too: both mean "the hook sent something
// that was not text", and neither can be mistaken for a control warden
// escaped.
package termsafe

import (
	"os"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/clipperhouse/displaywidth"
)

// TabWidth is the distance between tab stops.
const TabWidth = 4

// tabSpaces is a whole tab's spaces; a tab takes a prefix of it.
const tabSpaces = "    "

// Substitute is how a hidden rune is drawn: U+2426, SYMBOL FOR SUBSTITUTE
// FORM TWO, one cell wide. It is distinct from U+FFFD so that an operator
// can tell "warden hid a control here" from "the hook's bytes were not
// UTF-8".
const Substitute = "\u2426"

// widths measures a rune's cells as lipgloss does (charmbracelet/x/ansi's
// grapheme width, from displaywidth, with its RUNEWIDTH_EASTASIAN
// switch), so that what a pane counts while drawing is what lipgloss
// pads and cuts (TestCellWidthsAreLipglossWidths). Not go-runewidth: it
// disagrees with lipgloss on 1,599 runes, and its init compiles a regexp
// that would cost every start of the in-jail helper.
var widths = displaywidth.Options{EastAsianWidth: eastAsian()}

func eastAsian() bool {
	ea, err := strconv.ParseBool(os.Getenv("RUNEWIDTH_EASTASIAN"))
	return err == nil && ea
}

// pictures are the Unicode control pictures of the C0 controls, built
// once so that drawing one does not allocate.
var pictures = func() (p [0x20]string) {
	for r := range p {
		p[r] = string(rune(0x2400 + r))
	}
	return p
}()

// Rune is how r is drawn when it starts at display column col: the text to
// write and the cells it takes. It is the one escaping rule; String, Text
// and the console's line drawing are all built on it.
func Rune(r rune, col int) (s string, w int) {
	switch {
	case r == '\t':
		n := TabWidth - col%TabWidth
		return tabSpaces[:n], n
	case r < 0x20:
		return pictures[r], 1 // control pictures: ␀ … ␟
	case r < 0x7f:
		return string(r), 1
	case r == 0x7f:
		return "␡", 1
	case Escapes(r):
		return Substitute, 1
	}
	return string(r), widths.Rune(r)
}

// Escapes reports whether Rune draws r as something other than r itself:
// a control, a format or separator character. utf8.RuneError is drawn as
// itself; an invalid byte, which also decodes as utf8.RuneError, is told
// apart by its size (see Safe).
func Escapes(r rune) bool {
	switch {
	case r < 0x20 || r == 0x7f:
		return true
	case r < 0x7f:
		return false
	case r < 0xa0: // C1 controls (CSI, OSC, ST ... as single runes)
		return true
	// Format (Cf) and separator (Zl, Zp) characters live in a few
	// blocks: most text (Latin, Cyrillic, CJK, emoji) is decided here,
	// without a table lookup. TestEscapesMatchesUnicode holds these
	// ranges to the unicode tables, rune by rune.
	case r < 0x600:
		return r == 0xad // SOFT HYPHEN
	case r >= 0x2070 && r < 0xfeff, r >= 0xff00 && r < 0xfff9, r >= 0x1f000 && r < 0xe0000:
		return false
	case r == 0x2028 || r == 0x2029:
		return true
	}
	return unicode.Is(unicode.Cf, r)
}

// Safe reports whether s is drawn as itself: String(s) == s.
func Safe(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			return safeSlow(s[i:])
		}
	}
	return true
}

// safeSlow is Safe past the first byte that is not printable ASCII. An
// invalid byte decodes as utf8.RuneError of size 1; String draws it as the
// three bytes of U+FFFD, so it is not drawn as itself.
func safeSlow(s string) bool {
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		if Escapes(r) || r == utf8.RuneError && n == 1 {
			return false
		}
		s = s[n:]
	}
	return true
}

// String is s escaped for one line of a terminal: every rune as Rune draws
// it, a newline included (as ␊). Text that is already safe is returned as
// is, without copying.
func String(s string) string {
	if Safe(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	write(&b, s, 0)
	return b.String()
}

// write draws s from column col and returns the column it ends at.
func write(b *strings.Builder, s string, col int) int {
	for _, r := range s {
		if r >= 0x20 && r < 0x7f {
			b.WriteByte(byte(r))
			col++
			continue
		}
		if r != '\t' && !Escapes(r) { // Rune's last case, without a copy
			b.WriteRune(r)
			col += widths.Rune(r)
			continue
		}
		c, w := Rune(r, col)
		b.WriteString(c)
		col += w
	}
	return col
}

// Text is s escaped for a terminal with its line breaks kept: each line
// (split at "\n") as String draws it. For multi-line text such as a
// confirm message or an error; a table cell or a one-line field wants
// String.
func Text(s string) string {
	if Safe(strings.ReplaceAll(s, "\n", "")) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i, line := range strings.Split(s, "\n") {
		if i > 0 {
			b.WriteByte('\n')
		}
		write(&b, line, 0)
	}
	return b.String()
}

// JSON rewrites the JSON text j so that it is safe on a terminal too and
// still means exactly the same: every rune Rune would escape that the
// encoder left raw inside a string (DEL, C1 controls, format and separator
// characters) becomes its \uXXXX escape (a surrogate pair above U+FFFF).
// encoding/json already escapes the C0 controls; JSON's structure is
// ASCII, so such runes can only be inside strings. j must be valid JSON.
func JSON(j []byte) []byte {
	i := 0
	for i < len(j) && j[i] < 0x7f {
		i++
	}
	if i == len(j) {
		return j
	}
	out := make([]byte, 0, len(j)+16)
	out = append(out, j[:i]...)
	for i < len(j) {
		r, n := utf8.DecodeRune(j[i:])
		if r == utf8.RuneError && n <= 1 {
			// Not from encoding/json (it never writes invalid UTF-8);
			// keep the meaning-free byte out of the terminal anyway.
			out = append(out, `\ufffd`...)
			i++
			continue
		}
		if r >= 0x7f && r != utf8.RuneError && Escapes(r) {
			if r > 0xffff {
				hi, lo := utf16.EncodeRune(r)
				out = appendU(appendU(out, hi), lo)
			} else {
				out = appendU(out, r)
			}
		} else {
			out = append(out, j[i:i+n]...)
		}
		i += n
	}
	return out
}

func appendU(b []byte, r rune) []byte {
	const hex = "0123456789abcdef"
	return append(b, '\\', 'u', hex[r>>12&0xf], hex[r>>8&0xf], hex[r>>4&0xf], hex[r&0xf])
}

// Value is v (a decoded JSON value: maps, slices, strings, numbers,
// bools, nil) with every string in it, keys included, escaped as Text
// escapes: for structured data a client may print, such as an MCP tool's
// structuredContent. Line breaks are kept; values that are already safe
// are returned as they are.
func Value(v any) any {
	switch x := v.(type) {
	case string:
		return Text(x)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[Text(k)] = Value(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = Value(e)
		}
		return out
	}
	return v
}
