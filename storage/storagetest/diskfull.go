// Package storagetest holds what tests of a full disk need in more than
// one package: a small tmpfs of their own, and a way to fill it.
package storagetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/wardenhq/warden/storage"
)

// MountTmpfs mounts a tmpfs of size (mount's syntax: "8m") on a fresh dir
// and unmounts it when the test ends, after whatever was opened on it
// later has been closed (cleanups run last first). It needs root: CI has
// it, so there a missing root fails the test; elsewhere it is skipped.
func MountTmpfs(t testing.TB, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("this test mounts a tmpfs and needs root, which CI has")
		}
		t.Skip("this test mounts a tmpfs: run it as root")
	}
	dir := filepath.Join(t.TempDir(), "fs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
			exec.Command("umount", "-l", dir).Run()
		}
	})
	return dir
}

// FillFile appends to path until its filesystem is full, to the last
// byte. Running out of space is the point, not an error; any other
// failure is returned.
func FillFile(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		if storage.IsNoSpace(err) {
			return nil
		}
		return err
	}
	defer f.Close()
	for _, size := range []int{1 << 20, 64 << 10, 4 << 10, 512, 1} {
		buf := make([]byte, size)
		for {
			if _, err := f.Write(buf); err != nil {
				if !storage.IsNoSpace(err) {
					return err
				}
				break
			}
		}
	}
	return nil
}
