package engine

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/wardenhq/warden/engine/hooks"
	"github.com/wardenhq/warden/engine/jail"
	"github.com/wardenhq/warden/storage"
)

// jailHelper is the binary bound read-only into the jail as `warden`:
// warden-hook beside this binary when it is admitted, else this binary
// (jail.FindHelper). It is looked for at each run: a few lstat calls,
// and an operator who installs or removes warden-hook needs no restart.
func jailHelper() jail.Helper { return jail.FindHelper(wardenBinary()) }

// jailHelper is the package's jailHelper, or the test's Options.helper.
func (e *Engine) jailHelper() jail.Helper {
	if e.opts.helper != "" {
		return jail.Helper{Path: e.opts.helper, Small: filepath.Base(e.opts.helper) == jail.HelperName, Why: "set by the test"}
	}
	return jailHelper()
}

// wardenBinary is this binary.
func wardenBinary() string {
	exe, err := thisBinary()
	if err != nil {
		return "/proc/self/exe"
	}
	return exe
}

// thisBinary is the path of this process's binary, symlinks resolved,
// found once: it is the file this process was started from, which does
// not change while it runs (a run paid a readlink and a path walk for it,
// twice).
var thisBinary = sync.OnceValues(func() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	if real, err := filepath.EvalSymlinks(exe); err == nil {
		exe = real
	}
	return exe, nil
})

// pathInputs lists the hook's declared path inputs with their values.
func pathInputs(h *hooks.Hook, inputs map[string]any) []jail.PathInput {
	var out []jail.PathInput
	for _, name := range slices.Sorted(maps.Keys(h.Inputs)) {
		t := h.Inputs[name]
		if t.Kind != "path" {
			continue
		}
		if v, ok := inputs[name].(string); ok {
			out = append(out, jail.PathInput{Name: name, Path: v, RW: t.RW})
		}
	}
	return out
}

// inputNames lists the run's input names, sorted; [] rather than null
// when there are none (the start receipt's details).
func inputNames(inputs map[string]any) []string {
	names := slices.Sorted(maps.Keys(inputs))
	if names == nil {
		names = []string{}
	}
	return names
}

// JailName is a run's jail as receipts and the CLI show it: the
// backend's name, or "OFF".
func JailName(mode string) string {
	if mode == JailOff {
		return "OFF"
	}
	return mode
}

// RunNote is what a run's start receipt says of its jail in parentheses:
// "jail bwrap", "jail landlock, limits: rlimit", "jail OFF".
func RunNote(jail, limits string) string {
	return "jail " + JailName(jail) + limitsNote(limits)
}

// jailModeOf is the jail mode req asks for: its own, else the engine's
// (config.yaml `jail:`), else auto.
func (e *Engine) jailModeOf(req RunRequest) string {
	switch {
	case req.Jail != "":
		return req.Jail
	case e.opts.Jail != "":
		return e.opts.Jail
	}
	return JailAuto
}

// JailBackend is the backend a run asked for with mode ("" for the
// engine's own) would get on this host, or why none can run: what the
// console's header shows.
func (e *Engine) JailBackend(mode string) (string, error) {
	switch mode = e.jailModeOf(RunRequest{Jail: mode}); {
	case mode == JailOff:
		return JailOff, nil
	case !jail.ValidMode(mode):
		return "", fmt.Errorf("unknown jail mode %q (want auto, bwrap, landlock or off)", mode)
	}
	return e.jails.Name(mode)
}

// hiddenFromHooks are the paths no landlock rule may hold: the data dir
// (other runs, the store, the trust root) and the operator's home.
func hiddenFromHooks(dataDir string) []string {
	hidden := []string{dataDir}
	if home, err := os.UserHomeDir(); err == nil && home != "" && home != "/" {
		hidden = append(hidden, home)
	}
	return hidden
}

// checkPathInputs refuses, under every backend, a path input that
// reaches into (or holds) what no hook may see: the data dir, the
// operator's home, another module's dir (jail.CheckInputs). The module
// list is read only when the hook has a path input.
func (e *Engine) checkPathInputs(self string, h *hooks.Hook, inputs map[string]any) error {
	in := pathInputs(h, inputs)
	if len(in) == 0 {
		return nil
	}
	// The most specific first: a module dir in the home is named as the
	// module's.
	secrets := []jail.Secret{{Path: e.DataDir(), What: "warden's data dir"}}
	var mods []ModuleRecord
	if err := e.store.View(func(tx *storage.Tx) (err error) {
		mods, err = tx.Modules()
		return err
	}); err != nil {
		return err
	}
	for _, m := range mods {
		if m.ID != self {
			secrets = append(secrets, jail.Secret{Path: m.Path, What: "module " + m.ID + "'s dir"})
		}
	}
	if home, err := os.UserHomeDir(); err == nil && home != "" && home != "/" {
		secrets = append(secrets, jail.Secret{Path: home, What: "the operator's home"})
	}
	return jail.CheckInputs(in, secrets)
}

// ValidJailMode: mode is auto, bwrap or landlock (the modes config.yaml
// may set; off is only ever asked for per run).
func ValidJailMode(mode string) bool { return jail.ValidMode(mode) }
