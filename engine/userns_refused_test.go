package engine

import (
	"os"
	"strings"
	"testing"

	"github.com/wardenhq/warden/storage"
)

// TestUsernsRefusedRun: on a host whose user.max_user_namespaces is 0, a
// jailed run fails with one message that says why and what to do, and
// doctor says so before any run. Only scripts/uml-test can make such a
// host (it sets the sysctl in its own kernel, then sets
// WARDEN_TEST_USERNS_REFUSED); cmd/warden's TestUsernsRefusedExplained
// makes one inside a user namespace of the test's own on any host.
func TestUsernsRefusedRun(t *testing.T) {
	needJail(t)
	if os.Getenv("WARDEN_TEST_USERNS_REFUSED") == "" {
		t.Skip("needs a host with user.max_user_namespaces=0: scripts/uml-test makes one")
	}
	mod := shellModule(t, "refused", map[string][2]string{"hello": {"echo the hook ran\n", ""}})
	e := openTestEngine(t)
	if _, err := e.AddModule(testActor, mod); err != nil {
		t.Fatal(err)
	}
	o, stream := hostileRun(t, e, "refused", "hello", JailBwrap)
	want := "user namespaces refused, so the jail cannot start: user.max_user_namespaces is 0"
	if o.Run.Status != storage.RunFailed || !strings.HasPrefix(o.Run.Error, want) || !strings.Contains(o.Run.Error, "sysctl -w user.max_user_namespaces=") {
		t.Errorf("run %s %q, want failed: %q...; stream:\n%s", o.Run.Status, o.Run.Error, want, stream)
	}
	if strings.Contains(stream, "the hook ran") {
		t.Errorf("the hook ran:\n%s", stream)
	}
	found := false
	for _, c := range Doctor(DoctorOptions{DataDir: t.TempDir()}).Checks {
		if c.Name == "user namespaces" {
			found = true
			if c.Status != "problem" || !strings.Contains(c.Detail, "user.max_user_namespaces is 0") {
				t.Errorf("doctor's user namespaces check: %+v", c)
			}
		}
	}
	if !found {
		t.Error("doctor has no user namespaces check")
	}
}
