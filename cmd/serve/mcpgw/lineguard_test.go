package mcpgw

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// guard runs the line guard over in and returns what it passed on and
// what it answered, a line each.
func guard(t testing.TB, in string) (passed, answered []string) {
	var good, answer bytes.Buffer
	if err := guardLines(strings.NewReader(in), &good, &answer); err != nil {
		t.Fatal(err)
	}
	split := func(b bytes.Buffer) []string {
		s := strings.TrimSuffix(b.String(), "\n")
		if s == "" {
			return nil
		}
		return strings.Split(s, "\n")
	}
	return split(good), split(answer)
}

func TestLineGuardPassesMessagesAnswersTheRest(t *testing.T) {
	in := `{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n" +
		"\n" + // blank: skipped, not answered
		`{not json}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\r\n" +
		`{"jsonrpc":"2.0","id":"x","result":{}}` + "\n" +
		`[]` + "\n" +
		`{"jsonrpc":"2.0","id":9,"method":"tools/list"}` // no final newline
	passed, answered := guard(t, in)
	if len(passed) != 4 || !strings.Contains(passed[3], "tools/list") {
		t.Errorf("passed on: %q", passed)
	}
	if len(answered) != 2 || !strings.Contains(answered[0], "-32700") || !strings.Contains(answered[1], "-32600") {
		t.Errorf("answered: %q", answered)
	}
}

func TestLineGuardSkipsAnOverlongLine(t *testing.T) {
	long := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"p":"` + strings.Repeat("a", maxLine) + `"}}`
	passed, answered := guard(t, long+"\n"+`{"jsonrpc":"2.0","id":2,"method":"ping"}`+"\n")
	if len(passed) != 1 || !strings.Contains(passed[0], `"id":2`) {
		t.Errorf("passed on %d lines, want only the short one", len(passed))
	}
	if len(answered) != 1 || !strings.Contains(answered[0], "line too long") {
		t.Errorf("answered: %.200q", answered)
	}
}

// FuzzServeLines: whatever a client sends, every line the SDK gets
// decodes as one message, and every other line is answered with a
// well-formed -32700 or -32600 that echoes nothing but the id.
func FuzzServeLines(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		"\xff\xfe",
		`{not json}`,
		`[]`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
		`{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1}`,
		`{"jsonrpc":"2.0","id":"a\"]]","method":"x","params":{"s":"[[[["}}`,
		strings.Repeat("[", 200) + strings.Repeat("]", 200),
	} {
		f.Add(s + "\n" + s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		passed, answered := guard(t, in)
		for _, l := range passed {
			if _, err := jsonrpc.DecodeMessage([]byte(l)); err != nil {
				t.Fatalf("passed on %q: %v", l, err)
			}
		}
		for _, l := range answered {
			var a errorResponse
			if err := json.Unmarshal([]byte(l), &a); err != nil {
				t.Fatalf("answer %q: %v", l, err)
			}
			if a.Error.Code != jsonrpc.CodeParseError && a.Error.Code != jsonrpc.CodeInvalidRequest {
				t.Fatalf("answer %q: code %d", l, a.Error.Code)
			}
			switch a.ID.(type) {
			case nil, string, float64:
			default:
				t.Fatalf("answer %q: id %T", l, a.ID)
			}
		}
	})
}
