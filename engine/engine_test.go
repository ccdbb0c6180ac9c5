package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/wardenhq/warden/storage"
)

// receiptJSON is every receipt as JSON, to grep for values.
func receiptJSON(t *testing.T, e *Engine) []byte {
	t.Helper()
	b, err := json.Marshal(allReceipts(t, e))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// lastReceipt checks the newest receipt's kind, subject and details.
func lastReceipt(t *testing.T, e *Engine, kind, module, name string) {
	t.Helper()
	rs := allReceipts(t, e)
	r := rs[len(rs)-1]
	if r.Kind != kind || r.Subject != module || r.Actor != string(testActor) {
		t.Errorf("last receipt %s/%s by %s, want %s/%s by %s", r.Kind, r.Subject, r.Actor, kind, module, testActor)
	}
	var d map[string]string
	if err := json.Unmarshal(r.Details, &d); err != nil {
		t.Fatalf("receipt %d details %s: %v", r.Seq, r.Details, err)
	}
	if want := map[string]string{"module": module, "name": name}; !reflect.DeepEqual(d, want) {
		t.Errorf("receipt %d details %v, want %v", r.Seq, d, want)
	}
	if !strings.Contains(r.Summary, module+"/"+name) {
		t.Errorf("receipt %d summary %q does not name %s/%s", r.Seq, r.Summary, module, name)
	}
}

func TestSecretsRoundTrip(t *testing.T) {
	e := openEngine(t, Options{})
	const v1, v2 = "hunter2-VALUE-one", "correct horse VALUE two"
	n0 := len(allReceipts(t, e))

	if names, err := e.SecretNames("mod"); err != nil || len(names) != 0 {
		t.Fatalf("fresh SecretNames = %v, %v", names, err)
	}
	if err := e.SetSecret(testActor, "mod", "token", v1); err != nil {
		t.Fatal(err)
	}
	lastReceipt(t, e, "secret.set", "mod", "token")
	if err := e.SetSecret(testActor, "mod", "api_key", v2); err != nil {
		t.Fatal(err)
	}
	if err := e.SetSecret(testActor, "other-mod", "token", v2); err != nil {
		t.Fatal(err)
	}
	if err := e.SetSecret(testActor, "mod", "token", v2); err != nil { // overwrite
		t.Fatal(err)
	}
	if names, err := e.SecretNames("mod"); err != nil || !reflect.DeepEqual(names, []string{"api_key", "token"}) {
		t.Fatalf("SecretNames = %v, %v", names, err)
	}
	existed, err := e.DeleteSecret(testActor, "mod", "token")
	if err != nil || !existed {
		t.Fatalf("DeleteSecret = %v, %v", existed, err)
	}
	lastReceipt(t, e, "secret.delete", "mod", "token")
	if names, _ := e.SecretNames("mod"); !reflect.DeepEqual(names, []string{"api_key"}) {
		t.Fatalf("after delete SecretNames = %v", names)
	}
	if names, _ := e.SecretNames("other-mod"); !reflect.DeepEqual(names, []string{"token"}) {
		t.Fatalf("other module's secrets = %v", names)
	}
	if got := len(allReceipts(t, e)) - n0; got != 5 {
		t.Errorf("%d receipts for 5 writes", got)
	}
	for _, v := range []string{v1, v2, "hunter2", "horse"} {
		if bytes.Contains(receiptJSON(t, e), []byte(v)) {
			t.Errorf("a receipt carries the secret value %q", v)
		}
	}
	// Sealed at rest: the values are not in the file either.
	dir := e.DataDir()
	e.Close()
	db, err := os.ReadFile(filepath.Join(dir, storage.DBFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{v1, v2} {
		if bytes.Contains(db, []byte(v)) {
			t.Errorf("warden.db holds secret value %q in the clear", v)
		}
	}
}

func TestConfigRoundTrip(t *testing.T) {
	e := openEngine(t, Options{})
	const ip, ip2 = "203.0.113.77", "198.51.100.99"
	n0 := len(allReceipts(t, e))
	if v, ok, err := e.Config("mod", "public_ip"); err != nil || ok || v != "" {
		t.Fatalf("unset Config = %q, %v, %v", v, ok, err)
	}
	if m, err := e.ConfigAll("mod"); err != nil || len(m) != 0 {
		t.Fatalf("fresh ConfigAll = %v, %v", m, err)
	}
	if err := e.SetConfig(testActor, "mod", "public_ip", ip); err != nil {
		t.Fatal(err)
	}
	lastReceipt(t, e, "config.set", "mod", "public_ip")
	if err := e.SetConfig(testActor, "mod", "empty", ""); err != nil {
		t.Fatalf("empty config value: %v", err)
	}
	if err := e.SetConfig(testActor, "mod", "public_ip", ip2); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := e.Config("mod", "public_ip"); err != nil || !ok || v != ip2 {
		t.Fatalf("Config = %q, %v, %v; want %q", v, ok, err, ip2)
	}
	if v, ok, err := e.Config("mod", "empty"); err != nil || !ok || v != "" {
		t.Fatalf("Config(empty) = %q, %v, %v", v, ok, err)
	}
	if m, err := e.ConfigAll("mod"); err != nil || !reflect.DeepEqual(m, map[string]string{"public_ip": ip2, "empty": ""}) {
		t.Fatalf("ConfigAll = %v, %v", m, err)
	}
	existed, err := e.DeleteConfig(testActor, "mod", "public_ip")
	if err != nil || !existed {
		t.Fatalf("DeleteConfig = %v, %v", existed, err)
	}
	lastReceipt(t, e, "config.delete", "mod", "public_ip")
	if _, ok, _ := e.Config("mod", "public_ip"); ok {
		t.Fatal("deleted config still set")
	}
	if got := len(allReceipts(t, e)) - n0; got != 4 {
		t.Errorf("%d receipts for 4 writes", got)
	}
	for _, v := range []string{ip, ip2} {
		if bytes.Contains(receiptJSON(t, e), []byte(v)) {
			t.Errorf("a receipt carries the config value %q", v)
		}
	}
}

// TestDeleteOfUnsetNameWritesNoReceipt: nothing changed, so the log must
// not claim a deletion happened.
func TestDeleteOfUnsetNameWritesNoReceipt(t *testing.T) {
	e := openEngine(t, Options{})
	n0 := len(allReceipts(t, e))
	if existed, err := e.DeleteSecret(testActor, "mod", "never"); err != nil || existed {
		t.Fatalf("DeleteSecret(unset) = %v, %v", existed, err)
	}
	if existed, err := e.DeleteConfig(testActor, "mod", "never"); err != nil || existed {
		t.Fatalf("DeleteConfig(unset) = %v, %v", existed, err)
	}
	if n := len(allReceipts(t, e)); n != n0 {
		t.Errorf("deleting unset names wrote %d receipts", n-n0)
	}
}

func TestBadNamesRefusedAndNothingWritten(t *testing.T) {
	e := openEngine(t, Options{})
	if err := e.SetConfig(testActor, "mod", "keep", "v"); err != nil {
		t.Fatal(err)
	}
	n0 := len(allReceipts(t, e))
	long := strings.Repeat("a", 64)
	bad := []struct{ module, name string }{
		{"", "name"}, {"mod", ""}, {"Mod", "name"}, {"mod", "Name"}, {"-mod", "name"},
		{"mod/x", "name"}, {"mod", "na/me"}, {"mod", "na-me"}, {"mod", "1name"}, {"mod", "_name"},
		{"mod\x00x", "name"}, {"mod", "name\x00x"}, {"..", "name"}, {"mod", "name\n"},
		{long, "name"}, {"mod", long}, {"mød", "name"},
	}
	for _, b := range bad {
		if err := e.SetSecret(testActor, b.module, b.name, "v"); err == nil {
			t.Errorf("SetSecret(%q, %q) accepted", b.module, b.name)
		}
		if err := e.SetConfig(testActor, b.module, b.name, "v"); err == nil {
			t.Errorf("SetConfig(%q, %q) accepted", b.module, b.name)
		}
		if _, err := e.DeleteSecret(testActor, b.module, b.name); err == nil {
			t.Errorf("DeleteSecret(%q, %q) accepted", b.module, b.name)
		}
		if _, err := e.DeleteConfig(testActor, b.module, b.name); err == nil {
			t.Errorf("DeleteConfig(%q, %q) accepted", b.module, b.name)
		}
	}
	// The boundaries that are fine.
	if err := e.SetConfig(testActor, strings.Repeat("m", 63), "n"+strings.Repeat("_", 62), "v"); err != nil {
		t.Errorf("63-char module and name refused: %v", err)
	}
	n0++
	// Oversized values are refused, atomically with their receipt.
	big := strings.Repeat("x", storage.MaxValueSize+1)
	if err := e.SetSecret(testActor, "mod", "big", big); err == nil {
		t.Error("oversized secret accepted")
	}
	if err := e.SetConfig(testActor, "mod", "big", big); err == nil {
		t.Error("oversized config accepted")
	}
	if n := len(allReceipts(t, e)); n != n0 {
		t.Errorf("refused writes changed the receipt count by %d", n-n0)
	}
	if m, _ := e.ConfigAll("mod"); !reflect.DeepEqual(m, map[string]string{"keep": "v"}) {
		t.Errorf("refused writes changed config: %v", m)
	}
	if names, _ := e.SecretNames("mod"); len(names) != 0 {
		t.Errorf("refused writes set secrets: %v", names)
	}
}

func TestReceiptsAndVerify(t *testing.T) {
	e := openEngine(t, Options{})
	for _, n := range []string{"a", "b", "c"} {
		if err := e.SetConfig(testActor, "mod", n, "v"); err != nil {
			t.Fatal(err)
		}
	}
	all := allReceipts(t, e)
	if len(all) != 4 || all[0].Kind != "trust.init" || all[0].Seq != 1 {
		t.Fatalf("receipts of a fresh engine + 3 writes: %+v", all)
	}
	if rs, err := e.Receipts(ReceiptFilter{Kind: "config.set", Limit: 2}); err != nil || len(rs) != 2 || rs[0].Seq != 3 || rs[1].Seq != 4 {
		t.Errorf("newest 2 config.set = %+v, %v", rs, err)
	}
	if rs, _ := e.Receipts(ReceiptFilter{Kind: "config."}); len(rs) != 3 {
		t.Errorf("config. family: %d receipts", len(rs))
	}
	if rs, _ := e.Receipts(ReceiptFilter{Since: time.Now().Add(time.Hour)}); len(rs) != 0 {
		t.Errorf("future --since matched %d", len(rs))
	}
	r, err := e.Receipt(2)
	if err != nil || r.Seq != 2 || r.Hash != all[1].Hash {
		t.Errorf("Receipt(2) = %+v, %v", r, err)
	}
	if _, err := e.Receipt(99); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "99") {
		t.Errorf("Receipt(99) = %v, want ErrNotFound naming 99", err)
	}
	v, err := e.VerifyReceipts()
	if err != nil || !v.Intact || v.Count != 4 {
		t.Errorf("VerifyReceipts = %+v, %v", v, err)
	}

	dir := e.DataDir()
	e.Close()
	flipSummaryByte(t, dir, 2)
	e = openEngine(t, Options{DataDir: dir})
	v, err = e.VerifyReceipts()
	if err != nil || v.Intact || v.BrokenSeq != 2 || v.Count != 1 {
		t.Errorf("after tampering with seq 2: %+v, %v", v, err)
	}
}

func TestOpenSecondTimeIsLocked(t *testing.T) {
	e := openEngine(t, Options{})
	start := time.Now()
	_, err := Open(Options{DataDir: e.DataDir(), LockTimeout: 100 * time.Millisecond})
	var le *storage.LockedError
	if !errors.As(err, &le) || le.PID != os.Getpid() {
		t.Fatalf("second Open = %v, want a LockedError naming pid %d", err, os.Getpid())
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("second Open took %v with a 100ms lock timeout", d)
	}
	// The holder is unharmed.
	if err := e.SetConfig(testActor, "mod", "after", "v"); err != nil {
		t.Fatal(err)
	}
}

func TestTrustThroughEngine(t *testing.T) {
	e := openEngine(t, Options{})
	st, err := e.TrustStatus()
	if err != nil || st.Generation != 1 || !st.Agrees {
		t.Fatalf("TrustStatus = %+v, %v", st, err)
	}
	st2, err := e.RotateTrust(testActor)
	if err != nil || st2.Generation != 2 || st2.Fingerprint == st.Fingerprint {
		t.Fatalf("RotateTrust = %+v, %v", st2, err)
	}
	rs, _ := e.Receipts(ReceiptFilter{Kind: "trust.rotate"})
	if len(rs) != 1 || rs[0].Actor != string(testActor) {
		t.Errorf("trust.rotate receipts %+v", rs)
	}
}

func TestLocalActor(t *testing.T) {
	a := string(LocalActor())
	if !strings.HasPrefix(a, "local:") || len(a) == len("local:") {
		t.Errorf("LocalActor() = %q", a)
	}
}
