package engine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/wardenhq/warden/engine/caps"
	"github.com/wardenhq/warden/engine/hooks"
	"github.com/wardenhq/warden/engine/jail"
	"github.com/wardenhq/warden/storage"
)

// Check is one line of `warden doctor`.
type Check struct {
	Name    string `json:"name"`
	Status  string `json:"status"` // "ok" or "problem"
	Detail  string `json:"detail"`
	Fix     string `json:"fix,omitempty"`
	Warning bool   `json:"warning,omitempty"` // a problem that does not stop warden
}

// Report is the whole doctor run.
type Report struct {
	DataDir string  `json:"dataDir"`
	Checks  []Check `json:"checks"`
}

// OK is true when no check is a problem (warnings aside).
func (r Report) OK() bool {
	for _, c := range r.Checks {
		if c.Status != "ok" && !c.Warning {
			return false
		}
	}
	return true
}

// DoctorOptions configure Doctor.
type DoctorOptions struct {
	DataDir   string
	BwrapPath string // default /usr/bin/bwrap
	// Attach, when set, reaches the engine of the process holding the
	// store (over its control socket), so the store and trust checks run
	// there instead of being skipped.
	Attach func(dir string) (f Facade, pid int, err error)
	// EngineSocket, when set, also checks the container engine there.
	EngineSocket string
	// Ceiling is the operator's ceiling of hooks' limits (config.yaml),
	// shown with the limits check.
	Ceiling hooks.Resources
	// SysRoot is where the user namespace sysctls (/proc/sys/...) and
	// AppArmor's loaded profiles are read from; "" is "/". Tests point it
	// at a fake tree.
	SysRoot string
}

// Doctor checks the data dir policy, the store and its schema, the trust
// root and bubblewrap admission. It opens the store (creating a fresh data
// dir as any command would) only if no other process holds it.
func Doctor(opts DoctorOptions) Report {
	dir := opts.DataDir
	if dir == "" {
		d, err := storage.DefaultDir()
		if err != nil {
			return Report{Checks: []Check{{Name: "data dir", Status: "problem", Detail: err.Error(), Fix: "pass --data-dir"}}}
		}
		dir = d
	}
	dir, _ = filepath.Abs(dir)
	rep := Report{DataDir: dir}
	add := func(c Check) { rep.Checks = append(rep.Checks, c) }
	problem := func(name, detail, fix string) {
		add(Check{Name: name, Status: "problem", Detail: detail, Fix: fix})
	}

	if err := storage.EnsureDir(dir); err != nil {
		var pe *storage.PolicyError
		if errors.As(err, &pe) {
			problem("data dir", pe.Path+": "+pe.Problem, pe.Fix)
		} else {
			problem("data dir", err.Error(), "check the path and its parent's permissions")
		}
	} else {
		add(Check{Name: "data dir", Status: "ok", Detail: dir + " is yours and private (0700)"})
		doctorSpace(dir, add, problem)
		if pid := storage.HolderPID(dir); pid != 0 && pid != os.Getpid() {
			doctorHeld(dir, pid, opts.Attach, add, problem)
		} else {
			doctorStore(dir, add, problem)
		}
	}
	doctorBwrap(opts.BwrapPath, add, problem)
	doctorHelper(jailHelper(), add)
	picked := doctorKernel(opts.SysRoot, opts.BwrapPath, add, problem)
	if opts.EngineSocket != "" {
		doctorEngine(opts.EngineSocket, add, problem)
	}
	doctorLimits(opts.Ceiling.Or(hooks.DefaultCeiling), picked, add)
	return rep
}

// doctorHeld checks a store another process holds, through that
// process's engine when it can be reached.
func doctorHeld(dir string, pid int, attach func(string) (Facade, int, error), add func(Check), problem func(string, string, string)) {
	if attach == nil {
		add(Check{Name: "store", Status: "ok", Detail: fmt.Sprintf("held by warden pid %d; store and trust checks need it to be stopped", pid)})
		return
	}
	f, served, err := attach(dir)
	if err != nil {
		add(Check{Name: "store", Status: "ok", Warning: true, Detail: fmt.Sprintf("held by warden pid %d, which does not answer on %s: %v", pid, ControlSocket, err),
			Fix: fmt.Sprintf("if pid %d is hung, stop it (kill %d); the next warden command takes the data dir over", pid, pid)})
		return
	}
	defer f.Close()
	v, err := f.VerifyReceiptsSince(0)
	switch {
	case err != nil:
		problem("store", err.Error(), "restore warden.db from a backup")
	case !v.Intact:
		problem("store", fmt.Sprintf("receipt chain broken at seq %d: %s", v.BrokenSeq, v.Reason), "run `warden receipts verify`; restore warden.db from a backup")
	default:
		add(Check{Name: "store", Status: "ok", Detail: fmt.Sprintf("held and served by warden pid %d (checked through %s), %s", served, ControlSocket, chainDetail(v))})
	}
	st, err := f.TrustStatus()
	switch {
	case err != nil:
		problem("trust root", err.Error(), "warden trust status")
	case !st.Agrees:
		problem("trust root", st.Problem, "warden trust rotate")
	default:
		add(Check{Name: "trust root", Status: "ok", Detail: fmt.Sprintf("host.secret agrees with generation %d (fingerprint %s…)", st.Generation, st.Fingerprint[:min(12, len(st.Fingerprint))])})
	}
}

func doctorStore(dir string, add func(Check), problem func(string, string, string)) {
	// bbolt's consistency check first, in a read-only open of its own:
	// it must not share the file with the engine's writers, and a
	// damaged store is diagnosed here without the engine reading it.
	chk, err := storage.Check(dir, time.Second)
	var ce *storage.CorruptError
	if errors.As(err, &ce) {
		problem("store", ce.Problem(), ce.Fix())
		return
	}
	var le *storage.LockedError
	if errors.As(err, &le) { // another process holds it: Open would wait as long to say so
		add(Check{Name: "store", Status: "ok", Detail: le.Error()})
		return
	}
	checked := ""
	if err == nil && chk.Keys > 0 {
		checked = fmt.Sprintf(", consistency checked (%d records, %s)", chk.Keys, chk.Took.Round(time.Millisecond))
	}
	e, err := Open(Options{DataDir: dir})
	if err != nil {
		var te *caps.TrustError
		var pe *storage.PolicyError
		var se *storage.SchemaError
		var ce *storage.CorruptError
		var le *storage.LockedError
		switch {
		case errors.As(err, &le):
			add(Check{Name: "store", Status: "ok", Detail: le.Error()})
		case errors.As(err, &pe):
			problem("store", pe.Path+": "+pe.Problem, pe.Fix)
		case errors.As(err, &se):
			problem("store", se.Error(), "upgrade warden")
		case errors.As(err, &ce):
			problem("store", ce.Problem(), ce.Fix())
		case errors.As(err, &te):
			problem("trust root", te.Problem, "warden trust rotate")
		case storage.IsNoSpace(err):
			problem("store", err.Error(), fmt.Sprintf("free space on the data dir's filesystem (see `df -h %s`)", dir))
		default:
			problem("store", err.Error(), fmt.Sprintf("check the filesystem under %s (`df -h`, `dmesg`) and that warden.db is yours (mode 0600); restore warden.db from a backup if it is damaged", dir))
		}
		return
	}
	defer e.Close()
	v, err := e.VerifyReceiptsSince(0)
	switch {
	case err != nil:
		problem("store", err.Error(), "restore warden.db from a backup")
	case !v.Intact:
		problem("store", fmt.Sprintf("schema %d; receipt chain broken at seq %d: %s", storage.SchemaVersion, v.BrokenSeq, v.Reason), "run `warden receipts verify`; restore warden.db from a backup")
	default:
		add(Check{Name: "store", Status: "ok", Detail: fmt.Sprintf("%s, schema %d, %s%s", e.store.Path(), storage.SchemaVersion, chainDetail(v), checked)})
	}
	if terr := e.auth.Err(); terr != nil {
		var te *caps.TrustError
		detail := terr.Error()
		if errors.As(terr, &te) {
			detail = te.Problem
		}
		problem("trust root", detail, "warden trust rotate")
	} else {
		st, _ := e.auth.Status()
		add(Check{Name: "trust root", Status: "ok", Detail: fmt.Sprintf("host.secret agrees with generation %d (fingerprint %s…)", st.Generation, st.Fingerprint[:12])})
	}
}

// MinFreeSpace is the free space doctor wants on the data dir's
// filesystem: below it, one chatty run (DefaultStreamLimit bytes of
// stream) could fill the disk, and a run whose stream cannot be stored
// fails.
const MinFreeSpace = 2 * DefaultStreamLimit

// doctorSpace reports the free space on the data dir's filesystem.
func doctorSpace(dir string, add func(Check), problem func(string, string, string)) {
	avail, total, err := storage.FreeSpace(dir)
	switch {
	case err != nil:
		problem("free space", "cannot read the free space of "+dir+": "+err.Error(), "check the data dir's filesystem (`df -h "+dir+"`)")
	case avail < MinFreeSpace:
		problem("free space", fmt.Sprintf("%s free of %s on the data dir's filesystem, under the %s warden needs: runs whose stream cannot be stored fail", mib(avail), mib(total), mib(MinFreeSpace)),
			fmt.Sprintf("free space on that filesystem (`df -h %s`), or move the data dir (--data-dir) to a larger one", dir))
	default:
		add(Check{Name: "free space", Status: "ok", Detail: fmt.Sprintf("%s free of %s on the data dir's filesystem", mib(avail), mib(total))})
	}
}

func mib(n uint64) string {
	if n >= 10<<30 {
		return fmt.Sprintf("%d GiB", n>>30)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

func doctorBwrap(path string, add func(Check), problem func(string, string, string)) {
	b, err := jail.AdmitBwrap(path)
	if err != nil {
		var ae *jail.AdmissionError
		if errors.As(err, &ae) {
			state := "untrusted"
			if ae.Absent {
				state = "absent"
			}
			problem("bubblewrap", fmt.Sprintf("%s: %s (%s)", ae.Path, ae.Problem, state), ae.Fix)
			return
		}
		problem("bubblewrap", err.Error(), "apt-get install bubblewrap")
		return
	}
	add(Check{Name: "bubblewrap", Status: "ok", Detail: fmt.Sprintf("%s, version %s, admitted", b.Path, b.Version)})
}

// doctorHelper says which binary a jailed hook gets as `warden`. The full
// binary still works, so it is never a problem; a warden-hook that is
// there but refused is a warning (someone meant it to be used).
func doctorHelper(h jail.Helper, add func(Check)) {
	const name = "jail helper"
	switch {
	case h.Small:
		add(Check{Name: name, Status: "ok", Detail: fmt.Sprintf("%s, bound as %s: a hook's `warden hook` calls start a small program", h.Path, jail.WardenTarget)})
	case h.Refused:
		add(Check{Name: name, Status: "problem", Warning: true,
			Detail: fmt.Sprintf("the full warden binary %s is bound as %s, since %s; each `warden hook` call from a jailed hook starts all of warden", h.Path, jail.WardenTarget, h.Why),
			Fix:    "install warden-hook as the warden binary is: a regular file, owned by its owner or root, not group- or world-writable (chmod go-w)"})
	default:
		add(Check{Name: name, Status: "ok", Detail: fmt.Sprintf("the full warden binary %s, bound as %s (%s; build it with `CGO_ENABLED=0 go build -o DIR/ ./cmd/warden-hook` for faster hook calls)", h.Path, jail.WardenTarget, h.Why)})
	}
}

// doctorKernel reports what the kernel gives the jail, and which jail
// backends can run here.
//
// It returns the backend `jail: auto` picks here ("" when none can run).
func doctorKernel(root, bwrap string, add func(Check), problem func(string, string, string)) string {
	if bwrap == "" {
		bwrap = jail.DefaultBwrap
	}
	h := jail.ProbeHostAt(root, bwrap)
	if h.UserNamespaces && (root == "" || root == "/") {
		// No sysctl refuses; a container's seccomp profile still may.
		if _, err := jail.AdmitBwrap(bwrap); err == nil {
			if u := jail.TryUserns(bwrap); u != nil {
				h.UserNamespaces, h.UserNSRefused = false, u
			}
		}
	}
	if h.UserNamespaces {
		add(Check{Name: "user namespaces", Status: "ok", Detail: h.UserNSDetail})
	} else {
		problem("user namespaces", "unavailable, so bwrap cannot make its jail (jail: auto runs hooks under landlock where it can, see jail backends): "+h.UserNSRefused.Problem, h.UserNSRefused.Fix)
	}
	if h.Seccomp {
		add(Check{Name: "seccomp", Status: "ok", Detail: h.SeccompDetail})
	} else {
		problem("seccomp", h.SeccompDetail, "use a kernel built with CONFIG_SECCOMP_FILTER")
	}
	if why := jail.LandlockWhyNot(h.LandlockABI); why == "" {
		add(Check{Name: "landlock", Status: "ok", Detail: fmt.Sprintf("ABI %d: the landlock backend can run (jail: landlock, or auto where bwrap cannot); it does not hide the host's process list in /proc or the host's network stack; %s", h.LandlockABI, landlockIdentity())})
	} else {
		add(Check{Name: "landlock", Status: "ok", Detail: "the landlock backend cannot run: " + why + " (not required where bwrap runs)"})
	}
	// Which backends work here, and what auto picks.
	var bw jail.BwrapState
	if _, err := jail.AdmitBwrap(bwrap); err != nil {
		bw.Admission = err
	}
	bw.Userns = h.UserNSRefused
	parts := []string{"bwrap: works"}
	switch {
	case bw.Admission != nil:
		parts[0] = "bwrap: cannot run (see bubblewrap)"
	case bw.Userns != nil:
		parts[0] = "bwrap: cannot run (see user namespaces)"
	}
	if why := jail.LandlockWhyNot(h.LandlockABI); why == "" {
		parts = append(parts, fmt.Sprintf("landlock: works (ABI %d; weaker: no namespaces)", h.LandlockABI))
	} else {
		parts = append(parts, "landlock: cannot run ("+why+")")
	}
	if !jail.MayFallBack(bw.Admission, bwrap) {
		problem("jail backends", strings.Join(parts, "; ")+"; jail: auto does not fall back from a bwrap that is there and refused", "fix bubblewrap (above)")
	} else if got, err := jail.Choose(jail.BackendAuto, bw, h.LandlockABI); err == nil {
		add(Check{Name: "jail backends", Status: "ok", Detail: strings.Join(parts, "; ") + "; jail: auto picks " + got})
		return got
	} else {
		problem("jail backends", strings.Join(parts, "; ")+"; no jailed run can start", "make bwrap usable (see user namespaces above), or run on a kernel with Landlock ABI 3 or later")
	}
	return ""
}

// chainDetail says what a verify from the newest checkpoint checked:
// doctor stays quick on a long log, and says how to check all of it.
func chainDetail(v Verification) string {
	if v.From == 0 {
		return fmt.Sprintf("%d receipts, chain intact", v.Count)
	}
	return fmt.Sprintf("chain intact from the checkpoint at seq %d (%d receipts since; `warden receipts verify --full` checks all)", v.From, v.Count)
}

// landlockIdentity says who a landlock hook runs as here.
func landlockIdentity() string {
	ll := jail.NewLandlock()
	switch {
	case ll.UID == 0:
		return "its hooks run as uid 0 with no capability: " + ll.RootWhy
	case os.Geteuid() == 0:
		return fmt.Sprintf("its hooks run as uid %d, as under bwrap", ll.UID)
	}
	return "its hooks run as warden's own uid"
}
