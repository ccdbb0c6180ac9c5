package hands

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/moby/moby/client"
)

// Image is one local image of a runtime, as the console offers it.
type Image struct {
	// Ref is what to pass as --image: a repo:tag, or the short id of an
	// image without tags.
	Ref string `json:"ref"`
	// ID is the image's short id (12 hex digits of its sha256).
	ID string `json:"id"`
}

// CheckSocket holds an engine socket path to the rules init uses before it
// dials: absolute, clean, no control characters, short enough to dial, and
// a socket file. It does not dial.
func CheckSocket(socket string) error {
	switch {
	case socket == "":
		return fmt.Errorf("no engine socket: name the Docker or Podman socket explicitly, e.g. /run/docker.sock or /run/podman/podman.sock (warden never reads DOCKER_HOST)")
	case !filepath.IsAbs(socket) || filepath.Clean(socket) != socket || hasControl(socket):
		return fmt.Errorf("engine socket %q must be an absolute, clean path, e.g. /run/docker.sock", socket)
	case len(socket) > maxSocketPath:
		return fmt.Errorf("engine socket %q is longer than %d bytes and cannot be dialled", socket, maxSocketPath)
	}
	_, err := socketIdentity(socket)
	return err
}

// LocalImages lists the images the runtime at socket holds locally (init
// never pulls), sorted by Ref: one entry per repo:tag, and the short id
// for an image without tags.
func LocalImages(ctx context.Context, socket string) ([]Image, error) {
	eng, err := openRuntime(ctx, socket)
	if err != nil {
		return nil, err
	}
	defer eng.Close()
	// The same check init makes before it creates anything: the wizard
	// lists images only on a runtime that can run the container.
	if _, err := eng.checkInit(); err != nil {
		return nil, fmt.Errorf("the %s at %s cannot run a hands container: %w", runtimeName(eng.id.Engine), socket, err)
	}
	res, err := eng.cli.ImageList(ctx, client.ImageListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list the images of the %s at %s: %w", runtimeName(eng.id.Engine), socket, err)
	}
	var out []Image
	for _, im := range res.Items {
		id := strings.TrimPrefix(im.ID, "sha256:")
		if len(id) > 12 {
			id = id[:12]
		}
		tagged := false
		for _, t := range im.RepoTags {
			if t == "" || t == "<none>:<none>" {
				continue
			}
			tagged = true
			out = append(out, Image{Ref: t, ID: id})
		}
		if !tagged && id != "" {
			out = append(out, Image{Ref: id, ID: id})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Ref < out[j].Ref })
	return out, nil
}
