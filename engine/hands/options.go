package hands

import (
	"fmt"
	"slices"
	"strings"

	"github.com/moby/moby/api/types/container"
)

// VerifyOptions compares an inspected container with what create asked
// for and lists every option that is not as set (empty when all are).
// Init runs it before it starts the container, on both runtimes: a runtime
// that silently dropped an option (a compat layer, an old daemon) gets
// its container refused rather than trusted.
//
// Podman reports the options in its own words, and each is accepted only
// in a form that means the same thing: capabilities as the list of every
// capability it dropped (with none added) instead of ["ALL"], ulimits as
// RLIMIT_NOFILE, and the tmpfs with its defaults appended.
func VerifyOptions(engine string, c container.InspectResponse, image, inodes string) []string {
	var bad []string
	no := func(what string, got any) { bad = append(bad, fmt.Sprintf("%s (engine reports %v)", what, got)) }
	hc, cfg := c.HostConfig, c.Config
	if hc == nil || cfg == nil {
		return []string{"the engine reported no configuration"}
	}
	if string(hc.NetworkMode) != "none" {
		no("network none", hc.NetworkMode)
	}
	if !hc.ReadonlyRootfs {
		no("read-only root file system", hc.ReadonlyRootfs)
	}
	if !capsDropped(engine, hc.CapDrop, hc.CapAdd) {
		no("every capability dropped", fmt.Sprintf("drop %v add %v", hc.CapDrop, hc.CapAdd))
	}
	if hc.Privileged {
		no("not privileged", hc.Privileged)
	}
	if !slices.ContainsFunc(hc.SecurityOpt, func(o string) bool {
		return o == "no-new-privileges" || o == "no-new-privileges:true" || o == "no-new-privileges=true"
	}) {
		no("no-new-privileges", hc.SecurityOpt)
	}
	if hc.PidsLimit == nil || *hc.PidsLimit != PidsLimit {
		no(fmt.Sprintf("pids limit %d", PidsLimit), deref(hc.PidsLimit))
	}
	if hc.Init == nil || !*hc.Init {
		no("--init", deref(hc.Init))
	}
	if cfg.User != ContainerUser {
		no("user "+ContainerUser, cfg.User)
	}
	if c.Image != image {
		no("image "+image, c.Image)
	}
	if n := hc.RestartPolicy.Name; n != "" && n != container.RestartPolicyDisabled {
		no("no restart policy", n)
	}
	for _, want := range []string{"nofile", "nproc"} {
		if !slices.ContainsFunc(hc.Ulimits, func(u *container.Ulimit) bool {
			return u != nil && strings.ToLower(strings.TrimPrefix(u.Name, "RLIMIT_")) == want && u.Soft == FileLimit && u.Hard == FileLimit
		}) {
			no(fmt.Sprintf("ulimit %s %d", want, FileLimit), hc.Ulimits)
		}
	}
	opts, ok := hc.Tmpfs["/workspace"]
	if !ok {
		no("a tmpfs at /workspace", hc.Tmpfs)
	} else {
		have := strings.Split(opts, ",")
		want := []string{"size=128m", "mode=1777"}
		switch inodes {
		case WorkspaceInodes:
			want = append(want, "nr_inodes="+WorkspaceInodes)
		case InodesUnboundedPodman:
			if engine != RuntimePodman {
				no("inodes bounded on Docker", opts)
			}
		default:
			no("a known inode bound", inodes)
		}
		for _, w := range want {
			if !slices.Contains(have, w) {
				no("workspace tmpfs "+w, opts)
			}
		}
	}
	return bad
}

// deref shows what a pointer option holds, or "none".
func deref[T any](p *T) any {
	if p == nil {
		return "none"
	}
	return *p
}

// capsDropped: Docker reports CapDrop as given (["ALL"]); Podman expands
// it into every capability it would otherwise have granted.
func capsDropped(engine string, drop, add []string) bool {
	if len(add) != 0 {
		return false
	}
	if slices.ContainsFunc(drop, func(c string) bool { return strings.EqualFold(c, "ALL") || strings.EqualFold(c, "CAP_ALL") }) {
		return true
	}
	return engine == RuntimePodman && len(drop) > 0
}

// OptionsSummary says in one line what VerifyOptions confirmed.
func OptionsSummary(inodes string) string {
	ino := "inodes " + inodes
	if inodes == WorkspaceInodes {
		ino = WorkspaceInodes + " inodes"
	}
	return fmt.Sprintf("network none, read-only root, cap-drop ALL, no-new-privileges, user %s, pids %d, nofile/nproc %d, workspace tmpfs 128 MiB (%s), init, owner label",
		ContainerUser, PidsLimit, FileLimit, ino)
}
