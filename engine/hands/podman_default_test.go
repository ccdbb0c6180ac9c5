package hands

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/moby/moby/client"

	"github.com/wardenhq/warden/engine/hands/handstest"
)

// Podman started as the README says (its own defaults: on this host
// overlay storage, runc, cgroupfs) runs hands to ready and finish.
func TestInitOnPodmanDefaultFlags(t *testing.T) {
	e := handstest.Engine{Name: RuntimePodman, Socket: handstest.PodmanDefaults(t)}
	f := newFixture(t, e)
	res := f.ready()
	st, err := Status(context.Background(), f.root)
	if err != nil || st.Engine != "ok" || len(st.Drift) != 0 || st.Container.State != "running" {
		t.Fatalf("status: %+v %v", st, err)
	}
	if out, err := Exec(context.Background(), f.root, []string{"id", "-u"}); err != nil || out.Exit != 0 || strings.TrimSpace(out.Stdout) != "10002" {
		t.Fatalf("exec id -u: %+v %v", out, err)
	}
	fin, err := Finish(context.Background(), f.root, nil, nil)
	if err != nil || !fin.Stopped {
		t.Fatalf("finish: %+v %v", fin, err)
	}
	if c := f.inspect(res.ContainerID); c.State.Running {
		t.Fatal("the container runs after finish")
	}
}

// importBroken imports a busybox image as ref on the runtime behind cli,
// its root at mode root and with dirs, removed when the test ends.
func importBroken(t *testing.T, cli *client.Client, ref string, root fs.FileMode, dirs map[string]fs.FileMode) {
	t.Helper()
	handstest.ImportImageWith(t, cli, ref, root, dirs)
	t.Cleanup(func() { cli.ImageRemove(context.Background(), ref, client.ImageRemoveOptions{Force: true}) })
}

// wantRefusedBeforeRoot requires err to be a refusal that names want and
// left nothing: no root, no container of the root, no probe container.
func wantRefusedBeforeRoot(t *testing.T, f *fixture, err error, want ...string) {
	t.Helper()
	wantContains(t, err, append(want, "uid 10002", "nothing was created, so run the same init again")...)
	var fe *FixError
	if !errors.As(err, &fe) || !errors.Is(err, errUnreachableInit) {
		t.Errorf("not a refusal with a fix: %#v", err)
	}
	if _, serr := os.Lstat(f.root); !errors.Is(serr, fs.ErrNotExist) {
		t.Errorf("the refused init created its root: %v", serr)
	}
	if ids := handstest.Labelled(t, f.cli, f.root); len(ids) != 0 {
		t.Errorf("containers of the refused root: %v", ids)
	}
	res, lerr := f.cli.ContainerList(context.Background(), client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", LabelProbe+"="+f.root)})
	if lerr != nil || len(res.Items) != 0 {
		t.Errorf("probe containers left behind: %+v %v", res.Items, lerr)
	}
}

// An image whose /run is 0700: Podman mounts its /run tmpfs with that
// mode and puts catatonit under it, so uid 10002 cannot start the
// container (`stat /run/podman-init: permission denied`), on the
// README's Podman as on the tests'. Init refuses before the root exists,
// and says what to change.
func TestInitRefusesImageWhoseRunLocksOutTheUser(t *testing.T) {
	for _, eng := range []struct {
		name string
		sock func(testing.TB) string
	}{{"defaults", handstest.PodmanDefaults}, {"test", handstest.Podman}} {
		t.Run(eng.name, func(t *testing.T) {
			f := newFixture(t, handstest.Engine{Name: RuntimePodman, Socket: eng.sock(t)})
			ref := "warden-test/run0700:1"
			importBroken(t, f.cli, ref, 0o755, map[string]fs.FileMode{"run/": 0o700})
			opts := f.opts()
			opts.Image = ref
			_, err := Init(context.Background(), opts)
			wantRefusedBeforeRoot(t, f, err, "/run is 0700", "/run/podman-init", "rebuild the image with /run at mode 0755")
			if slices.Contains(f.steps, StepLayout) {
				t.Errorf("steps %v: the layout was made", f.steps)
			}
		})
	}
}

// An image whose / is 0700: Podman's vfs storage (the tests' service)
// keeps that mode, so nothing in it is reachable by uid 10002; init
// refuses before the root exists and names the storage flag. Podman's
// overlay storage (its default) makes / 0555, and the same image runs.
func TestInitImageWhoseRootIs0700(t *testing.T) {
	ref := "warden-test/root0700:1"
	t.Run("vfs", func(t *testing.T) {
		f := newFixture(t, handstest.Engine{Name: RuntimePodman, Socket: handstest.Podman(t)})
		importBroken(t, f.cli, ref, 0o700, nil)
		opts := f.opts()
		opts.Image = ref
		_, err := Init(context.Background(), opts)
		wantRefusedBeforeRoot(t, f, err, "/ is 0700", "vfs storage", "--storage-driver overlay", "chmod 755")
	})
	t.Run("overlay", func(t *testing.T) {
		f := newFixture(t, handstest.Engine{Name: RuntimePodman, Socket: handstest.PodmanDefaults(t)})
		importBroken(t, f.cli, ref, 0o700, nil)
		opts := f.opts()
		opts.Image = ref
		if _, err := Init(context.Background(), opts); err != nil {
			t.Fatalf("overlay storage makes / 0555, so this image should run: %v", err)
		}
	})
}

func TestReachProblem(t *testing.T) {
	dir := fs.ModeDir
	for _, c := range []struct {
		kind, storage string
		seen          []dirStat
		want          []string // nil: no problem
	}{
		{RuntimePodman, "overlay:/x", []dirStat{{Path: "/", Mode: dir | 0o555}, {Path: "/run", Missing: true}}, nil},
		{RuntimePodman, "vfs:/x", []dirStat{{Path: "/", Mode: dir | 0o755}, {Path: "/run", Mode: dir | 0o711}}, nil},
		{RuntimePodman, "vfs:/x", []dirStat{{Path: "/", Mode: dir | 0o750}, {Path: "/run", Missing: true}}, []string{"/ is 0750", "--storage-driver overlay"}},
		{RuntimePodman, "overlay:/x", []dirStat{{Path: "/", Mode: dir | 0o555}, {Path: "/run", Mode: dir | 0o700}}, []string{"/run is 0700", "no Podman flag"}},
		{RuntimePodman, "overlay:/x", []dirStat{{Path: "/", Mode: dir | 0o555}, {Path: "/run", Mode: 0o644}}, []string{"/run is not a directory"}},
		{RuntimeDocker, "overlay2:/x", []dirStat{{Path: "/", Mode: dir | 0o700}, {Path: "/sbin", Missing: true}}, []string{"/ is 0700", "/sbin/docker-init", "give the image a / of mode 0755"}},
		{RuntimeDocker, "overlay2:/x", []dirStat{{Path: "/", Mode: dir | 0o755}, {Path: "/sbin", Mode: dir | 0o700}}, []string{"/sbin is 0700", "rebuild the image with /sbin at mode 0755"}},
	} {
		err := reachProblem(c.kind, c.storage, c.seen)
		if c.want == nil {
			if err != nil {
				t.Errorf("%s %s %+v: %v", c.kind, c.storage, c.seen, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s %s %+v: no problem, want %q", c.kind, c.storage, c.seen, c.want)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s %s %+v: %q lacks %q", c.kind, c.storage, c.seen, err, w)
			}
		}
		if c.kind == RuntimeDocker && strings.Contains(err.Error(), "storage-driver") {
			t.Errorf("Docker told about Podman's storage flag: %v", err)
		}
	}
}

// Docker bind-mounts docker-init at /sbin/docker-init: an image whose
// /sbin is 0700 fails the same way (`stat /sbin/docker-init: permission
// denied`), and init refuses it the same way. Its overlay2 storage makes
// / 0755 whatever the image says.
func TestInitRefusesImageWhoseSbinLocksOutTheUserOnDocker(t *testing.T) {
	f := newFixture(t, handstest.Engine{Name: RuntimeDocker, Socket: handstest.Docker(t)})
	ref := "warden-test/sbin0700:1"
	importBroken(t, f.cli, ref, 0o755, map[string]fs.FileMode{"sbin/": 0o700})
	opts := f.opts()
	opts.Image = ref
	_, err := Init(context.Background(), opts)
	wantRefusedBeforeRoot(t, f, err, "/sbin is 0700", "/sbin/docker-init", "rebuild the image with /sbin at mode 0755")
}
