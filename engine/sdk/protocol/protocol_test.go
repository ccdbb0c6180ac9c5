package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
)

const token = "cap_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func raw(s string) json.RawMessage { return json.RawMessage(s) }

// wireCases are frames with the exact bytes docs/protocol.md puts on the wire.
var wireCases = []struct {
	name  string
	frame Frame
	wire  string
}{
	{"hello", Hello{Protocol: 1, Token: token},
		`{"type":"hello","protocol":1,"token":"` + token + `"}`},
	{"log", Log{Level: "success", Message: "installed <a&b>"},
		`{"type":"log","level":"success","message":"installed <a&b>"}`},
	{"log empty message", Log{Level: "debug"},
		`{"type":"log","level":"debug","message":""}`},
	{"call", Call{ID: 7, Capability: "operator", Method: "confirm", Args: []json.RawMessage{raw(`"Reboot now?"`)}},
		`{"type":"call","id":7,"capability":"operator","method":"confirm","args":["Reboot now?"]}`},
	{"call no args", Call{ID: 3, Capability: "hands", Method: "read"},
		`{"type":"call","id":3,"capability":"hands","method":"read","args":[]}`},
	{"store get", StoreOp{ID: 8, Store: "secrets", Method: "get", Args: []json.RawMessage{raw(`"bot_token"`)}},
		`{"type":"store","id":8,"store":"secrets","method":"get","args":["bot_token"]}`},
	{"store transaction", StoreOp{ID: 9, Store: "config", Method: "transaction", Args: []json.RawMessage{
		raw(`[{"op":"set","name":"a","value":"x"},{"op":"delete","name":"b"}]`)}},
		`{"type":"store","id":9,"store":"config","method":"transaction","args":[[{"op":"set","name":"a","value":"x"},{"op":"delete","name":"b"}]]}`},
	{"result", Result{Outputs: map[string]json.RawMessage{"address": raw(`"10.0.0.1"`), "port": raw(`22`)}},
		`{"type":"result","outputs":{"address":"10.0.0.1","port":22}}`},
	{"result empty", Result{}, `{"type":"result","outputs":{}}`},
	{"error", HookError{Error: ErrorBody{Name: "DiskFull", Message: "no space left"}},
		`{"type":"error","error":{"name":"DiskFull","message":"no space left"}}`},
	{"context", Context{Protocol: 1, Run: "r1", Module: "hello", Hook: "on_install",
		Inputs:       map[string]any{"target": "web", "count": 2.0},
		Config:       map[string]string{"public_ip": "1.2.3.4"},
		Declared:     Declared{Secrets: []string{"bot_token"}, Config: []string{"public_ip"}},
		Capabilities: map[string][]string{"operator": {"confirm"}, "hands": {"exec", "read"}}},
		`{"type":"context","protocol":1,"run":"r1","module":"hello","hook":"on_install",` +
			`"inputs":{"count":2,"target":"web"},"config":{"public_ip":"1.2.3.4"},` +
			`"declared":{"secrets":["bot_token"],"config":["public_ip"]},` +
			`"capabilities":{"hands":["exec","read"],"operator":["confirm"]}}`},
	{"context empty", Context{Protocol: 1, Run: "r", Module: "m", Hook: "h", Capabilities: map[string][]string{"operator": nil}},
		`{"type":"context","protocol":1,"run":"r","module":"m","hook":"h","inputs":{},"config":{},` +
			`"declared":{"secrets":[],"config":[]},"capabilities":{"operator":[]}}`},
	{"refused", *Refuse(CodeUnauthorized, "token refused"),
		`{"type":"refused","error":{"code":"unauthorized","message":"token refused"}}`},
	{"return null", Return{ID: 7}, `{"type":"return","id":7,"value":null}`},
	{"return value", Return{ID: 7, Value: raw(`true`)}, `{"type":"return","id":7,"value":true}`},
	{"throw", *ThrowErr(7, CodePermissionDenied, "policy says no"),
		`{"type":"throw","id":7,"error":{"code":"permission_denied","message":"policy says no"}}`},
	{"throw named", Throw{ID: 9, Error: ErrorBody{Name: "HandsError", Code: "permission_denied", Message: "m"}},
		`{"type":"throw","id":9,"error":{"name":"HandsError","code":"permission_denied","message":"m"}}`},
	{"throw unbound", Throw{Error: ErrorBody{Code: CodeBadFrame, Message: "not JSON"}},
		`{"type":"throw","id":0,"error":{"code":"bad_frame","message":"not JSON"}}`},
}

func TestEncodeWireShape(t *testing.T) {
	for _, c := range wireCases {
		got, err := Encode(c.frame)
		if err != nil {
			t.Fatalf("%s: Encode: %v", c.name, err)
		}
		if string(got) != c.wire+"\n" {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.wire)
		}
		// json.Marshal goes through MarshalJSON and must agree on the shape.
		m, err := json.Marshal(c.frame)
		if err != nil {
			t.Fatalf("%s: json.Marshal: %v", c.name, err)
		}
		if !strings.Contains(c.wire, "<") && string(m) != c.wire {
			t.Errorf("%s: json.Marshal = %s", c.name, m)
		}
	}
}

// normalized is the frame Decode gives back: a pointer, with empty
// collections as nil.
func normalized(f Frame) Frame {
	switch f := f.(type) {
	case Call:
		if len(f.Args) == 0 {
			f.Args = nil
		}
		return &f
	case Result:
		if len(f.Outputs) == 0 {
			f.Outputs = nil
		}
		return &f
	case Context:
		for k, v := range f.Capabilities {
			if len(v) == 0 {
				f.Capabilities[k] = nil
			}
		}
		return &f
	case Return:
		if f.Value == nil {
			f.Value = raw("null")
		}
		return &f
	}
	p := reflect.New(reflect.TypeOf(f))
	p.Elem().Set(reflect.ValueOf(f))
	return p.Interface().(Frame)
}

func TestRoundTrip(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range wireCases {
		got, err := Decode([]byte(c.wire))
		if err != nil {
			t.Fatalf("%s: Decode: %v", c.name, err)
		}
		if want := normalized(c.frame); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: Decode =\n%#v\nwant\n%#v", c.name, got, want)
		}
		if got.FrameType() != c.frame.FrameType() {
			t.Errorf("%s: FrameType %q, want %q", c.name, got.FrameType(), c.frame.FrameType())
		}
		again, err := Encode(got)
		if err != nil || string(again) != c.wire+"\n" {
			t.Errorf("%s: re-encode = %s, %v", c.name, again, err)
		}
		seen[got.FrameType()] = true
	}
	if len(seen) != 10 {
		t.Errorf("round trip covered %d frame types, want 10", len(seen))
	}
}

func TestDecodeAccepts(t *testing.T) {
	for _, line := range []string{
		`{"type":"log","level":"info","message":"x"}` + "\n",
		`{"type":"log","level":"info","message":"x"}` + "\r\n",
		`  { "message" : "x" , "level" : "info" , "type" : "log" }  `,
		`{"typ\u0065":"log","level":"info","message":"x"}`,
		`{"type":"hello","protocol":2,"token":"t"}`, // broker answers version_mismatch
		`{"type":"hello","protocol":1,"token":""}`,  // broker answers unauthorized
		`{"type":"call","id":1,"capability":"operator","method":"confirm"}`,
		`{"type":"error","error":{"name":"X"}}`,
		`{"type":"result","outputs":{"a":null}}`,
	} {
		if _, err := Decode([]byte(line)); err != nil {
			t.Errorf("Decode(%q): %v", line, err)
		}
	}
	f, _ := Decode([]byte(`{"type":"hello","protocol":2,"token":"t"}`))
	if h, ok := f.(*Hello); !ok || h.Protocol != 2 {
		t.Errorf("hello protocol 2 decoded as %#v", f)
	}
	f, _ = Decode([]byte(`{"type":"store","id":8,"store":"config","method":"set","args":[ "a" , { "b" : [ 1, 2 ] } ]}`))
	if s := f.(*StoreOp); string(s.Args[0]) != `"a"` || string(s.Args[1]) != `{"b":[1,2]}` {
		t.Errorf("args not compacted: %q", s.Args)
	}
}

func TestDecodeRefuses(t *testing.T) {
	long := strings.Repeat("z", 10000)
	cases := []struct{ line, want string }{
		{``, "empty"},
		{"\n", "empty"},
		{`not json`, "not JSON"},
		{`{"type":"log",`, "not JSON"},
		{`[{"type":"log","level":"info","message":"x"}]`, "not a JSON object"},
		{`"log"`, "not a JSON object"},
		{`null`, "not a JSON object"},
		{`{}`, "missing type"},
		{`{"type":1}`, "type must be a string"},
		{`{"type":"nope"}`, `unknown type "nope"`},
		{`{"type":"Log","level":"info","message":"x"}`, `unknown type "Log"`},
		{`{"type":"` + long + `"}`, `unknown type "zzzz`},
		{`{"type":"log","level":"info","message":"x","extra":1}`, `log frame: unknown field "extra"`},
		{`{"type":"log","Level":"info","message":"x"}`, `unknown field "Level"`},
		{`{"type":"log","level":"info","level":"warn","message":"x"}`, `duplicate field "level"`},
		{`{"type":"log","type":"hello","level":"info","message":"x"}`, `duplicate field "type"`},
		{`{"type":"log","level":"loud","message":"x"}`, `log frame: unknown level "loud" (want debug|info|warn|error|success)`},
		{`{"type":"log","message":"x"}`, "missing level"},
		{`{"type":"log","level":"info"}`, "missing message"},
		{`{"type":"log","level":"info","message":null}`, "message must be a string"},
		{`{"type":"log","level":"info","message":"x"} x`, "not JSON"},
		{`{"type":"log","level":"info","message":"x"}{}`, "not JSON"},
		{`{"type":"log","level":"info","message":"x"}` + "\n" + `{"type":"log","level":"info","message":"y"}`, "not JSON"},
		{"{\"type\":\"log\",\"level\":\"info\",\"message\":\"\xff\"}", "not valid UTF-8"},
		{"{\"type\":\"log\",\"level\":\"info\",\"message\":\"a\xc3\"}", "not valid UTF-8"},
		{`{"type":"hello","token":"t"}`, "missing protocol"},
		{`{"type":"hello","protocol":1}`, "missing token"},
		{`{"type":"hello","protocol":"1","token":"t"}`, "protocol must be an integer"},
		{`{"type":"hello","protocol":1.0,"token":"t"}`, "protocol must be an integer"},
		{`{"type":"call","id":0,"capability":"operator","method":"confirm","args":[]}`, "id must be a positive integer"},
		{`{"type":"call","id":-1,"capability":"operator","method":"confirm","args":[]}`, "id must be a positive integer"},
		{`{"type":"call","capability":"operator","method":"confirm","args":[]}`, "missing id"},
		{`{"type":"call","id":"7","capability":"operator","method":"confirm","args":[]}`, "id must be an integer"},
		{`{"type":"call","id":1e3,"capability":"operator","method":"confirm","args":[]}`, "id must be an integer"},
		{`{"type":"call","id":9223372036854775808,"capability":"operator","method":"confirm","args":[]}`, "id must be an integer"},
		{`{"type":"call","id":1,"method":"confirm","args":[]}`, "missing capability"},
		{`{"type":"call","id":1,"capability":"operator","method":"","args":[]}`, "missing method"},
		{`{"type":"call","id":1,"capability":"operator","method":"confirm","args":"x"}`, "args must be an array"},
		{`{"type":"call","id":1,"capability":"operator","method":"confirm","args":null}`, "args must be an array"},
		{`{"type":"store","id":1,"store":"files","method":"get","args":["a"]}`, `unknown store "files" (want secrets|config)`},
		{`{"type":"store","id":1,"store":"secrets","method":"list","args":[]}`, `unknown method "list" (want get|set|delete|transaction)`},
		{`{"type":"store","id":1,"store":"secrets","method":"get"}`, "missing args"},
		{`{"type":"store","id":1,"store":"secrets","method":"get","args":{"name":"a"}}`, "args must be an array"},
		{`{"type":"store","id":0,"store":"secrets","method":"get","args":["a"]}`, "id must be a positive integer"},
		{`{"type":"result"}`, "missing outputs"},
		{`{"type":"result","outputs":null}`, "outputs must be an object"},
		{`{"type":"result","outputs":[1]}`, "outputs must be an object"},
		{`{"type":"result","outputs":{"a":1,"a":2}}`, `outputs: duplicate key "a"`},
		{`{"type":"error"}`, "missing error"},
		{`{"type":"error","error":"boom"}`, "error must be an object"},
		{`{"type":"error","error":{}}`, "error needs a name or a message"},
		{`{"type":"error","error":{"code":"x","message":"m"}}`, `unknown field "code"`},
		{`{"type":"refused","error":{"message":"m"}}`, "missing error code"},
		{`{"type":"refused","error":{"name":"n","code":"c"}}`, `unknown field "name"`},
		{`{"type":"return","id":1}`, "missing value"},
		{`{"type":"return","id":0,"value":null}`, "id must be a positive integer"},
		{`{"type":"throw","id":-1,"error":{"code":"c"}}`, "id must not be negative"},
		{`{"type":"throw","id":1,"error":{"name":"n"}}`, "error needs a code or a message"},
		{`{"type":"context","protocol":1,"module":"m","hook":"h"}`, "missing run"},
		{`{"type":"context","protocol":1,"run":"r","module":"m","hook":"h","inputs":{"a":1,"a":1}}`, `inputs: duplicate key "a"`},
		{`{"type":"context","protocol":1,"run":"r","module":"m","hook":"h","inputs":{"a":1e999}}`, "inputs:"},
		{`{"type":"context","protocol":1,"run":"r","module":"m","hook":"h","config":{"a":1}}`, "must be a string"},
		{`{"type":"context","protocol":1,"run":"r","module":"m","hook":"h","declared":{"secret":[]}}`, `unknown field "secret"`},
		{`{"type":"context","protocol":1,"run":"r","module":"m","hook":"h","capabilities":{"operator":"confirm"}}`, `"operator" must be an array`},
	}
	for _, c := range cases {
		f, err := Decode([]byte(c.line))
		if err == nil {
			t.Errorf("Decode(%.60q) = %#v, want error", c.line, f)
			continue
		}
		var pe *Error
		if !errors.As(err, &pe) || pe.Code != CodeBadFrame {
			t.Errorf("Decode(%.60q): error %v is not a bad_frame *Error", c.line, err)
			continue
		}
		if !strings.Contains(pe.Message, c.want) {
			t.Errorf("Decode(%.60q): message %q, want it to contain %q", c.line, pe.Message, c.want)
		}
		if stutters(err.Error()) {
			t.Errorf("Decode(%.60q): %q says a word twice", c.line, err)
		}
		if len(pe.Message) > 200 {
			t.Errorf("Decode(%.60q): message is %d bytes, echoes too much input", c.line, len(pe.Message))
		}
	}
}

func TestEncodeRefuses(t *testing.T) {
	cases := []struct {
		f    Frame
		code string
	}{
		{nil, CodeBadFrame},
		{(*Log)(nil), CodeBadFrame},
		{Log{Level: "loud"}, CodeBadFrame},
		{Call{Capability: "operator", Method: "confirm"}, CodeBadFrame},
		{StoreOp{ID: 1, Store: "secrets", Method: "list"}, CodeBadFrame},
		{Return{ID: 1, Value: raw(`{`)}, CodeBadFrame},
		{Call{ID: 1, Capability: "c", Method: "m", Args: []json.RawMessage{raw("nope")}}, CodeBadFrame},
		{Context{Inputs: map[string]any{"f": func() {}}, Run: "r", Module: "m", Hook: "h"}, CodeBadFrame},
		{HookError{Error: ErrorBody{Code: "x", Message: "m"}}, CodeBadFrame},
		{Refused{Error: ErrorBody{Message: "m"}}, CodeBadFrame},
		{Log{Level: "info", Message: strings.Repeat("a", MaxFrame)}, CodeFrameTooLarge},
	}
	for _, c := range cases {
		b, err := Encode(c.f)
		if ErrorCode(err) != c.code {
			t.Errorf("Encode(%T) = %.40q, %v; want code %s", c.f, b, err, c.code)
		}
	}
}

// logOfSize returns an encoded log frame exactly n bytes long, newline included.
func logOfSize(t testing.TB, n int) []byte {
	overhead := len(`{"type":"log","level":"info","message":""}` + "\n")
	b, err := Encode(Log{Level: "info", Message: strings.Repeat("m", n-overhead)})
	if err != nil {
		t.Fatalf("Encode log of %d bytes: %v", n, err)
	}
	if len(b) != n {
		t.Fatalf("log frame is %d bytes, want %d", len(b), n)
	}
	return b
}

func TestEncodeLimit(t *testing.T) {
	logOfSize(t, MaxFrame) // fatal if refused
	overhead := len(`{"type":"log","level":"info","message":""}` + "\n")
	_, err := Encode(Log{Level: "info", Message: strings.Repeat("m", MaxFrame+1-overhead)})
	if ErrorCode(err) != CodeFrameTooLarge {
		t.Fatalf("Encode of MaxFrame+1 bytes: %v, want frame_too_large", err)
	}
}

func TestErrorCode(t *testing.T) {
	err := fmt.Errorf("broker: %w", &Error{Code: CodeRunEnded, Message: "run over"})
	if got := ErrorCode(err); got != CodeRunEnded {
		t.Errorf("ErrorCode(wrapped) = %q", got)
	}
	if got := ErrorCode(io.EOF); got != "" {
		t.Errorf("ErrorCode(io.EOF) = %q", got)
	}
	if got := ErrorCode(nil); got != "" {
		t.Errorf("ErrorCode(nil) = %q", got)
	}
	if s := (&Error{Code: CodeBadFrame, Message: "m"}).Error(); s != "bad_frame: m" {
		t.Errorf("Error() = %q", s)
	}
}

func TestHelpers(t *testing.T) {
	r := Refuse(CodeVersionMismatch, "engine speaks protocol 1, hook sent 2")
	if r.Error.Code != CodeVersionMismatch || r.Error.Message == "" || r.Error.Name != "" {
		t.Errorf("Refuse = %#v", r)
	}
	th := ThrowErr(4, CodeUndeclaredName, "module hello declares secrets: bot_token")
	if th.ID != 4 || th.Error.Code != CodeUndeclaredName {
		t.Errorf("ThrowErr = %#v", th)
	}
	if !bytes.HasSuffix(mustEncode(t, th), []byte("}\n")) {
		t.Error("throw does not end in newline")
	}
}

func mustEncode(t testing.TB, f Frame) []byte {
	b, err := Encode(f)
	if err != nil {
		t.Fatalf("Encode(%#v): %v", f, err)
	}
	return b
}

// stutters reports a word said twice in a row ("frame frame: ...",
// "bad_frame: bad frame"), the mark of a message built from parts that
// each named the thing.
func stutters(msg string) bool {
	words := strings.FieldsFunc(strings.ToLower(msg), func(r rune) bool {
		return r == ' ' || r == ':' || r == '_' || r == '(' || r == ')' || r == ','
	})
	for i := 1; i < len(words); i++ {
		if words[i] == words[i-1] {
			return true
		}
	}
	return false
}
