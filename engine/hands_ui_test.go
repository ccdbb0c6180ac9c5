package engine

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/wardenhq/warden/engine/hands/handstest"
)

// The console's helpers: root rules, socket candidates and local images.
func TestHandsUIHelpers(t *testing.T) {
	e := openEngine(t, Options{})
	var re *HandsRootError
	if err := e.ValidateHandsRoot("relative/root"); !errors.As(err, &re) || !strings.Contains(err.Error(), "is relative") {
		t.Errorf("relative root: %v", err)
	}
	if err := e.ValidateHandsRoot("/nonexistent-warden-parent/r"); err == nil || !strings.Contains(err.Error(), "mkdir -p /nonexistent-warden-parent") {
		t.Errorf("missing parent: %v", err)
	}
	if err := e.ValidateHandsRoot("/a,b"); err == nil || !strings.Contains(err.Error(), "comma") {
		t.Errorf("comma: %v", err)
	}

	// A socket named by WARDEN_TEST_DOCKER is offered; a plain file is not.
	dir := t.TempDir()
	sock := filepath.Join(dir, "d.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	t.Setenv("WARDEN_TEST_DOCKER", sock)
	t.Setenv("XDG_RUNTIME_DIR", dir)
	if got := HandsSocketCandidates(); !slices.Contains(got, sock) {
		t.Errorf("candidates %v lack %s", got, sock)
	}
	// Rootless Podman's socket under XDG_RUNTIME_DIR, and the tests'
	// private Podman, are offered too.
	os.Mkdir(filepath.Join(dir, "podman"), 0o700)
	psock := filepath.Join(dir, "podman", "podman.sock")
	pl, err := net.Listen("unix", psock)
	if err != nil {
		t.Fatal(err)
	}
	tsock := filepath.Join(dir, "p.sock")
	tl, err := net.Listen("unix", tsock)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("WARDEN_TEST_PODMAN", tsock)
	if got := HandsSocketCandidates(); !slices.Contains(got, psock) || !slices.Contains(got, tsock) {
		t.Errorf("candidates %v lack Podman's %s or %s", got, psock, tsock)
	}
	pl.Close()
	tl.Close()
	t.Setenv("WARDEN_TEST_PODMAN", "")
	// The same socket under two names is offered once.
	os.Symlink(sock, filepath.Join(dir, "docker.sock"))
	if got := HandsSocketCandidates(); slices.Contains(got, sock) == slices.Contains(got, filepath.Join(dir, "docker.sock")) {
		t.Errorf("the same socket twice (or not at all): %v", got)
	}
	plain := filepath.Join(dir, "plain")
	os.WriteFile(plain, nil, 0o600)
	t.Setenv("WARDEN_TEST_DOCKER", plain)
	os.Remove(filepath.Join(dir, "docker.sock"))
	if got := HandsSocketCandidates(); slices.Contains(got, plain) {
		t.Errorf("a plain file offered as a socket: %v", got)
	}
	if err := e.ValidateHandsSocket(plain); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("plain file as socket: %v", err)
	}
	if err := e.ValidateHandsSocket(sock); err != nil {
		t.Errorf("socket: %v", err)
	}
	if err := e.ValidateHandsSocket("run/docker.sock"); err == nil {
		t.Error("relative socket accepted")
	}
	// Something that is a socket but not a Docker Engine: the error says so.
	if _, err := e.HandsImages(context.Background(), filepath.Join(dir, "missing.sock")); err == nil || !strings.Contains(err.Error(), "no engine socket") {
		t.Errorf("images on a missing socket: %v", err)
	}
}

func TestHandsImages(t *testing.T) {
	sock := handstest.Docker(t)
	e := openEngine(t, Options{})
	ims, err := e.HandsImages(context.Background(), sock)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for i, im := range ims {
		if im.Ref == handstest.Image && len(im.ID) == 12 {
			found = true
		}
		if i > 0 && ims[i-1].Ref > im.Ref {
			t.Errorf("not sorted: %v", ims)
		}
	}
	if !found {
		t.Errorf("%s not among %v", handstest.Image, ims)
	}
}
