package sshconsole

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKeyThemesAreRemembered: a key's :theme choice outlives the
// session (and serve), in a 0600 file; an unknown name falls back.
func TestKeyThemesAreRemembered(t *testing.T) {
	dir := t.TempDir()
	k := &keyThemes{path: filepath.Join(dir, ThemesFile)}
	if got := k.get("ssh:SHA256:a"); got != "" {
		t.Fatalf("a new key has theme %q", got)
	}
	if err := k.set("ssh:SHA256:a", "light"); err != nil {
		t.Fatal(err)
	}
	if err := k.set("ssh:SHA256:b", "neon"); err != nil {
		t.Fatal(err)
	}
	again := &keyThemes{path: k.path}
	if got := again.get("ssh:SHA256:a"); got != "light" {
		t.Errorf("key a: %q, want light", got)
	}
	if got := again.get("ssh:SHA256:b"); got != "" {
		t.Errorf("key b chose an unknown theme, got %q", got)
	}
	st, err := os.Stat(k.path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("themes file: %v %v", st.Mode(), err)
	}
}

func TestHostKeyFingerprint(t *testing.T) {
	dir := t.TempDir()
	pem, err := HostKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	fp, err := HostKeyFingerprint(pem)
	if err != nil || !strings.HasPrefix(fp, "SHA256:") || len(fp) != len("SHA256:")+43 {
		t.Fatalf("fingerprint %q, %v", fp, err)
	}
}
