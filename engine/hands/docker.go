// Package hands sets up, checks and finishes a "hands" container: a
// container on a Docker Engine or a Podman service (through its
// Docker-compatible socket) where a task's effects happen, owned and
// recorded under a hands root so it can always be finished or reconciled
// (docs/operating.md).
//
// The runtime is reached over the explicit engine socket only: never
// DOCKER_HOST, never a default. Its identity (engine.go) is recorded at
// init and checked before every later effect, so a different runtime
// answering on the same path is never asked to stop anything.
package hands

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

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

// observed is what inspection says about a recorded container.
type observed struct {
	Missing   bool
	State     string // docker's status: created, running, exited, ...
	Running   bool
	StartedAt string
	LabelOK   bool // both labels name this owner and root
}

// inspect looks at a container; a missing one is not an error.
func (e *runtimeClient) inspect(ctx context.Context, id, owner, root string) (observed, container.InspectResponse, error) {
	res, err := e.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return observed{Missing: true, State: "missing"}, container.InspectResponse{}, nil
	}
	if err != nil {
		return observed{}, container.InspectResponse{}, fmt.Errorf("inspect container %s: %w", ShortID(id), err)
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
func (e *runtimeClient) labelled(ctx context.Context, owner, root string) ([]string, error) {
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
func (e *runtimeClient) runningOf(ctx context.Context, ids []string, owner, root string) ([]string, error) {
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
func (e *runtimeClient) stopOwned(ctx context.Context, id, owner, root string) (stopped bool, err error) {
	o, _, err := e.inspect(ctx, id, owner, root)
	if err != nil {
		return false, err
	}
	if o.Missing {
		return false, nil
	}
	if !o.LabelOK {
		return false, fmt.Errorf("container %s does not carry this root's owner label: warden never stops it", ShortID(id))
	}
	if o.Running {
		timeout := 10
		if _, err := e.cli.ContainerStop(ctx, id, client.ContainerStopOptions{Timeout: &timeout}); err != nil && !cerrdefs.IsNotFound(err) {
			return false, fmt.Errorf("stop container %s: %w", ShortID(id), err)
		}
	}
	o, _, err = e.inspect(ctx, id, owner, root)
	if err != nil {
		return false, err
	}
	if o.Running {
		return false, fmt.Errorf("container %s is still running after docker stop", ShortID(id))
	}
	return true, nil
}

// ShortID is a container id as docker prints it (its first 12 hex
// digits), or "none" when no container is recorded. Every message and view
// that names a container uses it, so they all say "none" the same way.
func ShortID(id string) string {
	if id == "" {
		return "none"
	}
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
