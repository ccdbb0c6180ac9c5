package control

import (
	"encoding/json"
	"testing"
)

// FuzzDecodeMessage: whatever a peer sends, the decoder returns a message
// or an error, never panics, and what it accepts has an op and survives
// a round trip through its own encoding.
func FuzzDecodeMessage(f *testing.F) {
	for _, s := range []string{
		`{"op":"hello","version":1}`,
		`{"op":"call","id":1,"method":"Requests","args":[{"All":true,"Limit":0}]}`,
		`{"op":"call","id":2,"method":"StartRun","args":[{"Module":"hello","Hook":"greet","Inputs":null,"RawInputs":{"target":"x"},"Jail":""},true]}`,
		`{"op":"answer","id":2,"ask":1,"ok":true}`,
		`{"op":"reply","id":1,"results":[[]]}`,
		`{"op":"reply","id":1,"error":{"code":"not_found","message":"no such run"}}`,
		`{"op":"event","id":3,"event":{"kind":"missed","missed":4}}`,
		`{"op":"ended","id":2,"outcome":{"run":{},"duration":1}}`,
		`{"op":"call","id":1,"extra":true}`,
		`{"op":""}`,
		`{"op":"hello"} {"op":"hello"}`,
		`[1,2]`,
		``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		m, err := decodeMessage(line)
		if err != nil {
			return
		}
		if m.Op == "" {
			t.Fatalf("accepted a message without an op: %q", line)
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("accepted %q but cannot encode it: %v", line, err)
		}
		if _, err := decodeMessage(b); err != nil {
			t.Fatalf("accepted %q but not its own encoding %s: %v", line, b, err)
		}
	})
}
