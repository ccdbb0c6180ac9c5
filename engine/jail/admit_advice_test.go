package jail

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A bubblewrap under a dir that is a user's is refused with a fix that
// moves bubblewrap, never one that takes the user's dir over (it said
// "chown root:root DIR && chmod go-w DIR", of a home dir, say).
func TestAdmitBwrapUnderAUsersDirNeverChownsIt(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give the dir to another user")
	}
	base, err := os.MkdirTemp("/var/lib", ".warden-bwadmit-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	users := filepath.Join(base, "home")
	if err := os.Mkdir(users, 0o755); err != nil {
		t.Fatal(err)
	}
	bw := filepath.Join(users, "bwrap")
	if err := os.WriteFile(bw, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(users, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	_, err = AdmitBwrap(bw)
	var ae *AdmissionError
	if !errors.As(err, &ae) || !strings.Contains(ae.Problem, "owned by uid 1000") {
		t.Fatalf("AdmitBwrap under a user's dir: %v", err)
	}
	if strings.Contains(ae.Fix, "chown") || !strings.Contains(ae.Fix, "install bubblewrap under root-owned directories") {
		t.Errorf("fix: %q", ae.Fix)
	}
}
