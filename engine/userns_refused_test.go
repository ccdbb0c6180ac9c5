package engine

import (
	"os"
	"strings"
	"testing"

	"github.com/wardenhq/warden/engine/jail"
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

// TestUsernsRefusedAuto: on the same host, jail: auto (the default) never
// runs a hook unjailed. With Landlock (ABI 3 or later) it runs it under
// landlock and the record says so; without, nothing runs and the error
// names why each backend cannot serve.
func TestUsernsRefusedAuto(t *testing.T) {
	needJail(t)
	if os.Getenv("WARDEN_TEST_USERNS_REFUSED") == "" {
		t.Skip("needs a host with user.max_user_namespaces=0: scripts/uml-test makes one")
	}
	mod := shellModule(t, "refusedauto", map[string][2]string{"hello": {"echo the hook ran\n", ""}})
	e := openTestEngine(t)
	if _, err := e.AddModule(testActor, mod); err != nil {
		t.Fatal(err)
	}
	o, err := e.RunHook(testActor, RunRequest{Module: "refusedauto", Hook: "hello", Jail: JailAuto})
	if abi := jail.ProbeHost().LandlockABI; abi >= jail.MinLandlockABI {
		if err != nil || !o.OK() || o.Run.JailMode != JailLandlock {
			t.Fatalf("auto with Landlock ABI %d: %v %+v, want a run under landlock", abi, err, o.Run)
		}
		return
	}
	why := ""
	if err != nil {
		why = err.Error()
	} else {
		why = o.Run.Error
		if o.OK() {
			t.Fatalf("auto with neither backend: the run %+v succeeded", o.Run)
		}
		if strings.Contains(streamText(t, e, o.Run.ID), "the hook ran") {
			t.Fatal("the hook ran")
		}
	}
	for _, w := range []string{"no jail backend can run here", "user.max_user_namespaces is 0", "landlock: the kernel has no Landlock"} {
		if !strings.Contains(why, w) {
			t.Errorf("auto with neither backend: %q does not say %q", why, w)
		}
	}
}
