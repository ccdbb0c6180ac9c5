package protocol

import "testing"

// TestPlainLogFastPathAgrees: whatever the one-pass log decoder takes,
// the general decoder takes too, with the same frame; and it leaves every
// other line to the general decoder.
func TestPlainLogFastPathAgrees(t *testing.T) {
	lines := []string{
		`{"type":"log","level":"info","message":"plain"}`,
		`{"type":"log","level":"info","message":"plain"}` + "\n",
		`{"type":"log","level":"success","message":""}` + "\n",
		`{"type":"log","level":"warn","message":"grüße 日本語 🎉 \u2028 <&>"}`,
		`{"type":"log","level":"info","message":"tab` + "\t" + `here"}`,
		`{"type":"log","level":"info","message":"esc \"q\""}`,
		`{"type":"log","level":"info","message":"bad \ud800"}`,
		`{"type":"log","level":"loud","message":"x"}`,
		`{"type":"log","level":"info","message":"x"} `,
		`{"type":"log","level":"info","message":"x"}}`,
		`{"type":"log","level":"info","message":"x","extra":1}`,
		`{"type":"log","level":"info","message":"a"b"}`,
		`{"type":"log","level":"info","message":"x"}` + "\r\n",
		`{"type":"log","level":"info","message":"` + "\xff" + `"}`,
		`{"type":"log","level":"info","message":"` + "\x7f" + `"}`,
		`{"type":"log","level":"info`,
		`{"type":"log","level":"info","message":"x"`,
	}
	for _, lvl := range levels {
		lines = append(lines, string(AppendLog(nil, lvl, "from AppendLog")))
	}
	fast := 0
	for _, l := range lines {
		want, werr := decode([]byte(l))
		got, ok := decodePlainLog([]byte(l))
		if !ok {
			continue
		}
		fast++
		if werr != nil {
			t.Errorf("%q: the fast path took a line the decoder refuses (%v)", l, werr)
			continue
		}
		if w, isLog := want.(*Log); !isLog || *w != *got {
			t.Errorf("%q: fast %+v, general %+v", l, got, want)
		}
	}
	if fast < 9 {
		t.Errorf("the fast path took only %d of the plain lines", fast)
	}
}
