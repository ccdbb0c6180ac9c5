package jail

import (
	"errors"
	"fmt"
	"sync"
)

// Chooser picks each run's Backend from the mode asked for (auto, bwrap,
// landlock) and what the host offers. It is the one place that knows the
// backends by name: the engine and the console ask it, never each other.
//
// bwrap is admitted once per Chooser (its version is read once). The
// user-namespace probe is read at each choice: a few sysctl reads, and
// TryUserns keeps the answer of its one real try per process.
type Chooser struct {
	bwrapPath string
	// Cache keeps bwrap's probes for other processes (nil: none).
	Cache *ProbeCache

	once     sync.Once
	bwrap    *Jail
	bwrapErr error
}

// NewChooser returns the chooser for a configured bwrap path ("" for
// DefaultBwrap).
func NewChooser(bwrapPath string) *Chooser {
	return &Chooser{bwrapPath: bwrapPath}
}

// Bwrap is the admitted bubblewrap jail, or why it cannot be admitted,
// with the fix.
func (c *Chooser) Bwrap() (*Jail, error) {
	c.once.Do(func() { c.bwrap, c.bwrapErr = newJail(c.bwrapPath, c.Cache) })
	if c.bwrapErr != nil {
		return nil, fmt.Errorf("%w\n(or run the hook unjailed with --jail=off; every receipt of that run says so)", c.bwrapErr)
	}
	return c.bwrap, nil
}

// LandlockABI is the kernel's Landlock ABI (0: none), read once per
// process.
func (c *Chooser) LandlockABI() int { return hostLandlockABI() }

var hostLandlockABI = sync.OnceValue(func() int { return ProbeHost().LandlockABI })

// Choose returns the backend of a run asked for with mode.
func (c *Chooser) Choose(mode string) (Backend, error) {
	name, err := c.Name(mode)
	if err != nil {
		return nil, err
	}
	switch name {
	case BackendBwrap:
		return &bwrapBackend{j: c.bwrap}, nil
	case BackendLandlock:
		return &landlockBackend{j: NewLandlock(), abi: c.LandlockABI()}, nil
	}
	return nil, fmt.Errorf("jail: no backend is called %q", name)
}

// Name is the name of the backend Choose(mode) gives, or why no backend
// can run: what the console's header and `warden hook plan` show.
func (c *Chooser) Name(mode string) (string, error) {
	var bw BwrapState
	if _, err := c.Bwrap(); err != nil {
		bw.Admission = err
	} else if mode != BackendBwrap {
		// An explicit bwrap is not probed: a refused namespace fails the
		// run with bwrap's own words, explained (ExplainExit).
		bw.Userns = ProbeUserns("/", c.bwrap.Bwrap.Path)
		if bw.Userns == nil { // no file refuses: try it (a container's seccomp may)
			bw.Userns = TryUsernsCached(c.bwrap.Bwrap.Path, c.Cache)
		}
	}
	if mode == BackendLandlock {
		return Choose(mode, bw, c.LandlockABI())
	}
	// auto falls back only where bwrap cannot make its namespaces, or is
	// not installed at all (MayFallBack).
	if bw.Admission != nil && (mode == BackendBwrap || !MayFallBack(bw.Admission, c.bwrapPath)) {
		return "", bw.Admission
	}
	return Choose(mode, bw, c.LandlockABI())
}

// BwrapState is what Choose knows of bwrap on this host.
type BwrapState struct {
	// Admission is bwrap's admission error (nil: admitted).
	Admission error
	// Userns says why the host refuses user namespaces (nil: it does not).
	Userns *UsernsRefused
}

// Usable: bwrap can make its jail here, as far as files say.
func (b BwrapState) Usable() bool { return b.Admission == nil && b.Userns == nil }

// WhyNot says why bwrap cannot run, with the fix ("" when it can).
func (b BwrapState) WhyNot() string {
	switch {
	case b.Admission != nil:
		return b.Admission.Error()
	case b.Userns != nil:
		return b.Userns.Error()
	}
	return ""
}

// MayFallBack: auto may leave a bwrap with this admission error for the
// landlock backend: only one not installed at the default path. A bwrap
// that is there and refused (a configured path that is wrong, a binary
// that is writable or not root's) is the operator's to fix, never a
// reason to run in a weaker jail.
func MayFallBack(admission error, configured string) bool {
	var ae *AdmissionError
	return admission == nil || (errors.As(admission, &ae) && ae.Absent && (configured == "" || configured == DefaultBwrap))
}

// ValidMode: mode is a jail backend an operator may ask for.
func ValidMode(mode string) bool {
	return mode == BackendAuto || mode == BackendBwrap || mode == BackendLandlock
}

// Choose picks the backend for mode (auto, bwrap, landlock) from what
// the host offers. It never picks a weaker backend than asked for:
// `bwrap` refuses to run rather than fall back.
func Choose(mode string, bw BwrapState, landlockABI int) (string, error) {
	switch mode {
	case BackendAuto, "":
		if bw.Usable() {
			return BackendBwrap, nil
		}
		if why := LandlockWhyNot(landlockABI); why != "" {
			return "", fmt.Errorf("no jail backend can run here. bwrap: %s. landlock: %s", bw.WhyNot(), why)
		}
		return BackendLandlock, nil
	case BackendBwrap:
		if bw.Usable() {
			return BackendBwrap, nil
		}
		fallback := "the landlock backend cannot run here either: " + LandlockWhyNot(landlockABI)
		if LandlockWhyNot(landlockABI) == "" {
			fallback = "or allow the weaker landlock backend: `jail: auto` (or `jail: landlock`) in config.yaml, or --jail=landlock"
		}
		return "", fmt.Errorf("jail: bwrap was asked for (config.yaml `jail: bwrap` or --jail=bwrap), and bwrap cannot run here, so the run is refused rather than run in a weaker jail: %s\n(%s)", bw.WhyNot(), fallback)
	case BackendLandlock:
		if why := LandlockWhyNot(landlockABI); why != "" {
			return "", fmt.Errorf("jail: landlock was asked for and cannot run here: %s", why)
		}
		return BackendLandlock, nil
	}
	return "", fmt.Errorf("unknown jail mode %q (want auto, bwrap, landlock or off)", mode)
}
