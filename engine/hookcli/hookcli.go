// Package hookcli is the one implementation of the shell helper verbs a
// hook runs from inside its jail (`warden hook context|log|secret|config|
// call|confirm|result`, and the jail's own `egress-bridge`). Two binaries
// serve them: the full `warden` (cmd/warden mounts Commands under its
// `hook` verb) and the small in-jail helper `warden-hook` (cmd/warden-hook,
// through Main), which links only this package and the protocol client
// (hookkit), not cobra, so that a hook's call starts like a small program.
//
// Exit codes: 0 success; 1 when the engine threw or refused (stderr says
// `warden: <code>: <message>`) or could not be reached; 2 on usage, which
// includes not running inside a hook at all. `hook confirm` is the one
// exception: its status is the operator's answer (0 yes, 1 no, 3 no answer).
package hookcli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/wardenhq/warden/engine/sdk/hookkit"
	"github.com/wardenhq/warden/engine/termsafe"
)

// Env is what the verbs read and write. JSON points at the global --json
// flag: the verbs read it, and turn it off for their errors (a helper's
// errors go to stderr as plain text even under --json, since its stdout
// is the value a hook script captures).
type Env struct {
	Stdout io.Writer
	Stderr io.Writer
	Stdin  io.Reader
	JSON   *bool
}

// ExitError carries a specific exit code; with a nil Err it prints no
// message of its own (the verb has already said everything).
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return ""
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// UsageError is a usage mistake: exit 2.
type UsageError struct{ error }

type usageError = UsageError

// Usage wraps err as a UsageError.
func Usage(err error) error { return UsageError{err} }

// IsUsage reports whether err is (or wraps) a UsageError.
func IsUsage(err error) bool {
	var ue UsageError
	return errors.As(err, &ue)
}

type cli struct{ *Env }

// Commands are the helper verbs, to be added under a `hook` command.
func Commands(env *Env) []*Command {
	if env.JSON == nil {
		env.JSON = new(bool)
	}
	a := &cli{env}
	return []*Command{
		a.hookContextCommand(),
		a.hookLogCommand(),
		a.hookStoreCommand("secret", "secrets", "visit_token"),
		a.hookStoreCommand("config", "config", "greeting_word"),
		a.hookCallCommand(),
		a.hookConfirmCommand(),
		a.hookResultCommand(),
		a.hookEgressBridgeCommand(),
	}
}

// Global flag help, the same words in both binaries so that a verb's
// --help reads the same whichever of them answers.
const (
	DataDirUsage = "data directory (default $WARDEN_DATA_DIR, else $XDG_STATE_HOME/warden)"
	JSONUsage    = "print machine-readable JSON"
	InitUsage    = "create the data dir named by --data-dir or WARDEN_DATA_DIR even when its parent dir is missing too (else refused: it is likelier a typo)"
)

// Main is the in-jail helper binary: `warden hook VERB ...` with the
// helper verbs only. It answers as the full binary's verbs do (same
// output, same exit codes, same --help) and returns the exit code.
func Main(argv []string, version string, stdin io.Reader, stdout, stderr io.Writer) int {
	if level, msg, ok := plainLog(argv); ok {
		return exitCode(hookErr(hookkit.SendLog(level, msg)), false, stdout, stderr)
	}
	var asJSON bool
	env := &Env{Stdout: stdout, Stderr: stderr, Stdin: stdin, JSON: &asJSON}
	var dataDir string
	var initDir bool // accepted as the full binary accepts it; the helper opens no data dir
	hook := &Command{
		Use:   "hook",
		Short: "Inside a hook, talk to the engine",
		Long: `Inside a running hook (WARDEN_SOCKET and WARDEN_TOKEN set), these verbs are
the shell helper: context, log, secret, config, call, confirm, result. They
exit 0 on success, 1 when the engine threw (message on stderr), 2 on usage.`,
		Subs: Commands(env),
	}
	root := &Command{
		Use:   "warden",
		Short: "The warden helper inside a hook's jail",
		Long: `This is warden-hook, the small helper a jailed hook finds as ` + "`warden`" + ` on its
PATH. It has the verbs a hook uses to talk to the engine:
` + "`warden hook context|log|secret|config|call|confirm|result`" + `. The
operator's verbs are in the full warden binary, outside the jail.`,
		Flags: []Flag{
			{Name: "data-dir", String: &dataDir, Usage: DataDirUsage},
			{Name: "init", Bool: &initDir, Usage: InitUsage},
			{Name: "json", Bool: &asJSON, Usage: JSONUsage},
		},
		Subs: []*Command{hook},
	}
	return exitCode(Execute(root, version, argv, stdout), asJSON, stdout, stderr)
}

// exitCode reports err as the full binary does and returns the exit code.
func exitCode(err error, asJSON bool, stdout, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	code := 1
	var ee *ExitError
	if errors.As(err, &ee) {
		code, err = ee.Code, ee.Err
	} else if IsUsage(err) {
		code = 2
	}
	if err != nil && err.Error() != "" {
		if asJSON {
			emitJSON(stdout, map[string]any{"error": err.Error()})
		} else {
			// An error may quote a hook's or module's text.
			fmt.Fprintln(stderr, "warden: "+termsafe.Text(err.Error()))
		}
	}
	return code
}

// emitJSON prints v as the full binary's --json does: indented, with the
// runes a terminal could act on escaped.
func emitJSON(w io.Writer, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(termsafe.JSON(buf.Bytes()))
	return err
}
