package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/wardenhq/warden/engine/hands"
)

// What the console's hands wizards need, so tui need not import
// engine/hands.
type (
	// HandsInitOptions configure HandsInit.
	HandsInitOptions = hands.InitOptions
	// HandsInitResult is a root that reached ready.
	HandsInitResult = hands.InitResult
	// HandsInitFailedError is an init that failed after its receipt was
	// written: the evidence under the root says what was left behind.
	HandsInitFailedError = hands.InitFailedError
	// HandsFinishResult says how a root was finished.
	HandsFinishResult = hands.FinishResult
	// HandsStatusReport is a root's receipt beside what its container runtime shows.
	HandsStatusReport = hands.StatusReport
	// HandsImage is a local image of a container runtime.
	HandsImage = hands.Image
	// HandsRootError is a root refused before anything was touched.
	HandsRootError = hands.RootError
	// HandsFixError is a hands error that says what to do next (Fix).
	HandsFixError = hands.FixError
	// HandsStage is a group of progress steps a view shows as one row.
	HandsStage = hands.Stage
)

// The phases a hands root's HandsRecord.Phase names, as the plain
// strings the record holds.
const (
	HandsPhasePrepared = string(hands.PhasePrepared)
	HandsPhaseCreating = string(hands.PhaseCreating)
	HandsPhaseRunning  = string(hands.PhaseRunning)
	HandsPhaseReady    = string(hands.PhaseReady)
	HandsPhaseFinished = string(hands.PhaseFinished)
	HandsPhaseFailed   = string(hands.PhaseFailed)
)

// The progress steps HandsInit and HandsFinish report that the console
// names (the rest it shows only as part of their stage); see
// engine/hands/steps.go for what each says.
const (
	HandsStepPrepared = hands.StepPrepared
	HandsStepCreating = hands.StepCreating
	HandsStepCreated  = hands.StepCreated // detail: the container id
	HandsStepRunning  = hands.StepRunning
	HandsStepPolicy   = hands.StepPolicy // detail: the initial policy
	HandsStepReady    = hands.StepReady
	HandsStepReceipt  = hands.StepReceipt // detail: the receipt read
	HandsStepRuntime  = hands.StepRuntime
	HandsStepStopped  = hands.StepStopped
	HandsStepFinished = hands.StepFinished
	HandsStepFailed   = hands.StepFailed // detail: the whole error
)

// HandsInitStages and HandsFinishStages group HandsInit's and
// HandsFinish's steps into the rows a progress view shows.
func HandsInitStages() []HandsStage   { return hands.InitStages }
func HandsFinishStages() []HandsStage { return hands.FinishStages }

// HandsShortID is a container id as the console and the CLI show it.
func HandsShortID(id string) string { return hands.ShortID(id) }

// HandsFixes are the next steps a hands error carries (its structured
// Fix fields, outermost first), never its text taken apart.
func HandsFixes(err error) []string { return hands.Fixes(err) }

// Hands access modes and file names.
const (
	HandsAccessFiles = hands.AccessFiles
	HandsAccessNone  = hands.AccessNone
	HandsEvidenceDir = hands.EvidenceDir
	HandsReceiptFile = hands.ReceiptFile
	HandsFailureFile = hands.FailureFile
	// HandsParentMode is the mode of a root's parent the engine creates.
	HandsParentMode = hands.ParentMode
)

// ValidateHandsRoot holds a path to the rules a new hands root must meet
// (docs/operating.md): absolute, canonical, new, no control characters or
// commas, under safe ancestors. It only looks; the console calls it as the
// operator types.
func (e *Engine) ValidateHandsRoot(path string) error { return hands.ValidateRoot(path) }

// MakeHandsRootParent creates the missing parent of a new hands root,
// with mode 0700 as the engine's user, when ValidateHandsRoot's
// refusal offers to (HandsRootError.Create: never under a directory
// anyone else can write). It returns the directories made. Only an
// operator may: a viewer is refused and receipted, as for init.
func (e *Engine) MakeHandsRootParent(actor Actor, path string) ([]string, error) {
	if err := e.authorize(actor, "create the parent of hands root "+path); err != nil {
		return nil, err
	}
	return hands.MakeParent(path)
}

// ValidateHandsSocket checks an engine socket path without dialling it:
// absolute, clean, short enough, and a socket.
func (e *Engine) ValidateHandsSocket(path string) error { return hands.CheckSocket(path) }

// HandsImages lists the local images of the container runtime at socket (init
// never pulls), sorted by reference.
func (e *Engine) HandsImages(ctx context.Context, socket string) ([]HandsImage, error) {
	return hands.LocalImages(ctx, socket)
}

// HandsSocketCandidates lists the engine sockets worth offering, in this
// order, those that exist as sockets: /run/docker.sock,
// /var/run/docker.sock, $XDG_RUNTIME_DIR/docker.sock (rootless Docker),
// /run/podman/podman.sock, $XDG_RUNTIME_DIR/podman/podman.sock (rootless
// Podman), then $WARDEN_TEST_DOCKER and $WARDEN_TEST_PODMAN (the tests'
// private runtimes) when set. Two paths to
// the same socket file are offered once. It is only an offer: the
// operator still chooses.
func HandsSocketCandidates() []string {
	paths := []string{"/run/docker.sock", "/var/run/docker.sock"}
	xdg := os.Getenv("XDG_RUNTIME_DIR")
	if xdg != "" && filepath.IsAbs(xdg) {
		paths = append(paths, filepath.Join(xdg, "docker.sock"))
	}
	paths = append(paths, "/run/podman/podman.sock")
	if xdg != "" && filepath.IsAbs(xdg) {
		paths = append(paths, filepath.Join(xdg, "podman", "podman.sock"))
	}
	for _, env := range []string{"WARDEN_TEST_DOCKER", "WARDEN_TEST_PODMAN"} {
		if s := os.Getenv(env); s != "" && filepath.IsAbs(s) {
			paths = append(paths, filepath.Clean(s))
		}
	}
	seen := map[string]bool{}
	var out []string
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode()&os.ModeSocket == 0 {
			continue
		}
		id := p
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			id = fmt.Sprintf("%d:%d", uint64(st.Dev), st.Ino)
		}
		if seen[id] {
			continue
		}
		seen[id] = true
		out = append(out, p)
	}
	return out
}
