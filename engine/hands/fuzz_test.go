package hands

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzDecodeSetupReceipt: any bytes either decode to a receipt that
// validates and survives a write/read round trip unchanged (as version 2),
// or are refused with a problem that never echoes them.
func FuzzDecodeSetupReceipt(f *testing.F) {
	for _, r := range []SetupReceipt{validReceipt(), validPodmanReceipt()} {
		b, _ := json.Marshal(r)
		f.Add(b)
	}
	f.Add([]byte(`{"version":1,"owner":"local:test","engineSocket":"/run/docker.sock","socketIdentity":"1:2","daemonId":"A:B",` +
		`"image":"","containerId":"","generation":"","phase":"prepared"}`))
	f.Add([]byte(`{"version":2}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var r SetupReceipt
		problem := decodeReceipt(data, &r)
		if problem != "" {
			if len(data) >= 8 && strings.Contains(problem, string(data)) {
				t.Fatalf("the problem echoes the input: %q", problem)
			}
			return
		}
		if err := r.validate(); err != nil {
			t.Fatalf("decoded but does not validate: %v", err)
		}
		if r.Version != ReceiptVersion {
			t.Fatalf("decoded as version %d", r.Version)
		}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var again SetupReceipt
		if p := decodeReceipt(b, &again); p != "" || again != r {
			t.Fatalf("round trip: %q, %+v != %+v", p, again, r)
		}
	})
}
