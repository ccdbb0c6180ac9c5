package main

import (
	"os"
	"strings"
	"testing"

	"github.com/wardenhq/warden/storage/storagetest"
)

// TestDamagedStore: on a store with a flipped leaf count, `receipts
// verify --full` never prints "intact" (it printed "intact, 0 receipts"
// and then panicked) and says what is wrong and how to fix it; on one cut
// to half its pages, verbs and doctor report it instead of faulting.
func TestDamagedStore(t *testing.T) {
	c := newCLI(t)
	path := storagetest.FillReceipts(t, c.dir, 200)
	whole, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	storagetest.FlipLeafCount(t, path, 255)
	for _, args := range [][]string{{"receipts", "verify", "--full"}, {"receipts", "verify"}} {
		r := c.run(args...)
		if r.code == 0 || strings.Contains(r.stdout, "intact") || !strings.Contains(r.stderr, "storage corrupt: "+path) {
			t.Errorf("warden %s on a damaged page: %s", strings.Join(args, " "), r)
		}
	}

	if err := os.WriteFile(path, whole[:len(whole)/4], 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"receipts", "list"}, {"hook", "runs"}} {
		r := c.run(args...)
		if r.code == 0 || !strings.Contains(r.stderr, "truncated") || !strings.Contains(r.stderr, "backup") {
			t.Errorf("warden %s on a truncated store: %s", strings.Join(args, " "), r)
		}
	}
	r := c.run("doctor")
	if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "truncated") {
		t.Errorf("doctor on a truncated store: %s", r)
	}
	if got, _ := os.ReadFile(path); len(got) != len(whole)/4 {
		t.Errorf("the damaged file was changed: %d bytes, was %d", len(got), len(whole)/4)
	}
}
