// Command warden is the operator console and its headless CLI.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"warden/engine"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

// app holds the global flags and the streams every command writes to.
type app struct {
	dataDir string
	json    bool
	stdout  io.Writer
	stderr  io.Writer
	stdin   io.Reader
}

// exitError carries a specific exit code (e.g. 1 for a broken chain)
// without an extra message when msg is empty.
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
	if errors.As(err, &ee) {
		code = ee.code
		err = ee.err
	} else if isUsage(err) {
		code = 2
	}
	if err != nil && err.Error() != "" {
		if a.json {
			a.emitJSON(map[string]any{"error": err.Error()})
		} else {
			fmt.Fprintln(a.stderr, "warden: "+err.Error())
		}
	}
	return code
}

type usageError struct{ error }

func isUsage(err error) bool {
	var ue usageError
	return errors.As(err, &ue)
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
	root.PersistentFlags().StringVar(&a.dataDir, "data-dir", "", "data directory (default $WARDEN_DATA_DIR, else $XDG_STATE_HOME/warden)")
	root.PersistentFlags().BoolVar(&a.json, "json", false, "print machine-readable JSON")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError{fmt.Errorf("%w\nsee `%s --help`", err, c.CommandPath())}
	})
	root.AddCommand(
		a.receiptsCommand(),
		a.secretsCommand(),
		a.configCommand(),
		a.trustCommand(),
		a.doctorCommand(),
		a.moduleCommand(),
		a.hookCommand(),
		a.permsCommand(),
		a.handsCommand(),
		a.serveCommand(),
		a.mcpCommand(),
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
	e, err := a.openEngine()
	if err != nil {
		return err
	}
	defer e.Close()
	return fn(e)
}

func (a *app) emitJSON(v any) error {
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func (a *app) printf(format string, args ...any) {
	fmt.Fprintf(a.stdout, format, args...)
}
