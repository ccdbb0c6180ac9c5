package engine

import (
	"testing"

	"github.com/wardenhq/warden/storage"
)

// Only bwrap's own message, as the run's one line of output, makes the
// run's error the user namespace explanation: a hook that prints such a
// line among others (stdout and stderr are read apart: it may even come
// first), or fails its own way, fails with its exit code as ever.
func TestUsernsMessageOnlyFromBwrap(t *testing.T) {
	needJail(t)
	mod := shellModule(t, "usernsmsg", map[string][2]string{
		"late":  {"echo hello\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n", ""},
		"plain": {"echo 'something broke' >&2\nexit 3\n", ""},
	})
	e := openTestEngine(t)
	if _, err := e.AddModule(testActor, mod); err != nil {
		t.Fatal(err)
	}
	for hook, want := range map[string]string{"late": "exit code 1", "plain": "exit code 3"} {
		o, stream := hostileRun(t, e, "usernsmsg", hook, JailBwrap)
		if o.Run.Status != storage.RunFailed || o.Run.Error != want {
			t.Errorf("%s: run %s %q, want failed %q; stream:\n%s", hook, o.Run.Status, o.Run.Error, want, stream)
		}
	}
}
