package hands

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/wardenhq/warden/engine/hands/handstest"
)

const testOwner = "local:test"

// fixture is one not-yet-existing root on a real runtime.
type fixture struct {
	t    *testing.T
	eng  string // docker or podman
	sock string
	cli  *client.Client
	base string
	root string

	mu     sync.Mutex
	steps  []string
	phases []Phase
}

func newFixture(t *testing.T, e handstest.Engine) *fixture {
	t.Helper()
	f := &fixture{t: t, eng: e.Name, sock: e.Socket, cli: handstest.Client(t, e.Socket), base: handstest.Base(t, e.Socket)}
	f.root = filepath.Join(f.base, "root")
	return f
}

// wantInodes is what the workspace's inodes are bounded by on f's runtime.
func (f *fixture) wantInodes() string {
	if f.eng == RuntimePodman {
		return InodesUnboundedPodman
	}
	return WorkspaceInodes
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
		Config: &container.Config{Image: handstest.Image, Entrypoint: []string{"sh", "-c", idleLoop}, Labels: labels},
		HostConfig: &container.HostConfig{NetworkMode: "none", Resources: container.Resources{Ulimits: []*container.Ulimit{
			{Name: "nofile", Soft: FileLimit, Hard: FileLimit}, {Name: "nproc", Soft: FileLimit, Hard: FileLimit}}}},
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

// capsAllDropped reads the runtime's report of --cap-drop ALL: Docker
// echoes ["ALL"]; Podman lists each capability it dropped, which must be
// at least its default set (containers.conf) plus the ones Docker grants.
func (f *fixture) capsAllDropped(drop, add []string) bool {
	if len(add) != 0 {
		return false
	}
	if f.eng == RuntimeDocker {
		return reflect.DeepEqual(drop, []string{"ALL"})
	}
	for _, c := range []string{"CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"} {
		if !slices.Contains(drop, "CAP_"+c) && !slices.Contains(drop, c) {
			return false
		}
	}
	return true
}

// tmpfsAsSet reads the workspace tmpfs: exactly as set on Docker; on
// Podman the size and mode as set, no inode option, Podman's defaults
// appended.
func (f *fixture) tmpfsAsSet(opts string) bool {
	if f.eng == RuntimeDocker {
		return opts == "size=128m,nr_inodes=32768,mode=1777"
	}
	have := strings.Split(opts, ",")
	return slices.Contains(have, "size=128m") && slices.Contains(have, "mode=1777") && !strings.Contains(opts, "nr_inodes")
}

func (f *fixture) ulimitsAsSet(us []*container.Ulimit) bool {
	got := map[string][2]int64{}
	for _, u := range us {
		got[strings.ToLower(strings.TrimPrefix(u.Name, "RLIMIT_"))] = [2]int64{u.Soft, u.Hard}
	}
	return len(got) == 2 && got["nofile"] == [2]int64{4096, 4096} && got["nproc"] == [2]int64{4096, 4096}
}

// cliPrefix is the runtime's own command line on f's socket, as messages
// name it.
func (f *fixture) cliPrefix() string {
	if f.eng == RuntimePodman {
		return "podman --url unix://" + f.sock
	}
	return "docker -H unix://" + f.sock
}
