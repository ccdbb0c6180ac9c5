package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// The demo's package step on a machine without sudo, as an ordinary
// user: it says which packages to install and the command to run as
// root, and stops with exit 1. It died with "scripts/lib.sh: line 15:
// sudo: command not found".
func TestDemoWithoutSudoSaysWhatToInstall(t *testing.T) {
	lib, err := filepath.Abs(filepath.Join("..", "..", "scripts", "lib.sh"))
	if err != nil {
		t.Fatal(err)
	}
	// A PATH of only what need_pkgs uses, so no sudo is found on it.
	bin := t.TempDir()
	for _, tool := range []string{"dpkg", "dpkg-query", "id"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Skipf("%s is not installed: the demo is for Debian", tool)
		}
		os.Symlink(p, filepath.Join(bin, tool))
	}
	os.Chmod(bin, 0o755)
	os.Chmod(filepath.Dir(bin), 0o755)
	cmd := exec.Command("/bin/bash", "-c", ". "+lib+"; need_pkgs warden-no-such-package bash; echo still-going")
	cmd.Env = []string{"PATH=" + bin, "HOME=/nonexistent", "LANG=C.UTF-8"}
	if os.Geteuid() == 0 {
		if fi, err := os.Stat(lib); err != nil || fi.Mode().Perm()&0o004 == 0 {
			t.Skip("scripts/lib.sh is not readable by the ordinary user")
		}
		for d := filepath.Dir(lib); d != "/"; d = filepath.Dir(d) {
			if fi, err := os.Stat(d); err != nil || fi.Mode().Perm()&0o001 == 0 {
				t.Skipf("%s is closed to the ordinary user", d)
			}
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: ordinaryUID, Gid: ordinaryUID}}
	}
	out, err := cmd.CombinedOutput()
	text := string(out)
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 {
		t.Fatalf("need_pkgs without sudo: want exit 1, got %v:\n%s", err, text)
	}
	for _, want := range []string{"missing Debian packages: warden-no-such-package", "no sudo", "As root", "apt-get update && apt-get install -y warden-no-such-package"} {
		if !strings.Contains(text, want) {
			t.Errorf("need_pkgs without sudo lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "command not found") || strings.Contains(text, "still-going") || strings.Contains(text, "install -y warden-no-such-package bash") {
		t.Errorf("need_pkgs without sudo:\n%s", text)
	}
}
