package main

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/storage/storagetest"
)

// TestFullDisk: a chatty run on a small data dir fails, saying so on the
// CLI with exit 1; then, with the disk filled to the last byte, every
// read-only verb still works.
func TestFullDisk(t *testing.T) {
	fs := storagetest.MountTmpfs(t, "6m")
	c := newCLI(t)
	c.dir = filepath.Join(fs, "data")
	c.ok("module", "add", example(t, "flood"))

	r := c.run("hook", "run", "flood", "lines", "--jail=off")
	want := regexp.MustCompile(`failed in \S+: stream storage failed: no space left on device \(\d+ lines lost\)`)
	if r.code != 1 || !want.MatchString(r.stderr) || strings.Contains(r.stdout+r.stderr, "succeeded") {
		t.Fatalf("hook run on a full disk: want exit 1 and %q, got %s", want, r)
	}

	if err := storagetest.FillFile(filepath.Join(fs, "filler")); err != nil {
		t.Fatal(err)
	}
	noSpace := func(r result, args ...string) {
		t.Helper()
		if strings.Contains(r.stderr, "no space left") {
			t.Errorf("warden %s on a full disk mentions the full disk: %s", strings.Join(args, " "), r)
		}
	}
	var runs []engine.RunRecord
	c.json(0, &runs, "hook", "runs")
	if len(runs) != 1 || runs[0].Status != "failed" || !strings.HasPrefix(runs[0].Error, "stream storage failed: no space left on device (") {
		t.Fatalf("hook runs: %+v", runs)
	}
	run := runs[0].ID

	r = c.ok("hook", "logs", run)
	noSpace(r, "hook", "logs")
	if !strings.Contains(r.stdout, "line 1 of 200000") {
		t.Errorf("hook logs on a full disk lost the stored lines: %.300s", r.stdout)
	}
	var rs []engine.Receipt
	c.json(0, &rs, "receipts", "list", "--kind", "hook.end")
	if len(rs) != 1 {
		t.Fatalf("hook.end receipts: %+v", rs)
	}
	r = c.ok("receipts", "show", jsonNumber(rs[0].Seq))
	noSpace(r, "receipts", "show")
	if !strings.Contains(r.stdout, "stream storage failed: no space left on device") {
		t.Errorf("receipts show: %s", r)
	}
	r = c.ok("receipts", "verify")
	if !strings.HasPrefix(r.stdout, "intact, ") {
		t.Errorf("receipts verify: %s", r)
	}
	noSpace(c.ok("hands", "list"), "hands", "list")
	r = c.run("hands", "status", "--root", filepath.Join(fs, "nohands"))
	noSpace(r, "hands", "status")
	if r.code != 1 || !strings.Contains(r.stderr, "is not a hands root") {
		t.Errorf("hands status of a non-root on a full disk: %s", r)
	}

	// doctor: the store is fine, the free space is the problem, and the
	// fix says what to do.
	var rep engine.Report
	c.json(1, &rep, "doctor")
	checks := map[string]engine.Check{}
	for _, ch := range rep.Checks {
		checks[ch.Name] = ch
		if strings.Contains(ch.Fix, "see the error above") {
			t.Errorf("doctor fix %q says nothing", ch.Fix)
		}
	}
	if ch := checks["store"]; ch.Status != "ok" {
		t.Errorf("doctor store on a full disk: %+v", ch)
	}
	if ch := checks["free space"]; ch.Status != "problem" || !strings.Contains(ch.Detail, "0.0 MiB free") || !strings.Contains(ch.Fix, "df -h "+c.dir) {
		t.Errorf("doctor free space on a full disk: %+v", ch)
	}
}

func jsonNumber(n uint64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
