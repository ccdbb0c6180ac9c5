// Package hands sets up, checks and finishes a "hands" container: a Docker
// container where a task's effects happen, owned and recorded under a hands
// root so it can always be finished or reconciled (DESIGN section 7).
//
// Docker is reached over the explicit engine socket only: never
// DOCKER_HOST, never a default. The engine's identity is the daemon ID
// plus the socket file's device and inode, recorded at init and checked
// before every later effect, so a different daemon answering on the same
// path is never asked to stop anything.
package hands

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// Container labels. The owner label binds owner and root, so a container
// of another root or another operator never matches.
const (
	LabelOwner = "dev.warden.hands.owner"
	LabelRoot  = "dev.warden.hands.root"
)

// OwnerLabel is the owner label's value for owner and root.
func OwnerLabel(owner, root string) string {
	sum := sha256.Sum256([]byte(owner + "|" + root))
	return hex.EncodeToString(sum[:])
}

// Identity is who answers on the socket.
type Identity struct {
	DaemonID string
	Socket   string // "DEV:INODE" of the socket file
}

// dockerEngine is a Docker client bound to one socket.
type dockerEngine struct {
	cli    *client.Client
	socket string
	id     Identity
}

// openEngine checks the socket path, connects, negotiates the API version
// (Debian 12's docker.io speaks 1.41) and reads the engine's identity.
func openEngine(ctx context.Context, socket string) (*dockerEngine, error) {
	switch {
	case socket == "":
		return nil, errors.New("no --engine-socket: pass the Docker socket explicitly, e.g. --engine-socket /run/docker.sock (warden never reads DOCKER_HOST)")
	case !filepath.IsAbs(socket) || filepath.Clean(socket) != socket || hasControl(socket):
		return nil, fmt.Errorf("engine socket %q must be an absolute, clean path, e.g. /run/docker.sock", socket)
	case len(socket) > maxSocketPath:
		return nil, fmt.Errorf("engine socket %q is longer than %d bytes and cannot be dialled: use a shorter path (a symlink-free bind or a shorter --exec-root)", socket, maxSocketPath)
	}
	sockID, err := socketIdentity(socket)
	if err != nil {
		return nil, err
	}
	cli, err := client.New(client.WithHost("unix://"+socket), client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("engine socket %s: %w", socket, err)
	}
	e := &dockerEngine{cli: cli, socket: socket}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := cli.Ping(pctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		cli.Close()
		return nil, fmt.Errorf("cannot reach the Docker Engine at %s: %v; check that dockerd is running there and that you may use its socket", socket, err)
	}
	info, err := cli.Info(pctx, client.InfoOptions{})
	if err != nil {
		cli.Close()
		return nil, fmt.Errorf("the Docker Engine at %s did not say who it is (info): %v; check dockerd's log", socket, err)
	}
	if !daemonIDPattern.MatchString(info.Info.ID) {
		cli.Close()
		return nil, fmt.Errorf("the Docker Engine at %s reports a daemon ID warden does not recognise; is it a Docker Engine?", socket)
	}
	e.id = Identity{DaemonID: info.Info.ID, Socket: sockID}
	return e, nil
}

func (e *dockerEngine) Close() { e.cli.Close() }

// socketIdentity is "DEV:INODE" of the socket file (symlinks followed: the
// identity is the file dockerd listens on).
func socketIdentity(socket string) (string, error) {
	fi, err := os.Stat(socket)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("no Docker socket at %s: start dockerd or pass the right --engine-socket", socket)
	}
	if err != nil {
		return "", fmt.Errorf("engine socket %s: %v", socket, errText(err))
	}
	if fi.Mode()&fs.ModeSocket == 0 {
		return "", fmt.Errorf("engine socket %s is not a socket: pass the path dockerd listens on (its --host unix://PATH)", socket)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return fmt.Sprintf("%d:%d", uint64(st.Dev), st.Ino), nil
}

// checkIdentity refuses an engine that is not the one the receipt names.
func (e *dockerEngine) checkIdentity(root string, r SetupReceipt) error {
	if e.id.DaemonID == r.DaemonID && e.id.Socket == r.SocketIdentity {
		return nil
	}
	return fmt.Errorf("the Docker Engine at %s is not the one %s was set up with (recorded daemon %s on socket %s; now daemon %s on socket %s): "+
		"warden will not act through it. If dockerd was only restarted (it re-creates its socket, so the inode changes), inspect the container yourself "+
		"(`docker -H unix://%s inspect %s`) and stop it by hand; otherwise point --engine-socket at the engine that holds it",
		e.socket, root, r.DaemonID, r.SocketIdentity, e.id.DaemonID, e.id.Socket, e.socket, shortID(r.ContainerID))
}

// observed is what inspection says about a recorded container.
type observed struct {
	Missing   bool
	State     string // docker's status: created, running, exited, ...
	Running   bool
	StartedAt string
	LabelOK   bool // both labels name this owner and root
}

// inspect looks at a container; a missing one is not an error.
func (e *dockerEngine) inspect(ctx context.Context, id, owner, root string) (observed, container.InspectResponse, error) {
	res, err := e.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return observed{Missing: true, State: "missing"}, container.InspectResponse{}, nil
	}
	if err != nil {
		return observed{}, container.InspectResponse{}, fmt.Errorf("inspect container %s: %w", shortID(id), err)
	}
	c := res.Container
	o := observed{}
	if c.State != nil {
		o.State, o.Running, o.StartedAt = string(c.State.Status), c.State.Running, c.State.StartedAt
	}
	if c.Config != nil {
		o.LabelOK = c.Config.Labels[LabelOwner] == OwnerLabel(owner, root) && c.Config.Labels[LabelRoot] == root
	}
	return o, c, nil
}

// labelled lists containers (running or not) that carry this root's labels.
func (e *dockerEngine) labelled(ctx context.Context, owner, root string) ([]string, error) {
	f := client.Filters{}.Add("label", LabelOwner+"="+OwnerLabel(owner, root))
	res, err := e.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	var ids []string
	for _, c := range res.Items {
		// The filter is the daemon's word; the labels are checked again here.
		if c.Labels[LabelOwner] == OwnerLabel(owner, root) && c.Labels[LabelRoot] == root {
			ids = append(ids, c.ID)
		}
	}
	return ids, nil
}

// runningOf returns those of ids that are running now (a container gone
// since it was listed is not).
func (e *dockerEngine) runningOf(ctx context.Context, ids []string, owner, root string) ([]string, error) {
	var running []string
	for _, id := range ids {
		o, _, err := e.inspect(ctx, id, owner, root)
		if err != nil {
			return nil, err
		}
		if o.Running {
			running = append(running, id)
		}
	}
	return running, nil
}

// stopOwned stops a container only after inspection shows our labels, and
// verifies by inspection that it stopped. stopped reports a container that
// is not running afterwards.
func (e *dockerEngine) stopOwned(ctx context.Context, id, owner, root string) (stopped bool, err error) {
	o, _, err := e.inspect(ctx, id, owner, root)
	if err != nil {
		return false, err
	}
	if o.Missing {
		return false, nil
	}
	if !o.LabelOK {
		return false, fmt.Errorf("container %s does not carry this root's owner label: warden never stops it", shortID(id))
	}
	if o.Running {
		timeout := 10
		if _, err := e.cli.ContainerStop(ctx, id, client.ContainerStopOptions{Timeout: &timeout}); err != nil && !cerrdefs.IsNotFound(err) {
			return false, fmt.Errorf("stop container %s: %w", shortID(id), err)
		}
	}
	o, _, err = e.inspect(ctx, id, owner, root)
	if err != nil {
		return false, err
	}
	if o.Running {
		return false, fmt.Errorf("container %s is still running after docker stop", shortID(id))
	}
	return true, nil
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	if id == "" {
		return "(none recorded)"
	}
	return id
}
