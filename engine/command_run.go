package engine

// A command run (`warden run -- CMD`) is a hook run of the operator's
// own program: no module, the program and its package tree bound
// read-only at their host paths, the workspace and a private home
// read-write at theirs, network only to the hosts the operator (or the
// profile they chose) named, through the run's egress proxy. It is
// recorded as a run of the reserved module "run", hook = the profile
// ("command" without one), so it shows in `hook runs`, the console and
// receipts as any run does; its network decisions are the policy of
// "profile:NAME".

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/wardenhq/warden/engine/egress"
	"github.com/wardenhq/warden/engine/hooks"
	"github.com/wardenhq/warden/engine/jail"
	"github.com/wardenhq/warden/storage"
)

// RunModule is the module id command runs are recorded under, and the
// scope of the secrets `--secret-env` reads (`warden secrets set run
// NAME`). No module may be added with this id.
const RunModule = "run"

// NoProfile is the hook name of a command run without a profile.
const NoProfile = "command"

// DefaultCommandTimeout bounds a command run whose profile sets none: an
// agent session is long, but never unbounded. MaxCommandTimeout bounds
// what a profile or --timeout may ask.
const (
	DefaultCommandTimeout = 24 * time.Hour
	MaxCommandTimeout     = 30 * 24 * time.Hour
)

// CommandRun asks for a run of the operator's own program. The CLI
// resolves what only it can see (the operator's PATH, working dir and
// environment); the engine checks every path again and owns the home.
type CommandRun struct {
	// Profile is the profile's name ("" for none): the run's hook name,
	// its home's name and its policy subject ("profile:NAME").
	Profile string
	// Argv is the command as given; Exe is Argv[0] found on the
	// operator's PATH, symlinks resolved.
	Argv []string
	Exe  string
	// Binds are the read-only paths the program needs, each with why.
	Binds []jail.Bind
	// Workspace is bound read-write; the program starts there.
	Workspace string
	// FreshHome: an empty home, removed when the run ends, instead of
	// the profile's kept one.
	FreshHome bool
	// Hosts are the names the program may reach (the profile's and
	// --allow-host), as egress destinations; Loopback the host's own
	// loopback ports it may reach (--allow-host localhost:PORT).
	Hosts    []string
	Loopback []uint16
	// Env is set in the program's environment as given (--env and the
	// profile's env names, valued from the operator's environment).
	Env map[string]string
	// SetEnv is the profile's fixed values, set after Env; "$HOME" and
	// "$TMPDIR" in them are the jail's.
	SetEnv map[string]string
	// SecretEnv sets NAME from the secret SECRET of module "run": the
	// value is read by the engine and appears nowhere but there.
	SecretEnv map[string]string
	// Timeout bounds the run (0: DefaultCommandTimeout).
	Timeout time.Duration
}

// Subject is the policy subject of the run's network decisions.
func (c *CommandRun) Subject() string { return "profile:" + c.hookName() }

// HomeName is the name of the run's kept home under the data dir's
// homes/ (and its hook name): the profile, or NoProfile.
func (c *CommandRun) HomeName() string { return c.hookName() }

func (c *CommandRun) hookName() string {
	if c.Profile == "" {
		return NoProfile
	}
	return c.Profile
}

// maxCommandArgs bounds a command's argv as a run records it.
const maxCommandArgs = 4096

// preflightCommand is preflight for a command run: the program and its
// paths, the network names, the env names, the secrets.
func (e *Engine) preflightCommand(actor Actor, req RunRequest) (pf preflighted, err error) {
	c := req.Command
	if err := e.authorize(actor, "run "+strings.Join(c.Argv, " ")); err != nil {
		return pf, err
	}
	if len(c.Argv) == 0 || c.Argv[0] == "" {
		return pf, errors.New("no command to run: give one after --")
	}
	if len(c.Argv) > maxCommandArgs {
		return pf, fmt.Errorf("%d arguments: at most %d", len(c.Argv), maxCommandArgs)
	}
	if c.Profile != "" && !ValidProfileName(c.Profile) {
		return pf, fmt.Errorf("bad profile name %q: want lower-case letters, digits, - and _", c.Profile)
	}
	if c.Profile == "" {
		// A home kept for every run without a profile would carry what
		// one command planted (a .bashrc, a .gitconfig) into the next,
		// unrelated one: without a profile the home is fresh.
		c.FreshHome = true
	}
	home, err := e.commandHome(c, "")
	if err != nil {
		return pf, err
	}
	jc := &jail.Command{Exe: c.Exe, Binds: c.Binds, Workspace: c.Workspace, Home: home}
	opHome, _ := os.UserHomeDir()
	if err := jail.CheckCommand(jc, e.DataDir(), opHome); err != nil {
		return pf, err
	}
	for _, env := range []map[string]string{c.Env, c.SetEnv} {
		for k, v := range env {
			if !validEnvName(k) || strings.ContainsRune(v, 0) {
				return pf, fmt.Errorf("environment variable %q: want a name of letters, digits and _, and a value with no NUL", k)
			}
		}
	}
	for k, s := range c.SecretEnv {
		if !validEnvName(k) || !hooks.ValidSecretName(s) {
			return pf, fmt.Errorf("--secret-env %s=%s: want NAME=SECRET, a secret of module %q (`warden secrets set %s %s`)", k, s, RunModule, RunModule, s)
		}
	}
	hosts, err := egress.ParseList(c.Hosts)
	if err != nil {
		return pf, fmt.Errorf("network: %w", err)
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultCommandTimeout
	}
	if timeout > MaxCommandTimeout {
		return pf, fmt.Errorf("a timeout of %s: at most %s", timeout, MaxCommandTimeout)
	}
	hook := &hooks.Hook{Name: c.hookName(), Run: c.Argv, Timeout: timeout, KillGrace: hooks.DefaultKillGrace,
		Egress: len(hosts) > 0 || len(c.Loopback) > 0, Destinations: hosts.Strings(),
		// An agent is a large program: the operator's ceiling, not a
		// hook's defaults.
		Limits: e.ceiling()}
	m := &hooks.Manifest{ID: RunModule, Hooks: map[string]*hooks.Hook{hook.Name: hook}}
	pf = preflighted{m: m, hook: hook, inputs: map[string]any{}, command: jc}
	mode := e.jailModeOf(req)
	if mode == JailOff {
		return pf, errors.New("warden run always jails its command: --jail off is for hooks; use --jail auto, bwrap or landlock")
	}
	if !jail.ValidMode(mode) {
		return pf, fmt.Errorf("unknown jail mode %q (want auto, bwrap or landlock)", mode)
	}
	if pf.jail, err = e.jails.Choose(mode); err != nil {
		return pf, err
	}
	if hook.Egress && pf.jail.Name() == JailLandlock {
		return pf, fmt.Errorf("this warden run names hosts (%s), and the landlock backend cannot hold a network to names: with no network namespace of its own the command shares the host's network stack, and Landlock filters TCP ports, not addresses, so the proxy could not be the only way out. Run it under bwrap (--jail bwrap), or name no host", namesOrNone(append(hosts.Strings(), loopbackNames(c.Loopback)...)))
	}
	if uid := pf.jail.UID(); uid != os.Geteuid() && !writableBy(c.Workspace, uid) {
		return pf, fmt.Errorf("warden runs as root, so the command runs as uid %d, as hooks do, and the workspace %s is not writable by it: run warden as your own user, or give the command a workspace it may write (chown -R %d DIR)", uid, c.Workspace, uid)
	}
	if err := e.auth.Err(); err != nil {
		return pf, err
	}
	return pf, nil
}

// writableBy: uid may write dir, by its owner or its other bits.
func writableBy(dir string, uid int) bool {
	st, err := os.Stat(dir)
	if err != nil {
		return false
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	return ok && ((int(sys.Uid) == uid && st.Mode()&0o200 != 0) || st.Mode()&0o002 != 0)
}

// ValidProfileName: name can name a profile (and so a hook and a home).
func ValidProfileName(name string) bool { return hooks.ValidHookName(name) }

func validEnvName(k string) bool {
	if k == "" || len(k) > 256 || (k[0] >= '0' && k[0] <= '9') {
		return false
	}
	for _, c := range k {
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return !strings.HasPrefix(k, "WARDEN_")
}

// commandHome makes the run's HOME (0700): the profile's, kept in the
// data dir (homes/NAME) from one session to the next, or a fresh one in
// the run's dir, removed at the run's end. runDir "" only names it.
func (e *Engine) commandHome(c *CommandRun, runDir string) (string, error) {
	switch {
	case c.FreshHome && runDir == "":
		return filepath.Join(e.DataDir(), "runs", "RUN", "home"), nil
	case c.FreshHome:
		home := filepath.Join(runDir, "home")
		return home, os.Mkdir(home, 0o700)
	}
	homes := filepath.Join(e.DataDir(), "homes")
	home := filepath.Join(homes, c.hookName())
	if runDir == "" {
		return home, nil
	}
	if err := os.MkdirAll(homes, 0o700); err != nil {
		return "", fmt.Errorf("cannot make the homes dir: %w", err)
	}
	if err := os.Mkdir(home, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("cannot make the session's home %s: %w", home, err)
	}
	return home, nil
}

// commandDetails are a command run's part of its start receipt: what it
// ran and what it was given, never an env value.
func commandDetails(c *CommandRun, jc *jail.Command) map[string]any {
	binds := make([]string, len(jc.Binds))
	for i, b := range jc.Binds {
		binds[i] = b.Path
	}
	d := map[string]any{"command": c.Argv, "exe": jc.Exe, "workspace": jc.Workspace, "home": jc.Home, "binds": binds,
		"freshHome": c.FreshHome, "env": namesOf(c.Env, c.SetEnv), "secretEnv": namesOf(c.SecretEnv)}
	if c.Profile != "" {
		d["profile"] = c.Profile
	}
	if len(c.Loopback) > 0 {
		d["loopback"] = c.Loopback
	}
	return d
}

// namesOf is the maps' keys, sorted, each once; [] rather than null when
// there are none.
func namesOf(ms ...map[string]string) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, slices.Collect(maps.Keys(m))...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// commandEnv sets the run's own variables over env: the CommandRun's Env
// (with $HOME and $TMPDIR the jail's) and its secrets, read now.
func (e *Engine) commandEnv(env []string, c *CommandRun, jailEnv map[string]string) ([]string, error) {
	set := maps.Clone(c.Env)
	if set == nil {
		set = map[string]string{}
	}
	for k, v := range c.SetEnv {
		set[k] = os.Expand(v, func(name string) string {
			switch name {
			case "HOME", "TMPDIR":
				return jailEnv[name]
			}
			return "$" + name
		})
	}
	if len(c.SecretEnv) > 0 {
		if err := e.store.View(func(tx *storage.Tx) error {
			for k, s := range c.SecretEnv {
				v, ok, err := tx.SecretGet(RunModule, s)
				if err != nil {
					return err
				}
				if !ok {
					return fmt.Errorf("--secret-env %s: no secret %q is set for warden run (set it with `warden secrets set %s %s`)", k, s, RunModule, s)
				}
				set[k] = v
			}
			return nil
		}); err != nil {
			return nil, err
		}
	}
	return jail.SetEnv(env, set), nil
}

// what is what a start receipt says was run: module/hook, or for a
// command run its command line (bounded: the whole argv is in the
// receipt's details).
func (r *activeRun) what() string {
	if r.command == nil {
		return r.rec.Module + "/" + r.rec.Hook
	}
	line := strings.Join(r.command.Argv, " ")
	if len(line) > 120 {
		line = strings.ToValidUTF8(line[:120], "") + "…"
	}
	return fmt.Sprintf("%s/%s: %q", r.rec.Module, r.rec.Hook, line)
}

// loopbackNames are the loopback ports as --allow-host names them.
func loopbackNames(ports []uint16) []string {
	out := make([]string, len(ports))
	for i, p := range ports {
		out[i] = fmt.Sprintf("localhost:%d", p)
	}
	return out
}

// commandNote is what a command run's start receipt adds: the loopback
// ports it may reach, loud, as the operator asked for each.
func commandNote(c *CommandRun) string {
	if c == nil || len(c.Loopback) == 0 {
		return ""
	}
	ports := make([]string, len(c.Loopback))
	for i, p := range c.Loopback {
		ports[i] = fmt.Sprint(p)
	}
	return ", LOOPBACK: the host's localhost port " + strings.Join(ports, ", ")
}
