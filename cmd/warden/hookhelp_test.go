package main

import (
	"regexp"
	"strings"
	"testing"
)

// `hook --help` names every verb it has: "Operator verbs: run, runs,
// logs." left out plan.
func TestHookHelpNamesEveryVerb(t *testing.T) {
	c := newCLI(t)
	r := c.ok("hook", "--help")
	var hook = (&app{}).hookCommand()
	for _, sub := range hook.Commands() {
		if sub.Hidden || sub.Name() == "help" || sub.Name() == "completion" {
			continue
		}
		if !regexp.MustCompile(`\b` + regexp.QuoteMeta(sub.Name()) + `\b`).MatchString(hook.Long) {
			t.Errorf("hook --help does not name %q in its text:\n%s", sub.Name(), hook.Long)
		}
	}
	if !strings.Contains(r.stdout, "Operator verbs: run, runs, logs, plan.") {
		t.Errorf("hook --help:\n%s", r.stdout)
	}
}
