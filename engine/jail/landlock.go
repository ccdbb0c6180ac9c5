package jail

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// landlockTarOptions is TAR_OPTIONS in a landlock hook's environment. Under
// landlock, file metadata cannot be changed by path (seccomp denies it:
// Landlock has no right for it), and GNU tar restores owners, modes and
// times by path when it extracts, so it would fail on every archive. With
// these options (TAR_OPTIONS is read by tar itself) it extracts with the
// hook's umask and the extraction time instead, and needs no such call.
const landlockTarOptions = "--no-same-owner --no-same-permissions --touch"

// MinLandlockABI is the lowest Landlock ABI the backend runs on: below 3
// truncate(2) is not a right Landlock handles, so a read-only class (the
// module, the system) could still be truncated by the hook.
const MinLandlockABI = 3

// LandlockWhyNot says why the landlock backend cannot run with this ABI
// ("" when it can).
func LandlockWhyNot(abi int) string {
	switch {
	case abi <= 0:
		return "the kernel has no Landlock (it needs Linux 5.13 or later with CONFIG_SECURITY_LANDLOCK and landlock in the lsm= list)"
	case abi < MinLandlockABI:
		return fmt.Sprintf("Landlock ABI %d here; the landlock backend needs ABI %d (Linux 6.2) or later: below it truncate(2) is not a right Landlock handles, so read-only paths could not be held read-only", abi, MinLandlockABI)
	}
	return ""
}

// Landlock filesystem rights by the ABI that brought them.
const (
	llFSv1 = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_FILE |
		unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_DIR | unix.LANDLOCK_ACCESS_FS_MAKE_REG |
		unix.LANDLOCK_ACCESS_FS_MAKE_SOCK | unix.LANDLOCK_ACCESS_FS_MAKE_FIFO | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_SYM

	// The rights a file (not a directory) can carry.
	llFileRights = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE |
		unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV

	llRead  = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
	llExec  = llRead | unix.LANDLOCK_ACCESS_FS_EXECUTE
	llWrite = llExec | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_REMOVE_DIR |
		unix.LANDLOCK_ACCESS_FS_REMOVE_FILE | unix.LANDLOCK_ACCESS_FS_MAKE_DIR | unix.LANDLOCK_ACCESS_FS_MAKE_REG |
		unix.LANDLOCK_ACCESS_FS_MAKE_SOCK | unix.LANDLOCK_ACCESS_FS_MAKE_FIFO | unix.LANDLOCK_ACCESS_FS_MAKE_SYM |
		unix.LANDLOCK_ACCESS_FS_REFER | unix.LANDLOCK_ACCESS_FS_TRUNCATE
	llDev = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
)

// handledFS is every filesystem right the ABI knows: all of them are
// denied unless a rule grants them.
func handledFS(abi int) uint64 {
	h := uint64(llFSv1)
	if abi >= 2 {
		h |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if abi >= 3 {
		h |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	if abi >= 5 {
		h |= unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	}
	return h
}

// LandlockRule is one path the landlock backend grants.
type LandlockRule struct {
	Path   string `json:"path"`
	Access string `json:"access"` // "ro", "ro+exec", "rw", "dev"
	Why    string `json:"why"`
	bits   uint64
}

// LandlockRow says what one row of the mount plan became.
type LandlockRow struct {
	Target string `json:"target"`
	Became string `json:"became"`
}

// LandlockPlan is a run's plan in the landlock backend's terms.
type LandlockPlan struct {
	ABI   int            `json:"abi"`
	Rules []LandlockRule `json:"rules"`
	Rows  []LandlockRow  `json:"rows"`
	// DenyTCP: Landlock denies TCP bind and connect (network: false on
	// ABI 4 and later; the seccomp filter denies inet sockets anyway).
	DenyTCP bool `json:"denyTCP"`
	// Scoped: signals and abstract unix sockets are scoped to the hook
	// (ABI 6 and later).
	Scoped bool `json:"scoped"`
	// Network: the host network is granted (inet sockets allowed).
	Network bool `json:"network"`
	// TmpDir is the hook's private tmp (its HOME and TMPDIR).
	TmpDir string `json:"tmpDir"`
	// NotHidden: what this backend does not hide, for the operator.
	NotHidden []string `json:"notHidden"`
}

// LandlockInput is what LandlockFor needs besides the plan.
type LandlockInput struct {
	ABI     int
	RunDir  string // the host's run dir, the hook's, read-write
	TmpDir  string // the hook's private tmp, read-write
	Network bool   // the host network is granted
	Egress  bool   // the hook's network is a destination list
	UID     int    // the uid the hook runs as
	// RootWhy says why a root warden's hook stays uid 0 (Jail.RootWhy).
	RootWhy string
	Keeps   int // the capability a hook run as another uid keeps (Jail.Keeps)
	// Hidden are paths the hook must not reach (the data dir, the
	// operator's home): no rule may grant a tree holding one.
	Hidden []string
}

// hookIdentity says who a landlock hook runs as, for the plan and the
// start receipt.
func hookIdentity(in LandlockInput) string {
	switch {
	case in.UID == 0 && in.RootWhy != "":
		return "the hook runs as uid 0 with every capability dropped (Landlock still confines it): " + in.RootWhy
	case in.UID == 0:
		return "the hook runs as uid 0 with every capability dropped (Landlock still confines it)"
	case os.Geteuid() == 0:
		if in.Keeps == unix.CAP_DAC_OVERRIDE {
			return fmt.Sprintf("the hook runs as uid %d, as under bwrap, keeping one capability, CAP_DAC_OVERRIDE (this root lacks CAP_DAC_READ_SEARCH), to look up its granted paths at their host paths beneath root's private dirs: it reads and writes past file modes, only within its Landlock rules, as uid 0 would, but cannot chmod or chown what it does not own, nor signal root", in.UID)
		}
		return fmt.Sprintf("the hook runs as uid %d, as under bwrap, keeping one capability, CAP_DAC_READ_SEARCH, to look up its granted paths at their host paths beneath root's private dirs: it reads past file modes only within its Landlock rules, and writes nothing it does not own", in.UID)
	}
	return fmt.Sprintf("the hook runs as warden's own uid %d", in.UID)
}

// RefusedError is a plan the landlock backend cannot express: refused,
// never widened.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string {
	return "the landlock jail refuses this run: " + e.Reason
}

// The devices every hook gets, as bwrap's minimal /dev has them.
var llDevices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"}

// LandlockFor turns a mount plan into Landlock rules. A plan it cannot
// express is a *RefusedError: a destination list (Landlock filters
// ports, not addresses), a granted tree that holds a path that must stay
// hidden (bwrap hides one under a bind with a mount; Landlock can only
// add rights, never take them back beneath a rule), or a writable tree
// that holds the read-only module.
func LandlockFor(plan *Plan, in LandlockInput) (*LandlockPlan, error) {
	if why := LandlockWhyNot(in.ABI); why != "" {
		return nil, &RefusedError{Reason: why}
	}
	if in.ABI < 6 && in.UID == 0 {
		return nil, &RefusedError{Reason: fmt.Sprintf("warden runs as root and Landlock ABI %d here cannot scope signals (ABI 6, Linux 6.12): the hook, uid 0 even with no capability, could signal every root process of the host. Run warden as an ordinary user, or where bwrap can make its namespaces", in.ABI)}
	}
	if in.Egress {
		return nil, &RefusedError{Reason: "the hook's network is a destination list (egress proxy). Without a network namespace of its own the hook shares the host's network stack, and Landlock filters TCP ports, not addresses, so the proxy could not be the only way out. Run it under bwrap, or grant `network: true` in its policy"}
	}
	lp := &LandlockPlan{ABI: in.ABI, Network: in.Network, TmpDir: in.TmpDir,
		NotHidden: []string{"the host's process list in /proc (other processes are visible, not reachable: Landlock scopes ptrace)", "the host's network stack (no network namespace)", hookIdentity(in), "tmp and run_dir sizes are not held (no tmpfs): they are directories on the data dir's disk",
			"Unix sockets: the hook may make none (seccomp denies socket(AF_UNIX) and datagram pairs: connect and sendto by path would reach the host's), and reaches its broker through the dialer fd (WARDEN_DIALER)"}}
	var moduleDir string
	add := func(path, access, why string, bits uint64) {
		lp.Rules = append(lp.Rules, LandlockRule{Path: path, Access: access, Why: why, bits: bits})
	}
	for _, r := range plan.Rows {
		switch {
		case r.Symlink != "":
			lp.Rows = append(lp.Rows, LandlockRow{r.Target, "host symlink to " + r.Symlink + " (covered by its target's rule)"})
		case r.Target == RunTarget:
			add(in.RunDir, "rw", "the run dir (host path)", llWrite)
			lp.Rows = append(lp.Rows, LandlockRow{r.Target, "rw rule on the host's run dir " + in.RunDir + " (unsized)"})
		case r.Target == SocketTarget:
			lp.Rows = append(lp.Rows, LandlockRow{r.Target, "inside the run dir, at its host path"})
		case r.Target == "/tmp":
			add(in.TmpDir, "rw", "private tmp (HOME, TMPDIR)", llWrite)
			lp.Rows = append(lp.Rows, LandlockRow{r.Target, "rw rule on a private dir " + in.TmpDir + " (unsized); the host's /tmp is unreachable"})
		case r.Target == ModuleTarget:
			moduleDir = r.Source
			add(r.Source, "ro+exec", "the module", llExec)
			lp.Rows = append(lp.Rows, LandlockRow{r.Target, "ro+exec rule on " + r.Source + " (at its host path)"})
		case r.Target == WardenTarget:
			add(r.Source, "ro+exec", "the warden helper", llExec)
			lp.Rows = append(lp.Rows, LandlockRow{r.Target, "ro+exec rule on " + r.Source + ", first on PATH through the run dir's bin/"})
		case r.Mode == ModeRW: // a rw path input; a command's workspace and home
			add(r.Source, "rw", r.Reason, llWrite)
			lp.Rows = append(lp.Rows, LandlockRow{r.Target, "rw rule"})
		case strings.HasPrefix(r.Target, "/etc/") || r.Absence == DeclaredOnly:
			add(r.Source, "ro", r.Reason, llRead)
			lp.Rows = append(lp.Rows, LandlockRow{r.Target, "ro rule"})
		default: // the system dirs
			add(r.Source, "ro+exec", r.Reason, llExec)
			lp.Rows = append(lp.Rows, LandlockRow{r.Target, "ro+exec rule"})
		}
	}
	lp.Rows = append(lp.Rows, LandlockRow{"/etc/passwd, /etc/group", "not given (no file can be synthesized without a mount)"})
	for _, d := range llDevices {
		if _, err := os.Stat(d); err == nil {
			add(d, "dev", "a device of bwrap's minimal /dev", llDev)
		}
	}
	lp.Rows = append(lp.Rows, LandlockRow{"/dev", "only " + strings.Join(llDevices, " ")})
	add("/proc", "ro", "the host's /proc (not the hook's own pid namespace)", llRead)
	lp.Rows = append(lp.Rows, LandlockRow{"/proc", "ro rule on the HOST's /proc: the host's process list shows"})

	// Refuse what cannot be held.
	for _, rule := range lp.Rules {
		p := realPath(rule.Path)
		for _, h := range in.Hidden {
			if h == "" {
				continue
			}
			if hp := realPath(h); within(hp, p) {
				return nil, &RefusedError{Reason: fmt.Sprintf("%s (%s) holds %s, which the hook must not reach; Landlock grants a whole tree and cannot hide a path beneath it (bwrap hides it with a mount). Choose a path that does not hold it, or run under bwrap", rule.Path, rule.Why, h)}
			}
		}
		if rule.Access == "rw" && moduleDir != "" && within(realPath(moduleDir), p) {
			return nil, &RefusedError{Reason: fmt.Sprintf("%s (%s) is writable and holds the module dir %s, which must stay read-only; Landlock cannot take write back beneath a writable tree", rule.Path, rule.Why, moduleDir)}
		}
	}
	switch {
	case in.Network:
		lp.Rows = append(lp.Rows, LandlockRow{"network", "the HOST's network (granted), inet sockets allowed"})
	case in.ABI >= 4:
		lp.DenyTCP = true
		lp.Rows = append(lp.Rows, LandlockRow{"network", "none: seccomp denies inet sockets, Landlock denies TCP bind and connect"})
	default:
		lp.Rows = append(lp.Rows, LandlockRow{"network", fmt.Sprintf("none: seccomp denies inet sockets (Landlock ABI %d has no TCP rules)", in.ABI)})
	}
	if in.ABI >= 6 {
		lp.Scoped = true
		lp.Rows = append(lp.Rows, LandlockRow{"signals, abstract unix sockets", "scoped: the hook cannot signal or connect to anything outside its own processes"})
	} else {
		lp.Rows = append(lp.Rows, LandlockRow{"signals, abstract unix sockets", fmt.Sprintf("NOT scoped (Landlock ABI %d < 6): the hook can signal warden's uid's processes", in.ABI)})
		lp.NotHidden = append(lp.NotHidden, "signals and abstract unix sockets of warden's uid (Landlock ABI < 6)")
	}
	return lp, nil
}

// realPath resolves symlinks when it can (a rule holds the inode).
func realPath(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return filepath.Clean(p)
}

// within: p is dir or below it.
func within(p, dir string) bool {
	if dir == "/" {
		return true
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// llRulesetAttr is struct landlock_ruleset_attr up to scoped (ABI 6);
// the size given to the kernel is what the running ABI knows.
type llRulesetAttr struct {
	fs, net, scoped uint64
}

// Ruleset builds the plan's Landlock ruleset and returns its fd, to be
// handed to the landlock stage (which restricts itself with it). The
// paths are opened by warden, as warden: a missing one fails the run.
func (lp *LandlockPlan) Ruleset() (*os.File, error) {
	attr := llRulesetAttr{fs: handledFS(lp.ABI)}
	size := unsafe.Sizeof(attr.fs)
	if lp.ABI >= 4 {
		size += unsafe.Sizeof(attr.net)
		if lp.DenyTCP {
			attr.net = unix.LANDLOCK_ACCESS_NET_BIND_TCP | unix.LANDLOCK_ACCESS_NET_CONNECT_TCP
		}
	}
	if lp.ABI >= 6 {
		size += unsafe.Sizeof(attr.scoped)
		if lp.Scoped {
			attr.scoped = unix.LANDLOCK_SCOPE_SIGNAL | unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
		}
	}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0)
	if errno != 0 {
		return nil, fmt.Errorf("jail: landlock_create_ruleset (ABI %d): %w", lp.ABI, errno)
	}
	rs := os.NewFile(fd, "warden-landlock-ruleset")
	unix.CloseOnExec(int(fd))
	for _, r := range lp.Rules {
		if err := addPathRule(int(fd), r.Path, r.bits&attr.fs); err != nil {
			rs.Close()
			return nil, fmt.Errorf("jail: landlock rule for %s (%s): %w", r.Path, r.Why, err)
		}
	}
	return rs, nil
}

func addPathRule(ruleset int, path string, access uint64) error {
	f, err := os.OpenFile(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		access &= llFileRights
	}
	if access == 0 {
		return errors.New("no right left to grant")
	}
	pb := unix.LandlockPathBeneathAttr{Allowed_access: access, Parent_fd: int32(f.Fd())}
	// struct landlock_path_beneath_attr is packed: 12 bytes, which the
	// Go struct's layout (u64 then s32) matches up to its padding.
	_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&pb)), 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}
