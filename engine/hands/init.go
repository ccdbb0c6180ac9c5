package hands

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// Access modes of --access: whether the initial policy lets effects read
// and write the workspace.
const (
	AccessFiles = "files"
	AccessNone  = "none"
)

// ContainerUser is the uid:gid of the container and of every exec in it.
const ContainerUser = "10002:10002"

// WorkspaceTmpfs is the workspace mount: 128 MiB, 32768 inodes.
const WorkspaceTmpfs = "size=128m,nr_inodes=" + WorkspaceInodes + ",mode=1777"

// WorkspaceTmpfsSizeOnly is the workspace mount on a runtime that refuses
// nr_inodes (Podman 4.3): 128 MiB, inodes bounded by the size only.
const WorkspaceTmpfsSizeOnly = "size=128m,mode=1777"

// WorkspaceBytes is the workspace tmpfs's size: 128 MiB.
const WorkspaceBytes = 128 << 20

// FileLimit bounds open files (RLIMIT_NOFILE) and processes of the
// container's uid (RLIMIT_NPROC), soft and hard. Set explicitly: Podman
// otherwise asks for 1048576 of each, which a runtime without
// CAP_SYS_RESOURCE cannot grant, and Docker would pass on dockerd's own.
const FileLimit = 4096

// PidsLimit bounds the processes in the container.
const PidsLimit = 256

// idleLoop keeps the container alive doing nothing; TERM ends it at once
// (the init process forwards it), so stop never waits for its timeout.
const idleLoop = `trap "exit 0" TERM; while :; do sleep 3600 & wait; done`

// PauseEnv is a TEST-ONLY hook: when set to a step name, Init sleeps after
// that step (until its context ends, at most a minute) so tests can signal
// or kill warden at a known point. Nothing else reads it.
const PauseEnv = "WARDEN_HANDS_TEST_PAUSE_AFTER"

// InitOptions configure Init.
type InitOptions struct {
	Root         string
	EngineSocket string
	Image        string // a name or id of a LOCAL image; never pulled
	Access       string // AccessFiles or AccessNone
	Owner        string // who sets it up, e.g. "local:root"
	// Progress, when set, is told each step as it completes.
	Progress func(step, detail string) `json:"-"`
	// OnPhase, when set, is called after each phase is durably written to
	// setup.json (warden's engine records a receipt and the known-root record).
	// An error fails the init, except at phase failed.
	OnPhase func(SetupReceipt) error `json:"-"`
	// BeforeReady, when set, runs after phase running and before ready:
	// warden's engine sets the root's initial policy there.
	BeforeReady func(SetupReceipt) error `json:"-"`
}

// InitResult is a root that reached ready.
type InitResult struct {
	Root         string `json:"root"`
	Phase        Phase  `json:"phase"`
	Owner        string `json:"owner"`
	Access       string `json:"access"`
	EngineSocket string `json:"engineSocket"`
	Engine       string `json:"engine"` // docker or podman
	DaemonID     string `json:"daemonId"`
	Inodes       string `json:"inodes"` // the workspace's inode bound
	Image        string `json:"image"`
	ImageName    string `json:"imageName"`
	ContainerID  string `json:"containerId"`
	Generation   string `json:"generation"`
}

// InitFailedError is an init that failed after it wrote its receipt: the
// evidence under Root says what was left behind.
type InitFailedError struct {
	Root     string
	Cause    error
	Evidence FailureEvidence
}

func (e *InitFailedError) Error() string {
	return fmt.Sprintf("initialization failed; recovery evidence retained under %s: %v", e.Root, e.Cause)
}

func (e *InitFailedError) Unwrap() error { return e.Cause }

// Init sets up a new hands root and its container, step by step as
// docs/operating.md lists them. Before the receipt exists a failure touches
// nothing (a root that already existed is never touched); after it, a
// failure or cancellation stops the container only if inspection shows our
// owner label, writes phase failed and initialization-failure.json, and
// returns an *InitFailedError.
func Init(ctx context.Context, opts InitOptions) (InitResult, error) {
	switch {
	case opts.Access != AccessFiles && opts.Access != AccessNone:
		return InitResult{}, fmt.Errorf("--access %q: want files (the workspace may be read and written) or none", opts.Access)
	case opts.Image == "" || len(opts.Image) > 512 || hasControl(opts.Image):
		return InitResult{}, errors.New("--image: name a local image, e.g. --image busybox:1.36 (warden never pulls)")
	case opts.Owner == "" || len(opts.Owner) > 256 || hasControl(opts.Owner):
		return InitResult{}, errors.New("init needs an owner without control characters, e.g. local:alice")
	}
	if err := ValidateRoot(opts.Root); err != nil {
		return InitResult{}, err
	}
	r := &initRun{opts: opts, root: opts.Root, ctx: ctx}
	r.progress(StepRoot, opts.Root+" is new and its ancestors are safe")

	eng, err := openRuntime(ctx, opts.EngineSocket)
	if err != nil {
		return InitResult{}, err
	}
	defer eng.Close()
	r.eng = eng
	// Before the layout: a runtime that cannot create the container must
	// not cost the operator a root.
	initBin, err := eng.checkInit()
	if err != nil {
		return InitResult{}, &FixError{Problem: fmt.Sprintf("the %s at %s cannot run the container: %v", runtimeName(eng.id.Engine), opts.EngineSocket, err),
			Fix: "nothing was created, so run the same init again once that is fixed", Err: err}
	}
	detail := fmt.Sprintf("%s %s, daemon %s on %s (API %s), init %s", runtimeName(eng.id.Engine), eng.id.Version, eng.id.DaemonID, opts.EngineSocket, eng.id.APIVersion, initBin)
	if eng.id.Storage != "" {
		detail += ", storage " + eng.id.Storage
	}
	r.progress(StepRuntime, detail)
	if err := r.interrupted(); err != nil {
		return InitResult{}, err
	}
	// Before the layout too: a missing image would otherwise burn the root.
	img, err := eng.cli.ImageInspect(ctx, opts.Image)
	if cerrdefs.IsNotFound(err) {
		return InitResult{}, r.missingImage()
	}
	// And an image whose directories keep the container's user from its
	// init: the start would fail only after the root is spent.
	if err == nil && imageIDPattern().MatchString(img.ID) {
		if err := eng.checkReach(ctx, img.ID, opts.Root); err != nil {
			return InitResult{}, err
		}
		if err := r.interrupted(); err != nil {
			return InitResult{}, err
		}
	}

	if err := makeLayout(opts.Root); err != nil {
		return InitResult{}, err
	}
	r.progress(StepLayout, "state/ agent/ workspace/ evidence/ docker-cli/ (0700), resources/ (0755)")
	lease, err := takeLease(opts.Root)
	if err != nil {
		return InitResult{}, err
	}
	defer lease.Close()
	r.progress(StepLease, "holding evidence/")

	r.rec = SetupReceipt{Version: ReceiptVersion, Owner: opts.Owner, Engine: eng.id.Engine, EngineSocket: opts.EngineSocket,
		SocketIdentity: eng.id.Socket, DaemonID: eng.id.DaemonID, EngineStorage: eng.id.Storage, Phase: PhasePrepared}
	if err := writeReceipt(r.root, r.rec); err != nil {
		// Not even the receipt: nothing outside the new root exists.
		return InitResult{}, &FixError{Problem: fmt.Sprintf("could not write the receipt under %s: %v", opts.Root, err), Fix: "remove " + opts.Root + " and try again", Err: err}
	}
	if err := r.steps(ctx); err != nil {
		return InitResult{}, r.fail(ctx, err)
	}
	return InitResult{Root: opts.Root, Phase: PhaseReady, Owner: opts.Owner, Access: opts.Access, EngineSocket: opts.EngineSocket,
		Engine: r.rec.Engine, DaemonID: r.rec.DaemonID, Inodes: r.rec.Inodes, Image: r.rec.Image, ImageName: opts.Image, ContainerID: r.rec.ContainerID, Generation: r.rec.Generation}, nil
}

type initRun struct {
	opts     InitOptions
	root     string
	eng      *runtimeClient
	rec      SetupReceipt
	creating bool            // phase creating was written: a container may exist
	ctx      context.Context // Init's: the pause hook and the interruption checks watch it
}

func (r *initRun) progress(step, detail string) {
	if r.opts.Progress != nil {
		r.opts.Progress(step, detail)
	}
	if os.Getenv(PauseEnv) == step {
		select {
		case <-r.ctx.Done():
		case <-time.After(time.Minute):
		}
	}
}

// interrupted turns a cancelled context into a cause that says so.
func (r *initRun) interrupted() error {
	if r.ctx.Err() == nil {
		return nil
	}
	return fmt.Errorf("interrupted: %v", context.Cause(r.ctx))
}

// phase writes the receipt at p, then tells warden's engine (OnPhase).
func (r *initRun) phase(p Phase) error {
	r.rec.Phase = p
	if err := writeReceipt(r.root, r.rec); err != nil {
		return err
	}
	return r.notify()
}

// notify hands the receipt as written to OnPhase.
func (r *initRun) notify() error {
	p := r.rec.Phase
	if r.opts.OnPhase != nil {
		if err := r.opts.OnPhase(r.rec); err != nil {
			return fmt.Errorf("recording phase %s: %w", p, err)
		}
	}
	return nil
}

// steps runs everything after prepared; any error goes to fail.
func (r *initRun) steps(ctx context.Context) error {
	check := func(err error) error {
		if ierr := r.interrupted(); ierr != nil {
			return ierr
		}
		return err
	}
	if err := r.notify(); err != nil { // the receipt exists: from here on, failures leave evidence
		return err
	}
	r.progress(StepPrepared, "evidence/setup.json")
	if err := check(nil); err != nil {
		return err
	}
	img, err := r.eng.cli.ImageInspect(ctx, r.opts.Image)
	if cerrdefs.IsNotFound(err) {
		return r.missingImage()
	}
	if err != nil {
		return check(fmt.Errorf("resolve image %q: %w", r.opts.Image, err))
	}
	if !imageIDPattern().MatchString(img.ID) {
		return fmt.Errorf("image %q resolved to an id that is not sha256:<64 hex>; warden pins images by that id only", r.opts.Image)
	}
	r.rec.Image = img.ID
	r.progress(StepImage, r.opts.Image+" is "+img.ID)

	if err := check(nil); err != nil {
		return err
	}
	r.creating = true
	if err := r.phase(PhaseCreating); err != nil {
		return err
	}
	r.progress(StepCreating, "phase creating written")
	id, inodes, err := r.create(ctx)
	if err != nil {
		return check(err)
	}
	r.rec.ContainerID, r.rec.Inodes = id, inodes
	if err := r.phase(PhaseCreating); err != nil { // record the id before anything else
		return err
	}
	r.progress(StepCreated, id)
	if err := check(nil); err != nil {
		return err
	}

	o, c0, err := r.eng.inspect(ctx, id, r.opts.Owner, r.root)
	if err != nil {
		return check(err)
	}
	if o.Missing || !o.LabelOK {
		return fmt.Errorf("container %s does not carry the owner label warden set (or is gone): refusing to start it", ShortID(id))
	}
	if bad := VerifyOptions(r.eng.id.Engine, c0, r.rec.Image, inodes); len(bad) > 0 {
		return fmt.Errorf("container %s was not created as asked (%s): refusing to start it", ShortID(id), strings.Join(bad, "; "))
	}
	r.progress(StepOptions, "inspected: "+OptionsSummary(inodes))
	r.progress(StepLabel, LabelOwner+" matches")
	if err := check(nil); err != nil {
		return err
	}
	if _, err := r.eng.cli.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		err = fmt.Errorf("start container %s: %w", ShortID(id), err)
		// What checkReach looks for before the root exists, in case the
		// runtime could not show it there.
		if dir, bin := initDir(r.eng.id.Engine); strings.Contains(err.Error(), "stat "+bin+": permission denied") {
			err = &FixError{Problem: err.Error() + " (the container's user, uid 10002, cannot search / or " + dir + " in this image)",
				Fix: "give the image's / and " + dir + " mode 0755, then init a new root", Err: err}
		}
		return check(err)
	}
	o, c, err := r.eng.inspect(ctx, id, r.opts.Owner, r.root)
	if err != nil {
		return check(err)
	}
	if !o.LabelOK {
		return fmt.Errorf("container %s lost its owner label after start", ShortID(id))
	}
	if !o.Running || !validGeneration(o.StartedAt) {
		code := 0
		if c.State != nil {
			code = c.State.ExitCode
		}
		return fmt.Errorf("container %s is %s right after start (exit code %d): the image must provide sh and sleep (a busybox image works)", ShortID(id), o.State, code)
	}
	r.rec.Generation = o.StartedAt
	r.progress(StepStarted, "generation "+o.StartedAt)
	if err := check(nil); err != nil {
		return err
	}

	if err := r.phase(PhaseRunning); err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(r.root, HandsFile), HandsInfo{Root: r.root, ContainerID: id, Image: r.rec.Image,
		Access: r.opts.Access, EngineSocket: r.opts.EngineSocket}); err != nil {
		return err
	}
	r.progress(StepRunning, "hands.json written")
	if err := check(nil); err != nil {
		return err
	}
	if r.opts.BeforeReady != nil {
		if err := r.opts.BeforeReady(r.rec); err != nil {
			return fmt.Errorf("initial policy: %w", err)
		}
		r.progress(StepPolicy, fmt.Sprintf("workspace read/write %v, execute false, network false", r.opts.Access == AccessFiles))
	}
	if err := check(nil); err != nil {
		return err
	}
	if err := r.phase(PhaseReady); err != nil {
		return err
	}
	r.progress(StepReady, "container "+ShortID(id)+" is ready")
	return nil
}

// create makes the container with every option of docs/operating.md, the
// image pinned by id, and says what bounds the workspace's inodes. On
// Podman, a refusal of nr_inodes (Podman 4.3: "unknown mount option")
// creates the container again with the size bound only: nothing was
// created by the refused call.
func (r *initRun) create(ctx context.Context) (id, inodes string, err error) {
	id, err = r.createWith(ctx, WorkspaceTmpfs)
	inodes = WorkspaceInodes
	if err != nil && r.eng.id.Engine == RuntimePodman && strings.Contains(err.Error(), `unknown mount option "nr_inodes`) {
		r.progress(StepInodes, "Podman refuses nr_inodes on a tmpfs: the workspace is bounded by its 128 MiB only ("+InodesUnboundedPodman+")")
		id, err = r.createWith(ctx, WorkspaceTmpfsSizeOnly)
		inodes = InodesUnboundedPodman
	}
	return id, inodes, err
}

func (r *initRun) createWith(ctx context.Context, tmpfs string) (string, error) {
	useInit := true
	pids := int64(PidsLimit)
	res, err := r.eng.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config: &container.Config{
			Image:      r.rec.Image,
			User:       ContainerUser,
			Entrypoint: []string{"sh", "-c", idleLoop},
			Labels:     map[string]string{LabelOwner: OwnerLabel(r.opts.Owner, r.root), LabelRoot: r.root},
		},
		HostConfig: &container.HostConfig{
			NetworkMode:    "none",
			ReadonlyRootfs: true,
			CapDrop:        []string{"ALL"},
			SecurityOpt:    []string{"no-new-privileges"},
			Tmpfs:          map[string]string{"/workspace": tmpfs},
			Init:           &useInit,
			Resources: container.Resources{PidsLimit: &pids, Ulimits: []*container.Ulimit{
				{Name: "nofile", Soft: FileLimit, Hard: FileLimit}, {Name: "nproc", Soft: FileLimit, Hard: FileLimit}}},
			RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyDisabled},
		},
	})
	if err != nil {
		return "", fmt.Errorf("create container: %w", err)
	}
	if !containerIDPattern().MatchString(res.ID) {
		return "", fmt.Errorf("the engine returned a container id warden does not recognise")
	}
	return res.ID, nil
}

// missingImage says the image is not there, with the runtime's own command.
func (r *initRun) missingImage() error {
	cli := cliFor(r.eng.id.Engine, r.opts.EngineSocket)
	return &FixError{Problem: fmt.Sprintf("image %q is not on the engine at %s and warden never pulls", r.opts.Image, r.opts.EngineSocket),
		Fix: fmt.Sprintf("load it first (`%s pull %s`, or `%s load`), then run the same init again", cli, r.opts.Image, cli)}
}

// fail is the failure path: stop what is ours, write the evidence, and
// say where it is. It runs on a fresh context: the cancelled one cannot
// stop anything.
func (r *initRun) fail(ctx context.Context, cause error) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	var ev FailureEvidence
	var notes []string
	var ids []string
	switch {
	case r.rec.ContainerID != "":
		ids = []string{r.rec.ContainerID}
	case r.creating:
		// The create may have happened without its id reaching us.
		found, err := r.eng.labelled(cctx, r.opts.Owner, r.root)
		if err != nil {
			ev.ReconciliationRequired = true
			notes = append(notes, "could not list containers: "+err.Error())
		}
		ids = found
		if len(found) == 1 {
			r.rec.ContainerID = found[0]
		} else if len(found) > 1 {
			ev.ReconciliationRequired = true
			notes = append(notes, fmt.Sprintf("%d containers carry this root's owner label", len(found)))
		}
	}
	for _, id := range ids {
		stopped, err := r.eng.stopOwned(cctx, id, r.opts.Owner, r.root)
		if err != nil {
			ev.ReconciliationRequired = true
			notes = append(notes, err.Error())
			continue
		}
		if stopped {
			ev.Stopped = true
			if r.opts.Progress != nil {
				r.opts.Progress(StepStopped, id)
			}
		}
	}
	r.rec.Phase = PhaseFailed
	if err := writeReceipt(r.root, r.rec); err != nil {
		ev.ReconciliationRequired = true
		notes = append(notes, "could not write phase failed: "+err.Error())
	}
	if err := writeJSON(filepath.Join(r.root, EvidenceDir, FailureFile), ev); err != nil {
		notes = append(notes, "could not write "+FailureFile+": "+err.Error())
	}
	if r.opts.OnPhase != nil {
		if err := r.opts.OnPhase(r.rec); err != nil {
			notes = append(notes, "could not record phase failed: "+err.Error())
		}
	}
	if r.opts.Progress != nil {
		r.opts.Progress(StepFailed, cause.Error())
	}
	if len(notes) > 0 {
		cause = fmt.Errorf("%w (also: %s)", cause, strings.Join(notes, "; "))
	}
	if ev.ReconciliationRequired {
		cause = &FixError{Problem: cause.Error() + "; reconciliation required", Fix: "see `warden hands status --root " + r.root + "`", Err: cause}
	}
	return &InitFailedError{Root: r.root, Cause: cause, Evidence: ev}
}

// makeLayout creates the root and its dirs with exact modes. Mkdir (not
// MkdirAll) on the root: if anything appeared there since validation it
// fails and nothing is touched.
func makeLayout(root string) error {
	if err := os.Mkdir(root, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return &RootError{Root: root, Problem: "already exists", Fix: "warden never adopts an existing directory: pass a path that does not exist yet"}
		}
		return fmt.Errorf("create hands root %s: %w", root, err)
	}
	dirs := []struct {
		name string
		mode fs.FileMode
	}{{"", 0o755}, {"state", 0o700}, {"agent", 0o700}, {WorkspaceDir, 0o700}, {EvidenceDir, 0o700}, {"docker-cli", 0o700}, {"resources", 0o755}}
	for _, d := range dirs {
		p := filepath.Join(root, d.name)
		if d.name != "" {
			if err := os.Mkdir(p, d.mode); err != nil {
				return &FixError{Problem: fmt.Sprintf("create %s: %v", p, err), Fix: "remove " + root + " and try again", Err: err}
			}
		}
		// Mkdir is subject to umask; make the mode exact.
		if err := os.Chmod(p, d.mode); err != nil {
			return &FixError{Problem: fmt.Sprintf("chmod %s: %v", p, err), Fix: "remove " + root + " and try again", Err: err}
		}
	}
	return nil
}

var errLeaseHeld = errors.New("hands root busy")

// takeLease holds an exclusive, non-blocking flock on ROOT/evidence until
// the returned file is closed (or the process dies), so init, finish and
// status of one root never interleave.
func takeLease(root string) (*os.File, error) {
	dir := filepath.Join(root, EvidenceDir)
	f, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s for its lease: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &FixError{Problem: fmt.Sprintf("%v: another warden is initializing or finishing %s (it holds the lease on %s)", errLeaseHeld, root, dir), Fix: "wait for it to end, then try again", Err: errLeaseHeld}
		}
		return nil, fmt.Errorf("lease on %s: %w", dir, err)
	}
	return f, nil
}

// leaseHeld reports whether another process holds the root's lease now.
func leaseHeld(root string) bool {
	f, err := takeLease(root)
	if err != nil {
		return errors.Is(err, errLeaseHeld)
	}
	f.Close()
	return false
}
