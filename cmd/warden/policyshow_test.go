package main

import (
	"strings"
	"testing"
)

// perms policy show puts each list under its own heading: the network's
// "allow" lines right after "network … through the egress proxy:", and
// the rules line says what it counts. An approve-always of a connection
// joins the network list, not the rules, so its allow line must not sit
// after "rules 0" and "updated", where "rules 0" would read as stale.
func TestPolicyShowListsUnderTheirHeadings(t *testing.T) {
	c := newCLI(t)
	c.ok("module", "add", example(t, "ghstars"))
	c.ok("perms", "policy", "set", "module:ghstars", "--revision", "0", "--network", "api.github.com:443,*.githubusercontent.com:443")
	r := c.ok("perms", "policy", "show", "module:ghstars")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	at := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "network    2 destinations, through the egress proxy:") {
			at = i
		}
	}
	if at < 0 || at+2 >= len(lines) || lines[at+1] != "  allow api.github.com:443" || lines[at+2] != "  allow *.githubusercontent.com:443" {
		t.Fatalf("the network's allow lines do not follow its heading:\n%s", r.stdout)
	}
	if at+3 >= len(lines) || !strings.HasPrefix(lines[at+3], "rules      none (") || strings.Contains(r.stdout, "rules      0") {
		t.Errorf("the rules line after the network list:\n%s", r.stdout)
	}
	if !strings.HasPrefix(lines[2], "updated ") {
		t.Errorf("updated is not with subject and revision:\n%s", r.stdout)
	}
}
