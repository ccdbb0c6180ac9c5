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
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/moby/moby/client"
)

// The runtimes warden speaks to, told apart by the version endpoint's
// components ("Engine" for Docker, "Podman Engine" for Podman).
const (
	RuntimeDocker = "docker"
	RuntimePodman = "podman"
)

// PodmanInitPath is where Podman looks for the binary behind --init
// (containers.conf's init_path default): catatonit, from its own package.
const PodmanInitPath = "/usr/libexec/podman/catatonit"

// Identity is who answers on the socket: what stays the same while the
// runtime holds the same containers, and differs when it does not.
//
// Storage is the graph driver and root from /info ("DRIVER:ROOT"): the
// containers live there. Docker: the daemon ID from /info plus Storage.
// The ID alone is not enough: Docker before 23 derives it from
// /etc/docker/key.json, shared by every dockerd on the host, so a second
// daemon with another data root has the same ID. Podman's compat /info
// makes up a new ID on every call, so for Podman DaemonID is Storage
// hashed ("podman-" and 40 hex digits).
//
// So a dockerd or Podman service restarted on the same storage is the
// same runtime, and one on another storage root is not. Both re-create
// their socket when they restart, so its device and inode are recorded
// (for the operator) but not compared, except for receipts of version 1,
// which recorded no storage: for them the socket still decides, as it did.
type Identity struct {
	Engine     string // RuntimeDocker or RuntimePodman
	DaemonID   string
	Socket     string // "DEV:INODE" of the socket file
	Storage    string // "DRIVER:ROOT" of the runtime's storage
	Version    string // the runtime's own version, e.g. 20.10.24 or 4.3.1
	APIVersion string // the Docker API version warden negotiated
}

// runtimeClient is a Docker-API client bound to one socket.
type runtimeClient struct {
	cli     *client.Client
	socket  string
	id      Identity
	initBin string // the init component Docker reports; empty if none
	cgroup  string // the cgroup version the runtime reports ("1", "2")
}

// Compiled on first use, not at init (each CLI verb paid for them at start).
var (
	storageDriverPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9_.-]{1,32}$`) })
	// storagePattern is Identity.Storage as recorded in setup.json.
	storagePattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9_.-]{1,32}:/`) })
)

// openRuntime checks the socket path, connects, negotiates the API version
// (Debian 12's docker.io and podman both speak 1.41), tells Docker from
// Podman and reads the runtime's identity.
func openRuntime(ctx context.Context, socket string) (*runtimeClient, error) {
	switch {
	case socket == "":
		return nil, errors.New("no --engine-socket: pass the Docker or Podman socket explicitly, e.g. --engine-socket /run/docker.sock or /run/podman/podman.sock (warden never reads DOCKER_HOST)")
	case !filepath.IsAbs(socket) || filepath.Clean(socket) != socket || hasControl(socket):
		return nil, fmt.Errorf("engine socket %q must be an absolute, clean path, e.g. /run/docker.sock", socket)
	case len(socket) > maxSocketPath:
		return nil, fmt.Errorf("engine socket %q is longer than %d bytes and cannot be dialled: use a shorter path (a symlink-free bind or a shorter --exec-root)", socket, maxSocketPath)
	}
	sockID, err := socketIdentity(socket)
	if err != nil {
		return nil, err
	}
	cli, err := client.New(client.WithHost("unix://" + socket))
	if err != nil {
		return nil, fmt.Errorf("engine socket %s: %w", socket, err)
	}
	e := &runtimeClient{cli: cli, socket: socket}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	fail := func(err error) (*runtimeClient, error) {
		cli.Close()
		return nil, err
	}
	if _, err := cli.Ping(pctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		return fail(fmt.Errorf("cannot reach a container engine at %s: %v; check that dockerd (or `podman system service`) is running there and that you may use its socket", socket, err))
	}
	ver, err := cli.ServerVersion(pctx, client.ServerVersionOptions{})
	if err != nil {
		return fail(fmt.Errorf("the engine at %s did not say what it is (version): %v; check its log", socket, err))
	}
	kind := ""
	for _, c := range ver.Components {
		switch c.Name {
		case "Engine":
			kind, e.id.Version = RuntimeDocker, c.Version
		case "Podman Engine":
			kind, e.id.Version = RuntimePodman, c.Version
		case "docker-init":
			e.initBin = "docker-init " + c.Version
		}
	}
	if kind == "" {
		return fail(fmt.Errorf("the engine at %s is neither a Docker Engine nor Podman (its version names no \"Engine\" or \"Podman Engine\" component): warden speaks to those two only", socket))
	}
	e.id.Engine, e.id.Socket, e.id.APIVersion = kind, sockID, cli.ClientVersion()
	e.id.Version = clean(e.id.Version, 64)
	info, err := cli.Info(pctx, client.InfoOptions{})
	if err != nil {
		return fail(fmt.Errorf("the %s at %s did not say who it is (info): %v; check its log", runtimeName(kind), socket, err))
	}
	driver, root := info.Info.Driver, info.Info.DockerRootDir
	if !storageDriverPattern().MatchString(driver) || !filepath.IsAbs(root) || filepath.Clean(root) != root || len(root) > 1024 || hasControl(root) {
		return fail(fmt.Errorf("the %s at %s reports a storage driver or root warden does not recognise, so it cannot tell this engine from another", runtimeName(kind), socket))
	}
	e.id.Storage = driver + ":" + root
	e.cgroup = clean(info.Info.CgroupVersion, 8)
	switch kind {
	case RuntimeDocker:
		if !daemonIDPattern().MatchString(info.Info.ID) {
			return fail(fmt.Errorf("the Docker Engine at %s reports a daemon ID warden does not recognise; is it a Docker Engine?", socket))
		}
		e.id.DaemonID = info.Info.ID
	case RuntimePodman:
		e.id.DaemonID = podmanID(e.id.Storage)
	}
	return e, nil
}

// podmanID is a Podman service's stable daemon ID: its storage, hashed.
func podmanID(storage string) string {
	sum := sha256.Sum256([]byte("warden podman identity\x00" + storage))
	return "podman-" + hex.EncodeToString(sum[:20])
}

func (e *runtimeClient) Close() { e.cli.Close() }

// checkInit says whether the runtime can run the container as warden
// creates it. --init: Docker reports its docker-init component; Podman
// runs catatonit from PodmanInitPath on this host (the socket is a local
// unix socket, so the service is here). Rootless Podman is refused on
// every host: its Docker-compatible API drops the ulimits of every
// container a rootless service creates (Podman's compat create sets them
// only `if !rootless.IsRootless()`, from 4.3 to today), so init would
// have to refuse the container it made, after spending the root; on a
// cgroup v1 host it ignores the pids limit too. Rootless is told by the
// socket's owner: a rootless service's socket belongs to its user.
func (e *runtimeClient) checkInit() (string, error) {
	if e.id.Engine == RuntimePodman {
		if fi, err := os.Stat(e.socket); err == nil && fi.Sys().(*syscall.Stat_t).Uid != 0 {
			return "", rootlessPodman(int(fi.Sys().(*syscall.Stat_t).Uid), e.cgroup)
		}
	}
	return checkInitBinary(e.id.Engine, e.initBin)
}

// errRootlessPodman is the cause of rootlessPodman's refusals.
var errRootlessPodman = errors.New("rootless Podman cannot apply the container's ulimits")

// RootlessPodmanFix is what to do instead of a rootless Podman service.
const RootlessPodmanFix = "run the Podman service as root (`sudo podman system service --time=0 unix:///run/podman/podman.sock`, or `systemctl enable --now podman.socket`) and pass --engine-socket /run/podman/podman.sock, or use a Docker Engine"

// rootlessPodman is the refusal of a rootless Podman service whose
// socket belongs to uid, on a cgroup version cgroup.
func rootlessPodman(uid int, cgroup string) error {
	why := fmt.Sprintf("this Podman service is rootless (its socket belongs to uid %d): Podman's Docker-compatible API, which warden speaks, drops the ulimits (nofile and nproc %d) of every container a rootless service creates", uid, FileLimit)
	if cgroup == "1" {
		why += ", and on this cgroup v1 host it ignores the pids limit too"
	}
	return &FixError{Problem: why + ", so warden would refuse every container it made", Fix: RootlessPodmanFix, Err: errRootlessPodman}
}

func checkInitBinary(kind, dockerInit string) (string, error) {
	switch kind {
	case RuntimePodman:
		fi, err := os.Stat(PodmanInitPath)
		if err != nil {
			return "", fmt.Errorf("the init binary Podman needs, %s, is missing (%v): every hands container runs with --init, so Podman cannot create it; install it with `apt-get install catatonit` (or your distribution's catatonit package)", PodmanInitPath, errText(err))
		}
		if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			return "", fmt.Errorf("the init binary Podman needs, %s, is not an executable file: reinstall catatonit", PodmanInitPath)
		}
		return "catatonit (" + PodmanInitPath + ")", nil
	default:
		if dockerInit == "" {
			return "", errors.New("the Docker Engine reports no docker-init component: every hands container runs with --init; install docker-init (Debian: tini, shipped with docker.io) or set dockerd's --init-path")
		}
		return clean(dockerInit, 80), nil
	}
}

// socketIdentity is "DEV:INODE" of the socket file (symlinks followed: the
// identity is the file the runtime listens on).
func socketIdentity(socket string) (string, error) {
	fi, err := os.Stat(socket)
	if errors.Is(err, fs.ErrNotExist) {
		// Said the same way to the CLI and the console's wizard: no flag
		// names, what to start and what to give instead.
		return "", fmt.Errorf("no engine socket at %s: start the engine that should listen there (`dockerd --host unix://%s` or `podman system service unix://%s`), or give the path a running engine listens on", socket, socket, socket)
	}
	if err != nil {
		return "", fmt.Errorf("engine socket %s: %v", socket, errText(err))
	}
	if fi.Mode()&fs.ModeSocket == 0 {
		return "", fmt.Errorf("engine socket %s is not a socket: give the path the engine listens on (dockerd's --host unix://PATH, or podman system service's unix://PATH)", socket)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return fmt.Sprintf("%d:%d", uint64(st.Dev), st.Ino), nil
}

// checkIdentity refuses a runtime that is not the one the receipt names.
func (e *runtimeClient) checkIdentity(root string, r SetupReceipt) error {
	same := e.id.Engine == r.Engine && e.id.DaemonID == r.DaemonID
	if r.EngineStorage != "" {
		same = same && e.id.Storage == r.EngineStorage
	} else {
		same = same && e.id.Socket == r.SocketIdentity // a version 1 receipt
	}
	if same {
		return nil
	}
	now := fmt.Sprintf("%s %s, storage %s, socket %s", runtimeName(e.id.Engine), e.id.DaemonID, e.id.Storage, e.id.Socket)
	was := fmt.Sprintf("%s %s, storage %s, socket %s", runtimeName(r.Engine), r.DaemonID, orUnrecorded(r.EngineStorage), r.SocketIdentity)
	hint := "An engine restarted on the same storage is recognised; this one is another engine. Inspect the container yourself "
	if r.EngineStorage == "" {
		hint = "This root was set up before warden recorded the engine's storage, so the socket's inode decides: if dockerd was only restarted (it re-creates its socket), inspect the container yourself "
	}
	return fmt.Errorf("the engine at %s is not the one %s was set up with (recorded %s; now %s): warden will not act through it. "+
		hint+"(`%s inspect %s`) and stop it by hand; otherwise point --engine-socket at the engine that holds it",
		e.socket, root, was, now, cliFor(r.Engine, e.socket), ShortID(r.ContainerID))
}

func orUnrecorded(s string) string {
	if s == "" {
		return "(not recorded)"
	}
	return s
}

// runtimeName is how messages name a runtime kind.
func runtimeName(kind string) string {
	if kind == RuntimePodman {
		return "Podman service"
	}
	return "Docker Engine"
}

// cliFor is the command line an operator uses to reach the runtime by hand.
func cliFor(kind, socket string) string {
	if kind == RuntimePodman {
		return "podman --url unix://" + socket
	}
	return "docker -H unix://" + socket
}

// clean keeps a runtime-reported string printable and short: the runtime
// is not trusted to keep escapes out of a terminal.
func clean(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
	if len(s) > n {
		s = s[:n]
	}
	return s
}

// RuntimeInfo is what warden knows about the runtime on a socket before it
// creates anything: doctor and the init wizard show it.
type RuntimeInfo struct {
	Socket     string `json:"socket"`
	Engine     string `json:"engine"`     // docker or podman
	Version    string `json:"version"`    // the runtime's version
	APIVersion string `json:"apiVersion"` // the negotiated Docker API version
	DaemonID   string `json:"daemonId"`   // as setup.json will record it
	Storage    string `json:"storage,omitempty"`
	Init       string `json:"init,omitempty"`      // the init binary, when found
	InitError  string `json:"initError,omitempty"` // why --init cannot work
	Inodes     string `json:"workspaceInodes"`     // what the workspace's inode bound will be
	Rootless   bool   `json:"rootless,omitempty"`  // the socket belongs to a non-root user
	SocketUID  int    `json:"socketUid"`           // owner of the socket file
	Label      string `json:"label"`               // e.g. "Podman 4.3.1 (API 1.41)"
	Problem    string `json:"problem,omitempty"`   // set when init would fail here
	Fix        string `json:"fix,omitempty"`       // what to do about Problem
}

// ProbeRuntime dials the runtime at socket and reports which runtime it is,
// its API version and whether its init binary exists. It changes nothing.
// A runtime that cannot be reached is an error; a missing init binary is
// reported in Problem (init refuses such a runtime before it creates the
// root).
func ProbeRuntime(ctx context.Context, socket string) (RuntimeInfo, error) {
	eng, err := openRuntime(ctx, socket)
	if err != nil {
		return RuntimeInfo{Socket: socket}, err
	}
	defer eng.Close()
	return eng.describe(), nil
}

func (e *runtimeClient) describe() RuntimeInfo {
	in := RuntimeInfo{Socket: e.socket, Engine: e.id.Engine, Version: e.id.Version, APIVersion: e.id.APIVersion, DaemonID: e.id.DaemonID,
		Storage: e.id.Storage, Inodes: WorkspaceInodes}
	if e.id.Engine == RuntimePodman {
		in.Inodes = InodesUnboundedPodman + " unless this Podman accepts nr_inodes"
	}
	if fi, err := os.Stat(e.socket); err == nil {
		in.SocketUID = int(fi.Sys().(*syscall.Stat_t).Uid)
		in.Rootless = in.SocketUID != 0
	}
	name := "Docker"
	if e.id.Engine == RuntimePodman {
		name = "Podman"
	}
	in.Label = fmt.Sprintf("%s %s (API %s)", name, e.id.Version, e.id.APIVersion)
	if bin, err := e.checkInit(); err != nil {
		in.InitError, in.Problem = err.Error(), err.Error()
		in.Fix = "install catatonit"
		var fe *FixError
		switch {
		case errors.As(err, &fe):
			in.InitError, in.Problem, in.Fix = fe.Problem, fe.Problem, fe.Fix
		case e.id.Engine == RuntimeDocker:
			in.Fix = "install docker-init (tini) or set dockerd's --init-path"
		}
	} else {
		in.Init = bin
	}
	return in
}
