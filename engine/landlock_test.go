package engine

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wardenhq/warden/engine/jail"
)

// TestLandlockRunRefusals: under the landlock backend a run whose plan
// Landlock cannot express fails before anything is spawned, with the
// reason in the run's error: a destination list (Landlock filters ports,
// not addresses), and a path input that holds the data dir (a hidden
// path under an allowed one). The same module runs under landlock
// without them, in its own process group, and its record says landlock.
func TestLandlockRunRefusals(t *testing.T) {
	if abi := jail.ProbeHost().LandlockABI; abi < jail.MinLandlockABI {
		t.Skipf("Landlock ABI %d here", abi)
	}
	e := openTestEngine(t)
	base, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(base, 0o700)
	dir, err := os.MkdirTemp(base, "warden-landlock-module-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	script := "#!/bin/sh\nread -r _ _ _ _ pgid _ < /proc/self/stat\n[ \"$pgid\" = \"$$\" ] || exit 3\nexit 0\n"
	if err := os.WriteFile(filepath.Join(dir, "h.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	manifest := `id: llmod
version: 1.0.0
description: landlock refusals
hooks:
  plain:
    run: [./h.sh]
  egress:
    run: [./h.sh]
    network: [api.github.com:443]
  src:
    run: [./h.sh]
    inputs: {src: path}
`
	if err := os.WriteFile(filepath.Join(dir, "module.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := e.AddModule(testActor, dir); err != nil {
		t.Fatal(err)
	}
	o, err := e.RunHook(testActor, RunRequest{Module: "llmod", Hook: "plain", Jail: JailLandlock})
	if err != nil || !o.OK() || o.Run.JailMode != JailLandlock {
		t.Fatalf("plain hook under landlock: %v %+v", err, o.Run)
	}
	for _, c := range []struct {
		hook string
		raw  map[string]string
		want string
	}{
		{"egress", nil, "Landlock filters TCP ports, not addresses"},
		// Refused before the plan, under every backend (jail.CheckInputs).
		{"src", map[string]string{"src": filepath.Dir(e.DataDir())}, "holds warden's data dir"},
	} {
		o, err := e.RunHook(testActor, RunRequest{Module: "llmod", Hook: c.hook, RawInputs: c.raw, Jail: JailLandlock})
		if err != nil {
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v, want %q", c.hook, err, c.want)
			}
			continue
		}
		if o.OK() || !strings.Contains(o.Run.Error, c.want) {
			t.Errorf("%s under landlock: %+v, want a refusal saying %q", c.hook, o.Run, c.want)
		}
	}
}

// TestLandlockStageMirrorsTheHooksEnd: under landlock the process the
// executor waits for is the stage, the hook's reaper; it ends as the
// hook did, so the run's record and hook.end receipt say what they say
// with the jail off: the exit code, or the signal that killed the hook.
// (Under bwrap the signal comes through as 128+n: the exit code of
// bwrap's own init.)
func TestLandlockStageMirrorsTheHooksEnd(t *testing.T) {
	needJail(t)
	if why := landlockWhyNot(); why != "" {
		t.Skip(why)
	}
	mod := shellModule(t, "ends", map[string][2]string{
		"code":   {"exit 7\n", ""},
		"signal": {"kill -TERM $$\n", ""},
		"segv":   {"kill -SEGV $$\n", ""},
	})
	e := openTestEngine(t)
	if _, err := e.AddModule(testActor, mod); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		hook, mode string
		exit       string // hook.end's exit
		signal     string // hook.end's signal ("" for none)
		err        string // the run's error
	}{
		{"code", JailOff, "7", "", "exit code 7"},
		{"code", JailLandlock, "7", "", "exit code 7"},
		{"code", JailBwrap, "7", "", "exit code 7"},
		{"signal", JailOff, "-1", "SIGTERM", "killed by signal SIGTERM"},
		{"signal", JailLandlock, "-1", "SIGTERM", "killed by signal SIGTERM"},
		{"signal", JailBwrap, "143", "", "exit code 143"},
		{"segv", JailOff, "-1", "SIGSEGV", "killed by signal SIGSEGV"},
		{"segv", JailLandlock, "-1", "SIGSEGV", "killed by signal SIGSEGV"},
		{"segv", JailBwrap, "139", "", "exit code 139"},
	} {
		o, stream := hostileRun(t, e, "ends", c.hook, c.mode)
		var end map[string]any
		for _, r := range allReceipts(t, e) {
			var d map[string]any
			json.Unmarshal(r.Details, &d)
			if r.Kind == "hook.end" && d["run"] == o.Run.ID {
				end = d
			}
		}
		signal, _ := end["signal"].(string)
		if fmt.Sprint(end["exit"]) != c.exit || signal != c.signal || o.Run.Error != c.err {
			t.Errorf("%s under %s: hook.end exit %v signal %q, error %q; want %s %q %q\n%s", c.hook, c.mode, end["exit"], signal, o.Run.Error, c.exit, c.signal, c.err, stream)
		}
	}
}

// landlockWhyNot says why this test process's runs cannot go under the
// landlock backend ("" when they can): the kernel's ABI, or root below
// ABI 6, whose runs the backend refuses (signals are not scoped).
func landlockWhyNot() string {
	abi := jail.ProbeHost().LandlockABI
	if why := jail.LandlockWhyNot(abi); why != "" {
		return why
	}
	if os.Geteuid() == 0 && abi < 6 {
		return fmt.Sprintf("landlock refuses root's runs below ABI 6 (ABI %d here): signals are not scoped", abi)
	}
	return ""
}
