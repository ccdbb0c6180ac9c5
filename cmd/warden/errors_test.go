package main

import (
	"strings"
	"testing"
)

// Errors say what is missing once: the message names it and says where
// to look, with no ": not found" trailing after it.
func TestNotFoundSaysItOnce(t *testing.T) {
	c := newCLI(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"receipts", "show", "999"}, "warden: no receipt 999 (see `warden receipts list`)\n"},
		{[]string{"module", "show", "nope"}, "warden: no module \"nope\" (add it with `warden module add PATH`)\n"},
		{[]string{"perms", "show", "99"}, "warden: no request 99 (see `warden perms list --all`)\n"},
	} {
		r := c.run(tc.args...)
		if r.code != 1 || withoutDataDirNote(r.stderr) != tc.want {
			t.Errorf("warden %s: want exit 1 and %q, got %s", strings.Join(tc.args, " "), tc.want, r)
		}
	}
}

// withoutDataDirNote drops the line a verb prints first when its data
// dir is new or has no module ("warden: data dir X (new); ...").
func withoutDataDirNote(stderr string) string {
	if first, rest, ok := strings.Cut(stderr, "\n"); ok && strings.HasPrefix(first, "warden: data dir ") {
		return rest
	}
	return stderr
}

// A verb names its data dir on stderr while that dir is new or holds no
// module (a missing WARDEN_DATA_DIR shows at once), never in --json, and
// says nothing once a module is there.
func TestVerbNamesANewOrEmptyDataDir(t *testing.T) {
	c := newCLI(t)
	if r := c.run("perms", "list"); r.code != 0 || !strings.HasPrefix(r.stderr, "warden: data dir "+c.dir+" (new); another is chosen with --data-dir or WARDEN_DATA_DIR\n") {
		t.Errorf("a new data dir: %s", r)
	}
	if r := c.run("perms", "list"); !strings.HasPrefix(r.stderr, "warden: data dir "+c.dir+" (no modules yet)") {
		t.Errorf("a data dir with no module: %s", r)
	}
	if r := c.run("perms", "list", "--json"); strings.Contains(r.stderr, "data dir") || strings.Contains(r.stdout, "data dir") {
		t.Errorf("--json names the data dir: %s", r)
	}
	c.ok("module", "add", example(t, "hello"))
	if r := c.run("perms", "list"); strings.Contains(r.stderr, "data dir") {
		t.Errorf("a data dir with a module: %s", r)
	}
}
