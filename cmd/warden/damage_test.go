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

// TestVerbReadsDamagedPage: open does not walk the file, so a verb
// that never reads the damaged page answers, and one that reads it
// (receipts before seq 3 live on the first leaf, under the receipts
// root) fails with the corrupt-store message and its fix, not a crash:
// a leaf whose count runs past the page, and a branch page pointing at
// itself (which an unbounded cursor descends until the stack
// overflows). Each store gets a data dir of its own: a process whose
// store panicked keeps the file's lock until it exits.
func TestVerbReadsDamagedPage(t *testing.T) {
	for name, damage := range map[string]func(testing.TB, string){
		"leaf count":  func(t testing.TB, path string) { storagetest.FlipLeafCount(t, path, 20) },
		"branch loop": func(t testing.TB, path string) { storagetest.LoopBranch(t, path) },
	} {
		t.Run(name, func(t *testing.T) {
			c := newCLI(t)
			path := storagetest.FillReceipts(t, c.dir, 200)
			damage(t, path)
			if r := c.run("receipts", "list", "--limit", "5"); r.code != 0 {
				t.Errorf("a verb that never reads the damaged page: %s", r)
			}
			r := c.run("receipts", "list", "--before", "3")
			if r.code == 0 || !strings.Contains(r.stderr, "storage corrupt: "+path) || !strings.Contains(r.stderr, "backup") || strings.Contains(r.stderr, "goroutine") {
				t.Errorf("a verb that reads the damaged page: %s", r)
			}
		})
	}
}
