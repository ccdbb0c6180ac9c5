package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func copyFile(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, mode); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dst, mode)
}

// TestJailedHookGetsWardenHook: with warden-hook beside the warden binary
// a jailed hook's `warden` is warden-hook (the same name and path it had,
// so the hook changes nothing); the plan and doctor say which binary it
// is; without warden-hook, or with one that is not admitted, the hook
// gets the full warden binary and still works.
func TestJailedHookGetsWardenHook(t *testing.T) {
	needBwrap(t)
	bin := privateDir(t, "warden-bin-")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// This test binary is warden when so named (TestMain); a copy, since
	// the engine finds warden-hook beside the file it was started from.
	warden := filepath.Join(bin, "warden")
	copyFile(t, self, warden, 0o755)
	small := filepath.Join(bin, "warden-hook")
	copyFile(t, wardenHookBinary(t), small, 0o755)

	mod := privateDir(t, "warden-mod-")
	os.WriteFile(filepath.Join(mod, "module.yaml"), []byte("id: who\nversion: 1.0.0\ndescription: which warden\nhooks:\n  who:\n    run: [./who.sh]\n"), 0o644)
	os.WriteFile(filepath.Join(mod, "who.sh"), []byte("#!/bin/sh\ncommand -v warden\nwarden --help | head -n 1\nwarden hook log --level success \"logged through $(command -v warden)\"\n"), 0o755)

	data := filepath.Join(privateDir(t, "warden-data-"), "data")
	run := func(args ...string) (int, string) {
		t.Helper()
		cmd := exec.Command(warden, append([]string{"--data-dir", data}, args...)...)
		cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		} else if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	if code, out := run("module", "add", mod); code != 0 {
		t.Fatalf("module add: %d %s", code, out)
	}

	// warden-hook beside warden.
	if _, out := run("hook", "plan", "who", "who"); !strings.Contains(out, small) || !strings.Contains(out, "/opt/warden/bin/warden") {
		t.Errorf("plan does not bind %s as /opt/warden/bin/warden:\n%s", small, out)
	}
	if _, out := run("doctor"); !strings.Contains(out, "jail helper") || !strings.Contains(out, small+", bound as /opt/warden/bin/warden") {
		t.Errorf("doctor does not name warden-hook:\n%s", out)
	}
	code, out := run("hook", "run", "who", "who")
	if code != 0 || !strings.Contains(out, "/opt/warden/bin/warden") || !strings.Contains(out, "This is warden-hook") || !strings.Contains(out, "logged through /opt/warden/bin/warden") {
		t.Fatalf("jailed run with warden-hook: exit %d\n%s", code, out)
	}

	// Not admitted (others may write it): the full binary, and doctor warns.
	os.Chmod(small, 0o777)
	if _, out := run("doctor"); !strings.Contains(out, "refused") || !strings.Contains(out, "group- or world-writable") || !strings.Contains(out, "the full warden binary "+warden) {
		t.Errorf("doctor on a writable warden-hook:\n%s", out)
	}
	if _, out := run("hook", "plan", "who", "who"); !strings.Contains(out, "/opt/warden/bin/warden   ro     required     "+warden+" ") || !strings.Contains(out, "warden-hook was refused, see warden doctor") {
		t.Errorf("plan binds a writable warden-hook:\n%s", out)
	}

	// Gone: the full warden binary instead.
	os.Remove(small)
	if _, out := run("hook", "plan", "who", "who"); !strings.Contains(out, warden) || !strings.Contains(out, "the full warden binary") {
		t.Errorf("plan without warden-hook:\n%s", out)
	}
	if _, out := run("doctor"); !strings.Contains(out, "the full warden binary "+warden) || !strings.Contains(out, "no warden-hook beside it") {
		t.Errorf("doctor without warden-hook:\n%s", out)
	}
	code, out = run("hook", "run", "who", "who")
	if code != 0 || strings.Contains(out, "This is warden-hook") || !strings.Contains(out, "logged through /opt/warden/bin/warden") {
		t.Fatalf("jailed run with the full binary: exit %d\n%s", code, out)
	}
}
