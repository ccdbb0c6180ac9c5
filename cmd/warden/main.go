// Command warden is the operator console and its headless CLI.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/engine/hookcli"
	"github.com/wardenhq/warden/engine/termsafe"
	"github.com/wardenhq/warden/storage"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

// app holds the global flags and the streams every command writes to.
type app struct {
	dataDir string
	init    bool // make a chosen data dir even where its parent is missing
	json    bool
	stdout  io.Writer
	stderr  io.Writer
	stdin   io.Reader
}

// exitError carries a specific exit code (e.g. 1 for a broken chain);
// with a nil err it prints no message of its own (the command has already
// said everything).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return ""
	}
	return e.err.Error()
}

func main() {
	a := &app{stdout: os.Stdout, stderr: os.Stderr, stdin: os.Stdin}
	os.Exit(a.run(os.Args[1:]))
}

func (a *app) run(args []string) int {
	root := a.rootCommand()
	refuseUnknownVerbs(root)
	root.SetArgs(args)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	err := root.Execute()
	if err == nil {
		return 0
	}
	code := 1
	var ee *exitError
	var he *hookcli.ExitError
	if errors.As(err, &ee) {
		code = ee.code
		err = ee.err
	} else if errors.As(err, &he) {
		code = he.Code
		err = he.Err
	} else if isUsage(err) {
		code = 2
	}
	if err != nil && err.Error() != "" {
		if a.json {
			a.emitJSON(map[string]any{"error": err.Error()})
		} else {
			// An error may quote a hook's or module's text.
			fmt.Fprintln(a.stderr, "warden: "+termsafe.Text(err.Error()))
		}
	}
	return code
}

type usageError struct{ error }

func isUsage(err error) bool {
	var ue usageError
	return errors.As(err, &ue) || hookcli.IsUsage(err)
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "warden",
		Short: "Operator console for jailed module hooks, hands containers and permission requests",
		Long: `warden runs module hooks inside a jail and talks to them through a broker,
sets up and tears down Docker "hands" containers, and records every action
in a hash-chained receipt log. Every verb has --json output for scripts.

The data dir defaults to $XDG_STATE_HOME/warden (else ~/.local/state/warden);
override it with --data-dir or WARDEN_DATA_DIR.`,
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&a.dataDir, "data-dir", "", hookcli.DataDirUsage)
	root.PersistentFlags().BoolVar(&a.json, "json", false, hookcli.JSONUsage)
	root.PersistentFlags().BoolVar(&a.init, "init", false, hookcli.InitUsage)
	root.SetFlagErrorFunc(flagError)
	root.AddCommand(
		a.receiptsCommand(),
		a.secretsCommand(),
		a.configCommand(),
		a.trustCommand(),
		a.doctorCommand(),
		a.moduleCommand(),
		a.hookCommand(),
		a.runCommand(),
		a.permsCommand(),
		a.handsCommand(),
		a.serveCommand(),
		a.mcpCommand(),
		a.fleetCommand(),
	)
	a.attachConsole(root)
	return root
}

// args wraps cobra's arg validators so a wrong count is a usage error (exit 2).
func args(v cobra.PositionalArgs) cobra.PositionalArgs {
	return func(c *cobra.Command, a []string) error {
		if err := v(c, a); err != nil {
			return usageError{fmt.Errorf("%w\nusage: %s", err, c.UseLine())}
		}
		return nil
	}
}

// withEngine runs fn on the engine (attached or opened here, see
// openEngine) and lets go of it after.
func (a *app) withEngine(fn func(engine.Facade) error) error {
	fresh := a.dataDirState()
	e, err := a.openEngine()
	if err != nil {
		return err
	}
	defer e.Close()
	a.sayDataDir(e, fresh)
	return fn(e)
}

// withEngineModule is withEngine for a verb about one module: it looks
// that module up (mod is nil when the store has none of that id, or it
// cannot be read) and hands it over with the engine. A module found says
// the data dir is the one meant, so only a miss asks for every module
// (sayDataDir): each of those asks re-reads every module's manifest.
func (a *app) withEngineModule(id string, fn func(e engine.Facade, mod *engine.Module) error) error {
	fresh := a.dataDirState()
	e, err := a.openEngine()
	if err != nil {
		return err
	}
	defer e.Close()
	mod, err := e.Module(id)
	if err != nil {
		mod = nil
		a.sayDataDir(e, fresh)
	}
	return fn(e, mod)
}

// checkChosenDataDir refuses a data dir named by --data-dir or
// WARDEN_DATA_DIR that does not exist and whose parent does not exist
// either, unless --init: a typo there would otherwise quietly make a new,
// empty store. The default dir is made with its parents, as ever.
func (a *app) checkChosenDataDir() error {
	which := "--data-dir"
	if a.dataDir == "" {
		if os.Getenv("WARDEN_DATA_DIR") == "" {
			return nil
		}
		which = "WARDEN_DATA_DIR"
	}
	if a.init {
		return nil
	}
	dir, err := engine.ResolveDataDir(a.dataDir)
	if err != nil {
		return nil
	}
	parent := filepath.Dir(dir)
	if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if _, err := os.Lstat(parent); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return fmt.Errorf("data dir %s does not exist, nor does its parent %s: is %s mistyped? Check it; to make a new data dir there, parents and all, add --init", safe(dir), safe(parent), which)
}

// dataDirState says whether opening the data dir will make its store:
// "new" when the dir does not exist yet, "no store yet" when it exists
// without a warden.db, "" when it has one (or cannot be looked at).
func (a *app) dataDirState() string {
	dir, err := engine.ResolveDataDir(a.dataDir)
	if err != nil {
		return ""
	}
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return "new"
	}
	if _, err = os.Lstat(filepath.Join(dir, storage.DBFile)); errors.Is(err, fs.ErrNotExist) {
		return "no store yet"
	}
	return ""
}

// sayDataDir names the data dir on stderr when it is new or holds no
// module: a verb run with the wrong (or no) WARDEN_DATA_DIR then says
// where it looked, instead of quietly answering from an empty store.
// Never in --json (stdout stays the answer; stderr is for people).
func (a *app) sayDataDir(e engine.Facade, state string) {
	if a.json {
		return
	}
	what := state
	if what == "" {
		if mods, err := e.Modules(); err != nil || len(mods) > 0 {
			return
		}
		what = "no modules yet"
	}
	fmt.Fprintf(a.stderr, "warden: data dir %s (%s); another is chosen with --data-dir or WARDEN_DATA_DIR\n", safe(e.DataDir()), what)
}

// sayNewDataDir is sayDataDir's first line for the verbs that open the
// data dir themselves (doctor, serve, mcp serve). A dir that exists but
// breaks the policy gets no line: the refusal says what it is.
func (a *app) sayNewDataDir() {
	state := a.dataDirState()
	if a.json || state == "" {
		return
	}
	dir, err := engine.ResolveDataDir(a.dataDir)
	if err != nil {
		return
	}
	if state != "new" && storage.CheckDir(dir) != nil {
		return
	}
	fmt.Fprintf(a.stderr, "warden: data dir %s (%s); another is chosen with --data-dir or WARDEN_DATA_DIR\n", safe(dir), state)
}

// emitJSON prints v as indented JSON. The values are exact; the runes a
// terminal could act on that encoding/json leaves raw (DEL, C1 controls,
// bidi and other format characters) are written as \u escapes, so --json
// on a terminal is as safe as the human output.
func (a *app) emitJSON(v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := a.stdout.Write(termsafe.JSON(buf.Bytes()))
	return err
}

// printf prints human output. Whatever the fields, nothing but its line
// breaks reaches the terminal as a control: this is the net under the
// per-field escaping (safe), which also keeps a field on its line.
func (a *app) printf(format string, args ...any) {
	fmt.Fprint(a.stdout, termsafe.Text(fmt.Sprintf(format, args...)))
}

// safe is a string a hook, a module author or any other party outside
// this process controls, escaped for one line of the terminal (a newline
// in it shows as ␊). Table cells and one-line fields go through it.
func safe(s string) string { return termsafe.String(s) }
