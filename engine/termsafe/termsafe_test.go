package termsafe

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// hostile is what testers sent to the operator's terminal: a screen clear,
// an OSC 52 clipboard write, an OSC 0 title, a CR overwrite, NUL, an
// 8-bit CSI, a right-to-left override and an isolate, a BOM, a line
// separator and a byte that is not UTF-8.
const hostile = "ok\x1b[2J\x1b]52;c;cm0gLXJmIH4=\x07\x1b]0;pwned\x07safe\rEVIL\x00\u009b31m\u202eevil\u2066x\u2069\ufeff\u2028\xff\x7f"

func TestStringEscapesEveryControl(t *testing.T) {
	got := String(hostile)
	want := "ok␛[2J␛]52;c;cm0gLXJmIH4=␇␛]0;pwned␇safe␍EVIL␀␦31m␦evil␦x␦␦␦" + "�" + "␡"
	if got != want {
		t.Errorf("String(hostile)\n got %q\nwant %q", got, want)
	}
	assertSafe(t, got)
}

func TestStringKeepsPrintableText(t *testing.T) {
	for _, s := range []string{
		"",
		"plain ASCII, with punctuation: ~!@#$%^&*()_+{}|:\"<>?`-=[]\\;',./",
		"grüße, 日本語, עברית, العربية, emoji 🎉, combining é, nbsp\u00a0and ideographic\u3000space",
		"private use \ue000 is kept",
		"\ufffd, the mark of bytes that were not UTF-8, is kept",
	} {
		if got := String(s); got != s {
			t.Errorf("String(%q) = %q, want it unchanged", s, got)
		}
		if !Safe(s) {
			t.Errorf("Safe(%q) = false", s)
		}
	}
}

func TestTabsAndNewlines(t *testing.T) {
	if got := String("a\tbc\td"); got != "a   bc  d" {
		t.Errorf("tabs: %q", got)
	}
	if got := String("one\ntwo"); got != "one␊two" {
		t.Errorf("String keeps no newline: %q", got)
	}
	if got := Text("one\x1b[2J\ntwo\r\nthree"); got != "one␛[2J\ntwo␍\nthree" {
		t.Errorf("Text: %q", got)
	}
	if s := "a\nb"; Text(s) != s {
		t.Errorf("Text changed safe multi-line text: %q", Text(s))
	}
}

func TestRuneWidths(t *testing.T) {
	for _, c := range []struct {
		r    rune
		col  int
		s    string
		w    int
		note string
	}{
		{'\t', 0, "    ", 4, "tab at 0"},
		{'\t', 3, " ", 1, "tab at 3"},
		{0x1b, 0, "␛", 1, "ESC"},
		{0x9b, 0, "␦", 1, "CSI"},
		{0x202e, 0, "␦", 1, "RLO"},
		{0xfffd, 0, "\ufffd", 1, "U+FFFD is drawn as itself"},
		{'界', 0, "界", 2, "wide"},
	} {
		s, w := Rune(c.r, c.col)
		if s != c.s || w != c.w {
			t.Errorf("%s: Rune(%U, %d) = %q, %d; want %q, %d", c.note, c.r, c.col, s, w, c.s, c.w)
		}
	}
}

func TestJSONStaysExactAndSafe(t *testing.T) {
	v := map[string]string{"text": hostile, "plain": "日本 🎉", "tag": "\U000e0041"}
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	out := JSON(raw)
	assertSafe(t, string(out))
	var back map[string]string
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatalf("JSON output is not JSON: %v\n%s", err, out)
	}
	// Invalid UTF-8 was already U+FFFD after Marshal; all else is exact.
	want := strings.ToValidUTF8(hostile, "\ufffd")
	if back["text"] != want || back["plain"] != v["plain"] || back["tag"] != v["tag"] {
		t.Errorf("round trip changed the values:\n got %q\nwant %q", back, want)
	}
	if !bytes.Contains(out, []byte(`\udb40\udc41`)) {
		t.Errorf("a format rune above U+FFFF is not a surrogate pair: %s", out)
	}
	if plain := []byte(`{"a":"b"}`); &JSON(plain)[0] != &plain[0] {
		t.Error("ASCII JSON was copied")
	}
}

// TestEscapesMatchesUnicode checks Escapes's fast ranges against the
// unicode tables for every rune.
func TestEscapesMatchesUnicode(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		want := r < 0x20 || (r >= 0x7f && r < 0xa0) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
		if Escapes(r) != want {
			t.Errorf("Escapes(%U) = %v, want %v", r, !want, want)
		}
	}
}

// assertSafe fails if s holds anything a terminal would act on.
func assertSafe(t testing.TB, s string) {
	t.Helper()
	if !utf8.ValidString(s) {
		t.Fatalf("not valid UTF-8: %q", s)
	}
	for i, r := range s {
		if r < 0x20 || (r >= 0x7f && r < 0xa0) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp) {
			t.Fatalf("control %U survived at byte %d: %q", r, i, s)
		}
	}
}

// FuzzString: whatever the input, nothing a terminal acts on survives
// String (nor Text, but for its newlines), and text with nothing to escape
// comes back unchanged.
func FuzzString(f *testing.F) {
	for _, s := range []string{"", "hello", hostile, "a\tb", "日本語 🎉", "\u202e\u2066\u200b", "\xc2", "\xe2\x80", "\ufffd", "\ufffd\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := String(s)
		assertSafe(t, out)
		assertSafe(t, strings.ReplaceAll(Text(s), "\n", ""))
		if Safe(s) != (out == s) {
			t.Fatalf("Safe(%q) = %v but String gives %q", s, Safe(s), out)
		}
		graphic := utf8.ValidString(s)
		for _, r := range s {
			if !unicode.IsGraphic(r) {
				graphic = false
			}
		}
		if graphic && out != s {
			t.Fatalf("printable text changed: %q -> %q", s, out)
		}
		// Every rune of the input is drawn: nothing is dropped silently.
		if n, m := utf8.RuneCountInString(s), utf8.RuneCountInString(out); m < n {
			t.Fatalf("%d runes in, %d out: %q -> %q", n, m, s, out)
		}
		raw, _ := json.Marshal(s)
		j := JSON(raw)
		assertSafe(t, string(j))
		var back string
		if err := json.Unmarshal(j, &back); err != nil || back != strings.ToValidUTF8(s, "\ufffd") && utf8.ValidString(s) {
			t.Fatalf("JSON changed the value: %q -> %s (%v)", s, j, err)
		}
	})
}

// TestReplacementCharIsNotAnEscapeMark: U+FFFD in a hook's text, an
// invalid byte and a hidden control are told apart on screen. The first
// two are both "not text" and show as �; a control warden hid shows as ␦.
func TestReplacementCharIsNotAnEscapeMark(t *testing.T) {
	if !Safe("\ufffd") || String("\ufffd") != "\ufffd" || Text("a\ufffd\nb") != "a\ufffd\nb" {
		t.Errorf("U+FFFD is not drawn as itself: Safe=%v String=%q", Safe("\ufffd"), String("\ufffd"))
	}
	if Safe("\xff") || String("\xff") != "\ufffd" {
		t.Errorf("an invalid byte: Safe=%v String=%q, want false and U+FFFD", Safe("\xff"), String("\xff"))
	}
	if got := String("\u202e"); got != Substitute || got == "\ufffd" {
		t.Errorf("a hidden control is drawn as %q, want %q", got, Substitute)
	}
}

// TestValueEscapesEveryString: structured data is escaped as text is,
// keys and nested values included, line breaks kept.
func TestValueEscapesEveryString(t *testing.T) {
	in := map[string]any{"said\u202e": "evil\x1b[2J\u2066x", "n": 3.0, "list": []any{"a\nb", true, nil, map[string]any{"k": "\u009b31m"}}}
	got, _ := json.Marshal(Value(in))
	want := `{"list":["a\nb",true,null,{"k":"␦31m"}],"n":3,"said␦":"evil␛[2J␦x"}`
	if string(got) != want {
		t.Errorf("Value:\n got %s\nwant %s", got, want)
	}
	assertSafe(t, strings.ReplaceAll(string(got), `\n`, ""))
}
