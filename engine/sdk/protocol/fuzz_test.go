package protocol

import (
	"bytes"
	"reflect"
	"testing"
)

// FuzzDecode holds Decode to: never panic, fail only with a short bad_frame
// *Error, and when it succeeds, Encode and Decode round-trip to the same
// frame and the same bytes.
func FuzzDecode(f *testing.F) {
	for _, c := range wireCases {
		f.Add([]byte(c.wire + "\n"))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		fr, err := Decode(line)
		if err != nil {
			pe, ok := err.(*Error)
			if !ok || pe.Code != CodeBadFrame {
				t.Fatalf("Decode error %v is not a bad_frame *Error", err)
			}
			if len(pe.Message) > 200 {
				t.Fatalf("error message is %d bytes", len(pe.Message))
			}
			return
		}
		b, err := Encode(fr)
		if err != nil {
			t.Fatalf("Encode(%#v) after Decode: %v", fr, err)
		}
		again, err := Decode(b)
		if err != nil {
			t.Fatalf("Decode(Encode(frame)) = %v for %q", err, b)
		}
		if !reflect.DeepEqual(fr, again) {
			t.Fatalf("round trip changed the frame:\n%#v\n%#v", fr, again)
		}
		if b2, err := Encode(again); err != nil || !bytes.Equal(b, b2) {
			t.Fatalf("re-encoding is not stable: %q vs %q (%v)", b, b2, err)
		}
	})
}
