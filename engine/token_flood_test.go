package engine

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/wardenhq/warden/storage"
)

// A hook that presents a revoked token (one kept from an earlier run)
// 2,000 times is refused every time, but makes one token.refused receipt;
// the rest are counted in its run's hook.end receipt. (Before: one
// receipt each, 20,000 in 16 s for 20,000 tries.)
func TestRevokedTokenFloodIsCounted(t *testing.T) {
	keep := filepath.Join(t.TempDir(), "tok")
	mod := testModule(t, map[string]string{
		"save":  hookYAML("save-token", "")[:len(hookYAML("save-token", ""))-2] + ", " + keep + "]\n",
		"flood": hookYAML("revoked-flood", "")[:len(hookYAML("revoked-flood", ""))-2] + ", " + keep + "]\n    timeout: 2m\n",
	})
	e := openTestEngine(t)
	if _, err := e.AddModule(testActor, mod); err != nil {
		t.Fatal(err)
	}
	if o, err := e.RunHook(testActor, RunRequest{Module: "testmod", Hook: "save", Jail: JailOff}); err != nil || !o.OK() {
		t.Fatalf("save: %+v %v", o.Run, err)
	}
	o, err := e.RunHook(testActor, RunRequest{Module: "testmod", Hook: "flood", Jail: JailOff})
	if err != nil || !o.OK() {
		t.Fatalf("flood: %+v %v", o.Run, err)
	}
	if c := hasCheck(checks(t, e, o.Run.ID), "refused "); c != "refused 2000 of 2000" {
		t.Fatalf("the hook saw %q, want every try refused", c)
	}
	rs, err := e.Receipts(ReceiptFilter{Kind: storage.KindTokenRefused})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].Subject != o.Run.ID {
		t.Errorf("%d token.refused receipts, want 1 for run %s: %+v", len(rs), o.Run.ID, rs)
	}
	ends, _ := e.Receipts(ReceiptFilter{Kind: storage.KindHookEnd})
	var d struct {
		Run     string         `json:"run"`
		Counted map[string]int `json:"tokenRefusedUnrecorded"`
	}
	json.Unmarshal(ends[len(ends)-1].Details, &d)
	if d.Run != o.Run.ID || d.Counted["REVOKED"] != 1999 {
		t.Errorf("hook.end of the flood: %s; want tokenRefusedUnrecorded REVOKED 1999", ends[len(ends)-1].Details)
	}
}
