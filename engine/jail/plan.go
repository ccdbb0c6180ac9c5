package jail

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Mount modes.
const (
	ModeRO    = "ro"
	ModeRW    = "rw"
	ModeTmpfs = "tmpfs"
)

// Absence classes (docs/jail.md): what a missing source means.
const (
	// Required: the run fails before spawn, naming each missing path.
	Required = "required"
	// DeclaredOnly: mounted because the hook declared it (path inputs).
	DeclaredOnly = "declared-only"
	// Runtime: part of the host layout a process needs (e.g. /lib64).
	Runtime = "runtime"
	// Conditional: nice to have (CA certificates, localtime).
	Conditional = "conditional"
)

// Paths inside the jail.
const (
	ModuleTarget = "/module"
	RunTarget    = "/run/warden"
	BinDir       = "/opt/warden/bin"
	WardenTarget = BinDir + "/warden"
	SocketTarget = RunTarget + "/" + SocketName
	// SocketName is the broker socket's name in the host's run dir
	// (broker.SocketName).
	SocketName = "broker.sock"
)

// Row is one line of a mount plan.
type Row struct {
	Source  string `json:"source"`
	Target  string `json:"target"`
	Mode    string `json:"mode"`
	Absence string `json:"absence"`
	Reason  string `json:"reason"`
	// Symlink, when set, makes Target a symlink to it instead of a mount
	// (merged-/usr hosts have /bin -> usr/bin).
	Symlink string `json:"symlink,omitempty"`
}

// PathInput is a declared path input of the hook.
type PathInput struct {
	Name string
	Path string
	RW   bool
}

// PlanInput is what a plan is built from.
type PlanInput struct {
	ModuleDir string
	RunDir    string
	Warden    string // the binary bound as `warden` (FindHelper's Path)
	// WardenReason is its row's reason (Helper.Reason); "" says only
	// that it is the helper.
	WardenReason string
	Inputs       []PathInput
	Network      bool
	// Command, for a run of an operator's program: its rows replace the
	// module's (ModuleDir is then "").
	Command *Command
	// Preview: a plan shown before any run (warden hook plan), whose
	// broker socket does not exist yet; its row is not checked.
	Preview bool
}

// Plan is a run's mount plan, with the rows whose sources are missing on
// this host split out.
type Plan struct {
	Rows    []Row `json:"rows"`
	Missing []Row `json:"missing,omitempty"`
}

// MissingError names every required path that is absent, with its reason.
type MissingError struct{ Rows []Row }

func (e *MissingError) Error() string {
	parts := make([]string, len(e.Rows))
	for i, r := range e.Rows {
		parts[i] = fmt.Sprintf("%s (%s)", r.Source, r.Reason)
	}
	return "the jail cannot be built: required paths are missing: " + strings.Join(parts, "; ")
}

// BuildPlan lays out the jail from the host layout, the module, the run
// dir and the declared path inputs. Rows whose source is missing are moved
// to Missing; if any of them is Required, the plan comes with a
// *MissingError and the run must not start.
func BuildPlan(in PlanInput) (*Plan, error) {
	rows := []Row{
		{Source: "/usr", Target: "/usr", Mode: ModeRO, Absence: Required, Reason: "system programs and libraries"},
	}
	// /bin, /lib, ...: symlinks into /usr on merged-/usr hosts, else dirs.
	for _, d := range []string{"/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"} {
		if target, err := os.Readlink(d); err == nil {
			rows = append(rows, Row{Source: d, Target: d, Mode: ModeRO, Absence: Runtime, Reason: "merged-/usr link", Symlink: target})
		} else {
			rows = append(rows, Row{Source: d, Target: d, Mode: ModeRO, Absence: Runtime, Reason: "system programs and libraries"})
		}
	}
	etc := []struct{ path, reason string }{
		{"/etc/ld.so.cache", "dynamic linker cache"},
		{"/etc/ssl/certs", "CA certificates"},
		{"/etc/ca-certificates", "CA certificate config"},
		{"/etc/alternatives", "Debian alternatives (e.g. awk)"},
		{"/etc/localtime", "local time zone"},
		{"/etc/nsswitch.conf", "name service switch"},
		{"/etc/ssl/openssl.cnf", "OpenSSL's config (Node and Python read it at start)"},
		{"/etc/gitconfig", "git's system config (git refuses to run if it exists and cannot be read)"},
	}
	if in.Network {
		etc = append(etc, struct{ path, reason string }{"/etc/resolv.conf", "DNS (network granted)"},
			struct{ path, reason string }{"/etc/hosts", "host names (network granted)"})
	}
	for _, e := range etc {
		rows = append(rows, Row{Source: e.path, Target: e.path, Mode: ModeRO, Absence: Conditional, Reason: e.reason})
	}
	wardenReason := in.WardenReason
	if wardenReason == "" {
		wardenReason = "the warden helper, first on PATH"
	}
	if in.ModuleDir != "" {
		rows = append(rows, Row{Source: in.ModuleDir, Target: ModuleTarget, Mode: ModeRO, Absence: Required, Reason: "the module"})
	}
	rows = append(rows,
		Row{Source: in.Warden, Target: WardenTarget, Mode: ModeRO, Absence: Required, Reason: wardenReason},
		// The run dir is a sized tmpfs of its own, with only the broker
		// socket bound in from the host's run dir: whatever the hook
		// writes there is bounded and never lands on the data dir's disk.
		Row{Source: "tmpfs", Target: RunTarget, Mode: ModeTmpfs, Absence: Required, Reason: "the run dir (sized)"},
		Row{Source: filepath.Join(in.RunDir, SocketName), Target: SocketTarget, Mode: ModeRW, Absence: Required, Reason: "the broker socket"},
		Row{Source: "tmpfs", Target: "/tmp", Mode: ModeTmpfs, Absence: Required, Reason: "private /tmp"},
	)
	if in.Command != nil {
		rows = append(rows, in.Command.rows()...)
	}
	for _, p := range in.Inputs {
		mode := ModeRO
		if p.RW {
			mode = ModeRW
		}
		rows = append(rows, Row{Source: p.Path, Target: p.Path, Mode: mode, Absence: DeclaredOnly, Reason: "path input " + p.Name})
	}

	plan := &Plan{}
	var missingRequired []Row
	for _, r := range rows {
		if r.Mode == ModeTmpfs || (in.Preview && r.Target == SocketTarget) {
			plan.Rows = append(plan.Rows, r)
			continue
		}
		if _, err := os.Lstat(r.Source); err != nil {
			if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrPermission) {
				r.Reason += ": " + err.Error()
			}
			plan.Missing = append(plan.Missing, r)
			if r.Absence == Required {
				missingRequired = append(missingRequired, r)
			}
			continue
		}
		plan.Rows = append(plan.Rows, r)
	}
	if len(missingRequired) > 0 {
		return plan, &MissingError{Rows: missingRequired}
	}
	return plan, nil
}

// Targets lists the plan's targets, sorted (for display and tests).
func (p *Plan) Targets() []string {
	out := make([]string, 0, len(p.Rows))
	for _, r := range p.Rows {
		out = append(out, r.Target)
	}
	sort.Strings(out)
	return out
}
