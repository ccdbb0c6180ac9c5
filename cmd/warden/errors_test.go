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
		if r.code != 1 || r.stderr != tc.want {
			t.Errorf("warden %s: want exit 1 and %q, got %s", strings.Join(tc.args, " "), tc.want, r)
		}
	}
}
