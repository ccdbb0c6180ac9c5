package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEgressBridgeThroughWardenHook: in egress mode the jail's first
// program is `warden hook egress-bridge`; with warden-hook as the jail's
// warden it still hands the listeners to the run's proxy and execs the
// hook, whose CONNECT through 127.0.0.1:3128 the proxy answers.
func TestEgressBridgeThroughWardenHook(t *testing.T) {
	needJail(t)
	_, small := helperBins(t)
	w := newTLSWorld(t)
	opts := Options{DataDir: filepath.Join(t.TempDir(), "data"), helper: small}
	opts.egress.testNames = map[string]bool{}
	for _, n := range egressNames {
		opts.egress.testNames[n] = true
	}
	e, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	dir := testModule(t, map[string]string{"bridge": fmt.Sprintf("    run: [./bridge.sh, \"%d\"]\n    network: [allowed.test:443]\n    timeout: 2m\n", w.port)})
	script := "#!/bin/bash\n" +
		"case \"$(warden --help | head -n 1)\" in *warden-hook*) echo helper: warden-hook;; *) echo helper: other;; esac\n" +
		"exec 3<>/dev/tcp/127.0.0.1/3128 || exit 3\n" +
		"printf 'CONNECT allowed.test:%s HTTP/1.1\\r\\nHost: allowed.test:%s\\r\\n\\r\\n' \"$1\" \"$1\" >&3\n" +
		"IFS= read -r line <&3\necho \"proxy said: ${line%$'\\r'}\"\n"
	if err := os.WriteFile(filepath.Join(dir, "bridge.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := e.AddModule("local:test", dir); err != nil {
		t.Fatal(err)
	}
	setNetwork(t, e, fmt.Sprintf("allowed.test:%d", w.port))
	o, err := e.RunHook(testActor, RunRequest{Module: "testmod", Hook: "bridge", Jail: JailBwrap})
	if err != nil {
		t.Fatal(err)
	}
	text := streamText(t, e, o.Run.ID)
	if !o.OK() || !strings.Contains(text, "helper: warden-hook") || !strings.Contains(text, "proxy said: HTTP/1.1 200 Connection established") {
		t.Fatalf("run %s (%s):\n%s", o.Run.Status, o.Run.Error, text)
	}
}
