package hookkit_test

// The SDK's end-to-end tests, against the real broker, are in
// engine/broker/hookkit_test.go: this module imports nothing of warden's.

import (
	"errors"
	"testing"

	"github.com/wardenhq/warden/engine/sdk/hookkit"
)

// Outside a run there is no engine to talk to, and Connect says so
// rather than dialing an empty path.
func TestConnectNeedsEnv(t *testing.T) {
	t.Setenv("WARDEN_SOCKET", "")
	t.Setenv("WARDEN_TOKEN", "")
	if _, err := hookkit.Connect(); !errors.Is(err, hookkit.ErrNoEngine) {
		t.Fatalf("err %v, want ErrNoEngine", err)
	}
}
