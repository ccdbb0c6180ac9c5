package protocol

import (
	"bytes"
	"fmt"
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

// TestAppendHelloIsEncode: the fast hello encoder gives the very bytes
// Encode does, for a real token's shape and for hostile ones.
func TestAppendHelloIsEncode(t *testing.T) {
	var all strings.Builder
	for c := range 0x80 {
		all.WriteByte(byte(c))
	}
	toks := []string{"cap_" + strings.Repeat("0123456789abcdef", 4), "", all.String(), "日本語\u2028\u2029", `a"b\c`}
	for _, tok := range toks {
		want, err := Encode(&Hello{Protocol: Version, Token: tok})
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendHello(nil, tok); !bytes.Equal(got, want) {
			t.Errorf("%q:\nAppendHello %q\nEncode      %q", tok, got, want)
		}
	}
}

// TestEncodeLogIsEncode: EncodeLog and EncodeHello answer as Encode does,
// on the fast path and off it (a bad level, invalid UTF-8, a message that
// may not fit).
func TestEncodeLogIsEncode(t *testing.T) {
	big := strings.Repeat("\x01", MaxFrame/5)
	fits := strings.Repeat("x", maxPlainString+1)
	for _, c := range []struct{ level, msg string }{
		{"info", "plain"}, {"warn", "tab\there \u2028"}, {"loud", "bad level"}, {"", ""},
		{"info", "bad \xff utf-8"}, {"error", big}, {"info", fits},
	} {
		want, werr := Encode(&Log{Level: c.level, Message: c.msg})
		got, gerr := EncodeLog(c.level, c.msg)
		if !bytes.Equal(got, want) || fmt.Sprint(gerr) != fmt.Sprint(werr) {
			t.Errorf("EncodeLog(%q, %.20q) = %.40q, %v; Encode gives %.40q, %v", c.level, c.msg, got, gerr, want, werr)
		}
	}
	for _, tok := range []string{"cap_00", "bad \xff", strings.Repeat("\x02", MaxFrame/5), ""} {
		want, werr := Encode(&Hello{Protocol: Version, Token: tok})
		got, gerr := EncodeHello(tok)
		if !bytes.Equal(got, want) || fmt.Sprint(gerr) != fmt.Sprint(werr) {
			t.Errorf("EncodeHello(%.20q) = %.40q, %v; Encode gives %.40q, %v", tok, got, gerr, want, werr)
		}
	}
}

// TestIsContext: a context as Encode writes it is known without a decode;
// no other frame is taken for one.
func TestIsContext(t *testing.T) {
	ctx, err := Encode(&Context{Protocol: Version, Run: "r", Module: "m", Hook: "h"})
	if err != nil {
		t.Fatal(err)
	}
	if !IsContext(ctx) || !IsContext(bytes.TrimSuffix(ctx, []byte("\n"))) {
		t.Errorf("IsContext(%q) = false", ctx)
	}
	for _, f := range []Frame{Refuse(CodeUnauthorized, "unauthorized"), ThrowErr(0, CodeRunEnded, "context"), &Log{Level: "info", Message: `{"type":"context",`}} {
		b, err := Encode(f)
		if err != nil {
			t.Fatal(err)
		}
		if IsContext(b) {
			t.Errorf("IsContext(%q) = true", b)
		}
	}
}
