package hands

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

// Fixes finds every structured fix in an error's chain, outermost first,
// through wrapping and joins, and nothing in an error without one.
func TestFixes(t *testing.T) {
	inner := &FixError{Problem: "no Docker socket at /x", Fix: "start dockerd"}
	err := &InitFailedError{Root: "/r", Cause: &FixError{Problem: fmt.Sprintf("%v; reconciliation required", inner), Fix: "see status", Err: fmt.Errorf("wrapped: %w", inner)}}
	if got, want := Fixes(err), []string{"see status", "start dockerd"}; !slices.Equal(got, want) {
		t.Errorf("Fixes = %q, want %q", got, want)
	}
	if got := Fixes(errors.Join(errors.New("plain"), &RootError{Fix: "pick another root"})); !slices.Equal(got, []string{"pick another root"}) {
		t.Errorf("Fixes of a join = %q", got)
	}
	if got := Fixes(errors.New("no advice here; not a fix")); got != nil {
		t.Errorf("a plain error's text was taken apart: %q", got)
	}
	if !errors.Is(&FixError{Problem: "p", Fix: "f", Err: errLeaseHeld}, errLeaseHeld) {
		t.Error("a FixError hides its cause from errors.Is")
	}
	if got := inner.Error(); got != "no Docker socket at /x; start dockerd" {
		t.Errorf("Error() = %q", got)
	}
}
