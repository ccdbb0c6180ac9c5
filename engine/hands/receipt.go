package hands

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"time"

	"github.com/wardenhq/warden/storage"
)

// Phase is where a hands root is in its life (docs/operating.md). It moves
// prepared -> creating -> running -> ready (or failed), then finished, and
// is written BEFORE each effect so a crash always leaves the last intent.
type Phase string

// The six phases.
const (
	PhasePrepared Phase = "prepared"
	PhaseCreating Phase = "creating"
	PhaseRunning  Phase = "running"
	PhaseReady    Phase = "ready"
	PhaseFailed   Phase = "failed"
	PhaseFinished Phase = "finished"
)

func (p Phase) valid() bool {
	switch p {
	case PhasePrepared, PhaseCreating, PhaseRunning, PhaseReady, PhaseFailed, PhaseFinished:
		return true
	}
	return false
}

// ReceiptVersion is the setup.json schema this build writes. It also
// reads version 1 (before Podman): see upgradeV1.
const ReceiptVersion = 2

// Workspace inode bounds as setup.json records them: Docker bounds the
// tmpfs's inodes; Podman 4.3 refuses the nr_inodes option, so there the
// workspace is bounded by size only and the receipt says so.
const (
	WorkspaceInodes       = "32768"
	InodesUnboundedPodman = "unbounded (podman)"
)

// MaxReceiptSize bounds setup.json; a real one is well under 2 KiB.
const MaxReceiptSize = 16 << 10

// File names under a hands root.
const (
	ReceiptFile  = "setup.json"                  // under evidence/
	FailureFile  = "initialization-failure.json" // under evidence/
	HandsFile    = "hands.json"                  // at the root
	EvidenceDir  = "evidence"
	WorkspaceDir = "workspace"
)

// SetupReceipt is evidence/setup.json: everything needed to finish or
// reconcile the root without trusting anything else.
type SetupReceipt struct {
	Version        int    `json:"version"`
	Owner          string `json:"owner"`
	Engine         string `json:"engine"` // docker or podman
	EngineSocket   string `json:"engineSocket"`
	SocketIdentity string `json:"socketIdentity"` // "DEV:INODE" of the socket file
	DaemonID       string `json:"daemonId"`       // Podman: "podman-" + hash of EngineStorage
	EngineStorage  string `json:"engineStorage"`  // "DRIVER:ROOT"; empty only in receipts of version 1
	Inodes         string `json:"inodes"`         // the workspace's inode bound; empty before creation
	Image          string `json:"image"`          // sha256:..., empty before resolution
	ContainerID    string `json:"containerId"`    // empty before creation
	Generation     string `json:"generation"`     // State.StartedAt, empty before start
	Phase          Phase  `json:"phase"`
}

// receiptKeys is the exact key set of setup.json: every one must be present.
var receiptKeys = []string{"version", "owner", "engine", "engineSocket", "socketIdentity", "daemonId", "engineStorage", "inodes", "image", "containerId", "generation", "phase"}

// receiptKeysV1 is version 1's key set: Docker only, inodes always bounded.
var receiptKeysV1 = []string{"version", "owner", "engineSocket", "socketIdentity", "daemonId", "image", "containerId", "generation", "phase"}

// Compiled on first use, not at init (each CLI verb paid for them at start).
var (
	containerIDPattern    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{64}$`) })
	daemonIDPattern       = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9:_-]{1,128}$`) })
	imageIDPattern        = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^sha256:[0-9a-f]{64}$`) })
	socketIdentityPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9]{1,20}:[0-9]{1,20}$`) })
)

// maxSocketPath is sun_path's limit: a longer path cannot be dialled.
const maxSocketPath = 107

func (r *SetupReceipt) validate() error {
	switch {
	case r.Version != ReceiptVersion:
		return fmt.Errorf("version is not %d", ReceiptVersion)
	case r.Owner == "" || len(r.Owner) > 256 || hasControl(r.Owner):
		return errors.New("owner is empty, too long or has control characters")
	case !filepath.IsAbs(r.EngineSocket) || filepath.Clean(r.EngineSocket) != r.EngineSocket || len(r.EngineSocket) > maxSocketPath || hasControl(r.EngineSocket):
		return errors.New("engineSocket is not an absolute, clean socket path")
	case !socketIdentityPattern().MatchString(r.SocketIdentity):
		return errors.New("socketIdentity does not match DEV:INODE")
	case !daemonIDPattern().MatchString(r.DaemonID):
		return errors.New("daemonId does not match the Docker daemon ID format")
	case r.Engine != RuntimeDocker && r.Engine != RuntimePodman:
		return errors.New("engine is not docker or podman")
	case r.EngineStorage != "" && (!storagePattern().MatchString(r.EngineStorage) || len(r.EngineStorage) > 1100 || hasControl(r.EngineStorage)):
		return errors.New("engineStorage is not DRIVER:/ROOT")
	case r.Engine == RuntimeDocker && r.Inodes != "" && r.Inodes != WorkspaceInodes:
		return errors.New("a docker receipt with unbounded inodes")
	case r.Engine == RuntimePodman && (r.EngineStorage == "" || podmanID(r.EngineStorage) != r.DaemonID):
		return errors.New("a podman receipt whose engineStorage is missing or does not match its daemonId")
	case r.Inodes != "" && r.Inodes != WorkspaceInodes && r.Inodes != InodesUnboundedPodman:
		return errors.New("inodes is not 32768 or \"unbounded (podman)\"")
	case r.ContainerID != "" && r.Inodes == "":
		return errors.New("containerId recorded without the workspace's inode bound")
	case r.Image != "" && !imageIDPattern().MatchString(r.Image):
		return errors.New("image is not a sha256: image id")
	case r.ContainerID != "" && !containerIDPattern().MatchString(r.ContainerID):
		return errors.New("containerId is not 64 hex characters")
	case r.Generation != "" && !validGeneration(r.Generation):
		return errors.New("generation is not an RFC 3339 start time")
	case !r.Phase.valid():
		return errors.New("phase is not one of prepared, creating, running, ready, failed, finished")
	}
	// The phases promise what was recorded before them.
	switch r.Phase {
	case PhasePrepared:
		if r.ContainerID != "" || r.Generation != "" {
			return errors.New("phase prepared with a container recorded")
		}
	case PhaseCreating:
		if r.Image == "" || r.Generation != "" {
			return errors.New("phase creating without an image or with a generation")
		}
	case PhaseRunning, PhaseReady:
		if r.Image == "" || r.ContainerID == "" || r.Generation == "" {
			return fmt.Errorf("phase %s without image, containerId and generation", r.Phase)
		}
	}
	if r.ContainerID != "" && r.Image == "" {
		return errors.New("containerId recorded without an image")
	}
	if r.Generation != "" && r.ContainerID == "" {
		return errors.New("generation recorded without a containerId")
	}
	return nil
}

func validGeneration(s string) bool {
	if len(s) > 64 {
		return false
	}
	_, err := time.Parse(time.RFC3339Nano, s)
	return err == nil
}

func hasControl(s string) bool {
	for _, c := range s {
		if c < 0x20 || c == 0x7f {
			return true
		}
	}
	return false
}

// ReceiptError says setup.json cannot be trusted. It never carries the
// file's content: only what is wrong and what to do.
type ReceiptError struct {
	Path    string
	Problem string
	Fix     string
}

func (e *ReceiptError) Error() string {
	return fmt.Sprintf("hands receipt %s %s; %s", e.Path, e.Problem, e.Fix)
}

const receiptFix = "warden will not act on it: restore it from your backup, or inspect the container yourself (`docker inspect`) and deal with it by hand"

// ReadReceipt reads ROOT/evidence/setup.json strictly: at most 16 KiB, a
// regular file (not a symlink) with one link, owned by the current user,
// mode 0600, exactly the schema (every key, nothing else, version 1) and
// ids that match their patterns.
func ReadReceipt(root string) (SetupReceipt, error) {
	var r SetupReceipt
	if !filepath.IsAbs(root) || filepath.Clean(root) != root {
		return r, fmt.Errorf("hands root %q must be an absolute, clean path", root)
	}
	dir := filepath.Join(root, EvidenceDir)
	path := filepath.Join(dir, ReceiptFile)
	bad := func(problem string) (SetupReceipt, error) {
		return SetupReceipt{}, &ReceiptError{Path: path, Problem: problem, Fix: receiptFix}
	}
	di, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return r, fmt.Errorf("%s is not a hands root (no %s/): check the path, or set one up with `warden hands init`", root, EvidenceDir)
	}
	if err != nil {
		return r, err
	}
	if !di.IsDir() || int(di.Sys().(*syscall.Stat_t).Uid) != os.Geteuid() {
		return bad("lives in an evidence dir that is not a real directory owned by you")
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return bad("is a symlink")
		}
		if errors.Is(err, fs.ErrNotExist) {
			return r, fmt.Errorf("%s has no %s: it was never prepared; remove the root and run `warden hands init` again", root, path)
		}
		return r, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return r, err
	}
	st := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.Mode().IsRegular():
		return bad("is not a regular file")
	case st.Nlink != 1:
		return bad(fmt.Sprintf("has %d hard links (want 1)", st.Nlink))
	case int(st.Uid) != os.Geteuid():
		return bad(fmt.Sprintf("is owned by uid %d, not by you (uid %d)", st.Uid, os.Geteuid()))
	case fi.Mode().Perm() != 0o600:
		return bad(fmt.Sprintf("has mode %04o (want 0600)", fi.Mode().Perm()))
	case fi.Size() > MaxReceiptSize:
		return bad(fmt.Sprintf("is %d bytes (at most %d)", fi.Size(), MaxReceiptSize))
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxReceiptSize+1))
	if err != nil {
		return r, err
	}
	if len(data) > MaxReceiptSize {
		return bad(fmt.Sprintf("is larger than %d bytes", MaxReceiptSize))
	}
	if problem := decodeReceipt(data, &r); problem != "" {
		return bad(problem)
	}
	return r, nil
}

// decodeReceipt decodes strictly and names only what is wrong, never the
// bytes it found, so a hostile receipt cannot smuggle text into messages.
func decodeReceipt(data []byte, r *SetupReceipt) string {
	var keys map[string]json.RawMessage
	if len(bytes.TrimSpace(data)) == 0 || bytes.TrimSpace(data)[0] != '{' || json.Unmarshal(data, &keys) != nil {
		return "is not a single JSON object"
	}
	want := receiptKeys
	if v, ok := keys["version"]; ok && string(bytes.TrimSpace(v)) == "1" {
		want = receiptKeysV1
	}
	if len(keys) != len(want) {
		for _, k := range want {
			if _, ok := keys[k]; !ok {
				return fmt.Sprintf("is missing the key %q", k)
			}
		}
		return "has keys outside the setup schema"
	}
	for _, k := range want {
		if _, ok := keys[k]; !ok {
			return "has keys outside the setup schema"
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(r); err != nil {
		// Duplicate keys with different case land here too.
		return "does not match the setup schema (a value has the wrong type or a key is unknown)"
	}
	if _, err := dec.Token(); err != io.EOF {
		return "has data after the JSON object"
	}
	if r.Version == 1 {
		upgradeV1(r)
	}
	if err := r.validate(); err != nil {
		return "does not validate: " + err.Error()
	}
	return ""
}

// upgradeV1 is the schema step from version 1: every version 1 receipt
// was written against a Docker Engine, whose workspace tmpfs bounded its
// inodes. The next write stores it as version 2.
func upgradeV1(r *SetupReceipt) {
	r.Version, r.Engine = ReceiptVersion, RuntimeDocker
	if r.ContainerID != "" {
		r.Inodes = WorkspaceInodes
	}
}

// writeReceipt validates and writes setup.json atomically at 0600.
func writeReceipt(root string, r SetupReceipt) error {
	if err := r.validate(); err != nil {
		return fmt.Errorf("refusing to write an invalid hands receipt: %w", err)
	}
	return writeJSON(filepath.Join(root, EvidenceDir, ReceiptFile), r)
}

// writeJSON writes v as indented JSON through temp+fsync+rename+fsync dir.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return storage.WriteFileAtomic(path, append(b, '\n'), 0o600)
}

// FailureEvidence is evidence/initialization-failure.json.
type FailureEvidence struct {
	Stopped                bool `json:"stopped"`
	ReconciliationRequired bool `json:"reconciliationRequired"`
}

// readFailure reads initialization-failure.json with the same file rules
// as the receipt; ok is false when there is none.
func readFailure(root string) (ev FailureEvidence, ok bool, err error) {
	path := filepath.Join(root, EvidenceDir, FailureFile)
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return ev, false, nil
	}
	if err != nil {
		return ev, false, fmt.Errorf("%s: cannot open: %v", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ev, false, err
	}
	st := fi.Sys().(*syscall.Stat_t)
	if !fi.Mode().IsRegular() || st.Nlink != 1 || int(st.Uid) != os.Geteuid() || fi.Mode().Perm() != 0o600 || fi.Size() > 1024 {
		return ev, false, fmt.Errorf("%s is not a private regular file of yours (one link, mode 0600, at most 1 KiB): inspect it by hand", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, 1025))
	if err != nil {
		return ev, false, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ev); err != nil {
		return ev, false, fmt.Errorf("%s does not match {stopped, reconciliationRequired}: inspect it by hand", path)
	}
	return ev, true, nil
}

// HandsInfo is ROOT/hands.json: what an agent-side tool needs to find the
// container (written at phase running).
type HandsInfo struct {
	Root         string `json:"root"`
	ContainerID  string `json:"containerId"`
	Image        string `json:"image"`
	Access       string `json:"access"`
	EngineSocket string `json:"engineSocket"`
}

// ReadInfo reads ROOT/hands.json with the same file rules as the receipt.
func ReadInfo(root string) (HandsInfo, error) {
	var info HandsInfo
	path := filepath.Join(root, HandsFile)
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return info, fmt.Errorf("%s: %v (it is written at phase running)", path, errText(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return info, err
	}
	st := fi.Sys().(*syscall.Stat_t)
	if !fi.Mode().IsRegular() || st.Nlink != 1 || int(st.Uid) != os.Geteuid() || fi.Mode().Perm() != 0o600 || fi.Size() > MaxReceiptSize {
		return info, fmt.Errorf("%s is not a private regular file of yours (one link, mode 0600, at most 16 KiB): inspect it by hand", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxReceiptSize+1))
	if err != nil {
		return info, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&info); err != nil || info.Root != root || (info.Access != AccessFiles && info.Access != AccessNone) {
		return HandsInfo{}, fmt.Errorf("%s does not match {root, containerId, image, access, engineSocket} for this root: inspect it by hand", path)
	}
	return info, nil
}
