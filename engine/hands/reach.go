package hands

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// LabelProbe marks the short-lived container init creates (never starts)
// to look at the image's directories before the root exists; its value is
// the root. Init removes it at once; one left behind by a killed init is
// never started and may be removed by hand.
const LabelProbe = "dev.warden.hands.probe"

// initDir is the directory the runtime puts its init binary in, inside the
// container: Podman bind-mounts catatonit at /run/podman-init, on the
// tmpfs it mounts at /run of a read-only container; Docker bind-mounts
// docker-init at /sbin/docker-init.
func initDir(kind string) (dir, bin string) {
	if kind == RuntimePodman {
		return "/run", "/run/podman-init"
	}
	return "/sbin", "/sbin/docker-init"
}

// dirStat is what the runtime says about one directory of the container's
// file system: its mode, or that it is not there.
type dirStat struct {
	Path    string
	Mode    fs.FileMode
	Missing bool
}

// checkReach says whether the container's user (ContainerUser, uid 10002,
// no capabilities) can reach the init binary in a container of image: the
// runtime stats it as that user, and a directory on the way without the
// search bit for others fails every start with the runtime's bare
// `exec: "/run/podman-init": stat /run/podman-init: permission denied`.
//
// The runtime shows a rootfs only through a container, so checkReach
// creates one from the image (never started, labelled LabelProbe), stats
// / and the init's directory through the archive endpoint, and removes
// it. A stat the runtime cannot answer proves nothing and is not a refusal.
func (e *runtimeClient) checkReach(ctx context.Context, image, root string) (err error) {
	res, err := e.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config: &container.Config{
			Image:      image,
			User:       ContainerUser,
			Entrypoint: []string{"true"},
			Labels:     map[string]string{LabelProbe: root},
		},
		HostConfig: &container.HostConfig{NetworkMode: "none", CapDrop: []string{"ALL"}},
	})
	if err != nil {
		return &FixError{Problem: fmt.Sprintf("the %s at %s could not create a container from %s to check it: %v", runtimeName(e.id.Engine), e.socket, image, err),
			Fix: "nothing was created, so run the same init again once the engine can create containers", Err: err}
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if _, rerr := e.cli.ContainerRemove(rctx, res.ID, client.ContainerRemoveOptions{Force: true}); rerr != nil && !cerrdefs.IsNotFound(rerr) && err == nil {
			err = &FixError{Problem: fmt.Sprintf("could not remove the probe container %s (never started, label %s): %v", ShortID(res.ID), LabelProbe, rerr),
				Fix: fmt.Sprintf("remove it with `%s rm -f %s`, then run the same init again", cliFor(e.id.Engine, e.socket), ShortID(res.ID)), Err: rerr}
		}
	}()
	dir, _ := initDir(e.id.Engine)
	var seen []dirStat
	for _, p := range []string{"/", dir} {
		st, ok := e.statDir(ctx, res.ID, p)
		if !ok {
			return nil
		}
		seen = append(seen, st)
	}
	return reachProblem(e.id.Engine, e.id.Storage, seen)
}

// statDir stats p in container id, following symlinks (at most 8). ok is
// false when the runtime could not say.
func (e *runtimeClient) statDir(ctx context.Context, id, p string) (dirStat, bool) {
	for range 8 {
		res, err := e.cli.ContainerStatPath(ctx, id, client.ContainerStatPathOptions{Path: p})
		if cerrdefs.IsNotFound(err) {
			return dirStat{Path: p, Missing: true}, true
		}
		if err != nil {
			return dirStat{}, false
		}
		m := res.Stat.Mode
		if m&fs.ModeSymlink == 0 {
			return dirStat{Path: p, Mode: m}, true
		}
		t := res.Stat.LinkTarget
		if t == "" || t == p {
			return dirStat{}, false
		}
		if !path.IsAbs(t) {
			t = path.Join(path.Dir(p), t)
		}
		p = path.Clean(t)
	}
	return dirStat{}, false
}

// reachProblem refuses the first directory of seen (/, then the init's)
// that others cannot search, saying what sets its mode and what to change.
// A missing init directory is fine: the runtime creates it 0755 (and
// Podman's /run tmpfs is then 1777).
func reachProblem(kind, storage string, seen []dirStat) error {
	_, bin := initDir(kind)
	for _, st := range seen {
		if st.Missing || (st.Mode.IsDir() && st.Mode.Perm()&0o001 != 0) {
			continue
		}
		mode := fmt.Sprintf("%04o", uint32(st.Mode.Perm()))
		if !st.Mode.IsDir() {
			mode = "not a directory (" + st.Mode.String() + ")"
		}
		problem := fmt.Sprintf("in a container of this image, %s is %s: the container's user (uid 10002) cannot search it, so the runtime cannot reach %s (the %s's init) and every start fails with `stat %s: permission denied`",
			st.Path, mode, bin, runtimeName(kind), bin)
		var fix string
		switch {
		case st.Path == "/" && kind == RuntimePodman && strings.HasPrefix(storage, "vfs:"):
			problem += "; Podman's vfs storage keeps the mode of the image's own / (its overlay storage makes / 0555 whatever the image says)"
			fix = "give the image a / of mode 0755 (for `podman import`, `chmod 755` the directory you tar first), or run the Podman service on overlay storage (`podman --storage-driver overlay system service ...`, the default where the kernel has overlayfs); nothing was created, so run the same init again then"
		case st.Path == "/":
			fix = "give the image a / of mode 0755 (for an import, `chmod 755` the directory you tar first); nothing was created, so run the same init again then"
		case kind == RuntimePodman:
			problem += "; Podman mounts a tmpfs on /run of a read-only container, and the runtime gives it the mode of the image's /run"
			fix = "rebuild the image with /run at mode 0755 (or with no /run at all); no Podman flag changes this; nothing was created, so run the same init again then"
		default:
			fix = fmt.Sprintf("rebuild the image with %s at mode 0755; nothing was created, so run the same init again then", st.Path)
		}
		return &FixError{Problem: problem, Fix: fix, Err: errUnreachableInit}
	}
	return nil
}

// errUnreachableInit is the cause of reachProblem's refusals.
var errUnreachableInit = errors.New("the container's user cannot reach the init binary")
