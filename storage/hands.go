package storage

import (
	"errors"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"
)

var bucketHands = []byte("hands")

// HandsRecord is a known hands root: where it is, what it was set up
// with and the last phase warden recorded. The root's own
// evidence/setup.json stays the truth for finish and status; this record
// lets `warden hands list` find roots without walking the disk.
type HandsRecord struct {
	Root         string `json:"root"`
	Owner        string `json:"owner"`
	Access       string `json:"access"`
	EngineSocket string `json:"engineSocket"`
	// Engine is docker or podman; empty in records written before warden
	// told engines apart, which were all Docker (Engine() says so).
	Engine   string `json:"engine,omitempty"`
	DaemonID string `json:"daemonId"`
	Image    string `json:"image"`
	// ImageName is the image as the operator named it at init
	// ("busybox:latest"); Image pins it. Empty in older records.
	ImageName   string    `json:"imageName,omitempty"`
	ContainerID string    `json:"containerId"`
	Generation  string    `json:"generation"`
	Phase       string    `json:"phase"`
	Created     time.Time `json:"created"`
	Updated     time.Time `json:"updated"`
}

var (
	handsPhasePattern = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^(prepared|creating|running|ready|failed|finished)$`)
	})
	handsContainerPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([0-9a-f]{64})?$`) })
	handsImagePattern     = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(sha256:[0-9a-f]{64})?$`) })
	handsDaemonPattern    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9:_-]{1,128}$`) })
)

func (r *HandsRecord) validate() error {
	switch {
	case !filepath.IsAbs(r.Root) || filepath.Clean(r.Root) != r.Root || len(r.Root) > 1024 || strings.Contains(r.Root, ",") || hasControlRune(r.Root):
		return errors.New("root is not an absolute, clean path without commas or control characters")
	case r.Owner == "" || hasControlRune(r.Owner):
		return errors.New("missing owner")
	case r.Access != "files" && r.Access != "none":
		return errors.New("access is not files or none")
	case !filepath.IsAbs(r.EngineSocket) || hasControlRune(r.EngineSocket):
		return errors.New("engine socket is not an absolute path")
	case !handsDaemonPattern().MatchString(r.DaemonID):
		return errors.New("bad daemon id")
	case r.Engine != "" && r.Engine != "docker" && r.Engine != "podman":
		return errors.New("engine is not docker or podman")
	case !handsImagePattern().MatchString(r.Image):
		return errors.New("image is not a sha256: id")
	case !handsContainerPattern().MatchString(r.ContainerID):
		return errors.New("container id is not 64 hex characters")
	case len(r.Generation) > 64 || hasControlRune(r.Generation):
		return errors.New("bad generation")
	case len(r.ImageName) > 512 || hasControlRune(r.ImageName):
		return errors.New("bad image name")
	case !handsPhasePattern().MatchString(r.Phase):
		return errors.New("bad phase")
	case r.Created.IsZero() || r.Updated.IsZero():
		return errors.New("missing created or updated time")
	}
	return nil
}

// EngineName is the record's engine, docker for records written before
// warden told engines apart.
func (r HandsRecord) EngineName() string {
	if r.Engine == "" {
		return "docker"
	}
	return r.Engine
}

func hasControlRune(s string) bool {
	for _, c := range s {
		if c < 0x20 || c == 0x7f {
			return true
		}
	}
	return false
}

// PutHands records (or replaces) a known hands root.
func (tx *Tx) PutHands(r HandsRecord) error { return putRecord(tx, bucketHands, []byte(r.Root), &r) }

// Hands reads one known root; ErrNotFound when warden never set it up.
func (tx *Tx) Hands(root string) (HandsRecord, error) {
	var r HandsRecord
	err := getRecord(tx, bucketHands, []byte(root), root, &r)
	return r, err
}

// HandsRoots lists the known roots by path.
func (tx *Tx) HandsRoots() ([]HandsRecord, error) {
	var out []HandsRecord
	err := tx.bucket(bucketHands).ForEach(func(k, v []byte) error {
		var r HandsRecord
		if err := decodeRecord("hands", string(k), v, &r); err != nil {
			return err
		}
		out = append(out, r)
		return nil
	})
	return out, err
}
