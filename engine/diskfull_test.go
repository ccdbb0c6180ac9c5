package engine

// A full disk under a running hook, on a real (small) tmpfs: the run ends
// failed naming the storage failure and the lines it lost, with one
// receipt for it, and the hook's store operation is refused with
// storage_failed.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/wardenhq/warden/engine/sdk/hookkit"
	"github.com/wardenhq/warden/storage"
	"github.com/wardenhq/warden/storage/storagetest"
)

// diskFullScenario is the hook: it fills the disk its run dir is on,
// tries a store transaction (the answer goes to ./store-result, on
// another filesystem), then prints lines the engine cannot keep. It
// ignores SIGTERM so the result is written whatever the engine does.
func diskFullScenario() int {
	signal.Ignore(syscall.SIGTERM)
	c, err := hookkit.Connect()
	if err != nil {
		fmt.Println("connect:", err)
		return 1
	}
	defer c.Close()
	if err := storagetest.FillFile(filepath.Join(filepath.Dir(os.Getenv("WARDEN_SOCKET")), "filler")); err != nil {
		fmt.Println("fill:", err)
		return 1
	}
	big := strings.Repeat("v", storage.MaxValueSize)
	err = c.Secrets().Tx().Set("api_key", big).Set("spare", big).Commit()
	res, _ := json.Marshal(map[string]string{"code": hookkit.Code(err), "error": fmt.Sprint(err)})
	if err := os.WriteFile("store-result", res, 0o644); err != nil {
		fmt.Println("result:", err)
		return 1
	}
	for i := range 20000 {
		fmt.Printf("line %d of a stream the full disk cannot keep\n", i)
	}
	return 0
}

func TestDiskFullFailsRunWithOneReceipt(t *testing.T) {
	fs := storagetest.MountTmpfs(t, "8m")
	e := openEngine(t, Options{DataDir: filepath.Join(fs, "data")})
	mod := testModule(t, map[string]string{"fill": hookYAML("disk-full", "")})
	if _, err := e.AddModule(testActor, mod); err != nil {
		t.Fatal(err)
	}
	o, err := e.RunHook(testActor, RunRequest{Module: "testmod", Hook: "fill", Jail: JailOff})
	if err != nil {
		t.Fatal(err)
	}

	// The verdict, in the outcome and in the stored record.
	m := regexp.MustCompile(`^stream storage failed: no space left on device \((\d+) lines lost\)$`).FindStringSubmatch(o.Run.Error)
	if o.Run.Status != storage.RunFailed || m == nil {
		t.Fatalf("run ended %s: %q; want failed: stream storage failed: no space left on device (N lines lost)", o.Run.Status, o.Run.Error)
	}
	lost, _ := strconv.ParseUint(m[1], 10, 64)
	if lost == 0 {
		t.Errorf("%d lines lost: the hook's lines were not counted", lost)
	}
	if rec, err := e.Run(o.Run.ID); err != nil || rec.Status != storage.RunFailed || rec.Error != o.Run.Error {
		t.Errorf("stored run %s %q (%v), want failed %q", rec.Status, rec.Error, err, o.Run.Error)
	}

	// One receipt says so: the run's hook.end, with the count.
	var ends []Receipt
	var d map[string]any
	for _, r := range allReceipts(t, e) {
		var rd map[string]any
		json.Unmarshal(r.Details, &rd)
		switch {
		case r.Kind == "stream.error":
			t.Errorf("a stream.error receipt: %s (want the failure once, in hook.end)", r.Summary)
		case r.Kind == "hook.end" && rd["run"] == o.Run.ID:
			ends, d = append(ends, r), rd
		}
	}
	if len(ends) != 1 {
		t.Fatalf("%d hook.end receipts for the run, want 1", len(ends))
	}
	if sum := ends[0].Summary; !strings.Contains(sum, " failed in ") || !strings.HasSuffix(sum, "): "+o.Run.Error) {
		t.Errorf("hook.end summary %q does not end with the run's error", ends[0].Summary)
	}
	if d["verdict"] != "failed" || d["error"] != o.Run.Error || fmt.Sprint(d["linesLost"]) != m[1] {
		t.Errorf("hook.end details %v; want verdict failed, error %q, linesLost %s", d, o.Run.Error, m[1])
	}

	// The hook's store transaction was refused as a storage failure, and
	// nothing of it was applied.
	raw, err := os.ReadFile(filepath.Join(mod, "store-result"))
	if err != nil {
		t.Fatalf("the hook wrote no store result: %v", err)
	}
	var res struct{ Code, Error string }
	json.Unmarshal(raw, &res)
	if res.Code != "storage_failed" || !strings.Contains(res.Error, "disk is full") || !strings.Contains(res.Error, "nothing was applied") || strings.Contains(res.Error, fs) {
		t.Errorf("store answer %+v: want storage_failed saying the disk is full and nothing was applied, without host paths", res)
	}
	if names, err := e.SecretNames("testmod"); err != nil || len(names) != 0 {
		t.Errorf("secrets after the refused transaction: %v, %v", names, err)
	}
	if v, err := e.VerifyReceipts(); err != nil || !v.Intact {
		t.Errorf("receipt chain after the full disk: %+v, %v", v, err)
	}
}

// A store that is full before it is opened still opens (reading must
// work), without a pid file; the flock still keeps a second opener out.
func TestOpenOnFullDisk(t *testing.T) {
	fs := storagetest.MountTmpfs(t, "4m")
	dir := filepath.Join(fs, "data")
	e, err := Open(Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
	if err := storagetest.FillFile(filepath.Join(fs, "filler")); err != nil {
		t.Fatal(err)
	}
	e = openEngine(t, Options{DataDir: dir})
	if err := e.store.PIDFileError(); !storage.IsNoSpace(err) {
		t.Errorf("PIDFileError %v, want no space left on device", err)
	}
	if _, err := os.Stat(filepath.Join(dir, storage.PIDFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a pid file on the full disk: %v", err)
	}
	if v, err := e.VerifyReceipts(); err != nil || !v.Intact || v.Count == 0 {
		t.Errorf("verify on a full disk: %+v, %v", v, err)
	}
	_, err = Open(Options{DataDir: dir, LockTimeout: 100e6})
	var le *storage.LockedError
	if !errors.As(err, &le) {
		t.Fatalf("second open on the full disk: %v, want the data dir in use", err)
	}
	if !strings.Contains(le.Error(), "fuser") {
		t.Errorf("with no pid file the refusal should say how to find the holder: %v", le)
	}
}
