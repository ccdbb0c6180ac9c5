package hands

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"warden/engine/hands/handstest"
)

const testOwner = "local:test"

// fixture is one not-yet-existing root on a real engine.
type fixture struct {
	t    *testing.T
	sock string
	cli  *client.Client
	base string
	root string

	mu     sync.Mutex
	steps  []string
	phases []Phase
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	sock := handstest.Docker(t)
	f := &fixture{t: t, sock: sock, cli: handstest.Client(t, sock), base: handstest.Base(t, sock)}
	f.root = filepath.Join(f.base, "root")
	return f
}

func (f *fixture) opts() InitOptions {
	return InitOptions{Root: f.root, EngineSocket: f.sock, Image: handstest.Image, Access: AccessFiles, Owner: testOwner,
		Progress: func(step, _ string) {
			f.mu.Lock()
			f.steps = append(f.steps, step)
			f.mu.Unlock()
		},
		OnPhase: func(r SetupReceipt) error {
			f.mu.Lock()
			f.phases = append(f.phases, r.Phase)
			f.mu.Unlock()
			return nil
		}}
}

// ready runs Init and requires phase ready.
func (f *fixture) ready() InitResult {
	f.t.Helper()
	res, err := Init(context.Background(), f.opts())
	if err != nil {
		f.t.Fatalf("Init: %v", err)
	}
	return res
}

func (f *fixture) inspect(id string) container.InspectResponse {
	f.t.Helper()
	res, err := f.cli.ContainerInspect(context.Background(), id, client.ContainerInspectOptions{})
	if err != nil {
		f.t.Fatalf("inspect %s: %v", id, err)
	}
	return res.Container
}

func (f *fixture) receipt() SetupReceipt {
	f.t.Helper()
	r, err := ReadReceipt(f.root)
	if err != nil {
		f.t.Fatalf("ReadReceipt: %v", err)
	}
	return r
}

// foreign starts a container that is not this root's: labels as given.
func (f *fixture) foreign(labels map[string]string) string {
	f.t.Helper()
	ctx := context.Background()
	res, err := f.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config:     &container.Config{Image: handstest.Image, Entrypoint: []string{"sh", "-c", idleLoop}, Labels: labels},
		HostConfig: &container.HostConfig{NetworkMode: "none"},
	})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() {
		f.cli.ContainerRemove(context.Background(), res.ID, client.ContainerRemoveOptions{Force: true})
	})
	if _, err := f.cli.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
		f.t.Fatal(err)
	}
	return res.ID
}

func wantContains(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want an error containing %q, got nil", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not contain %q", err, p)
		}
	}
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}
