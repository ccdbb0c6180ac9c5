package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/storage"
)

func (a *app) secretsCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "secrets",
		Short: "Set, list and delete module secrets (sealed at rest; values are never shown)",
		Long: `Secrets are sealed with seal.key (XChaCha20-Poly1305, fresh nonce per write),
bound to their module and name. Receipts record names only.`,
	}
	set := &cobra.Command{
		Use:   "set MODULE NAME",
		Short: "Set a secret; the value comes from stdin, or a no-echo prompt on a terminal",
		Example: `  warden secrets set hello bot_token            # prompts without echo
  printf %s "$TOKEN" | warden secrets set hello bot_token`,
		Args: args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			module, name := argv[0], argv[1]
			if err := storage.CheckName(module, name); err != nil {
				return usageError{err}
			}
			return a.withEngine(func(e engine.Facade) error {
				// A secret may be set before its module is added (the
				// token first, then the module that reads it), so an
				// unknown module is not refused; but it is named before
				// anything is asked of stdin, so that a typo in the
				// module reads as one, not as a problem with the value.
				unknown := ""
				if !moduleAdded(e, module) {
					unknown = fmt.Sprintf("no module %q is added (yet): the secret is kept for when one with that id is; check the id with `warden module list`", module)
					fmt.Fprintln(a.stderr, "note: "+safe(unknown))
				}
				value, err := a.readSecretValue(module, name)
				if err != nil {
					if unknown != "" {
						return fmt.Errorf("module %q is not added (check the id with `warden module list`), and %w", module, err)
					}
					return err
				}
				if err := e.SetSecret(engine.LocalActor(), module, name, value); err != nil {
					return err
				}
				return a.done(map[string]any{"module": module, "name": name, "set": true}, "secret %s/%s set\n", module, name)
			})
		},
	}
	list := &cobra.Command{
		Use:   "list MODULE",
		Short: "List a module's secret names",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			return a.withEngine(func(e engine.Facade) error {
				names, err := e.SecretNames(argv[0])
				if err != nil {
					return err
				}
				return a.printNames(names, "no secrets set for "+argv[0])
			})
		},
	}
	del := &cobra.Command{
		Use:   "delete MODULE NAME",
		Short: "Delete a secret",
		Args:  args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			return a.withEngine(func(e engine.Facade) error {
				existed, err := e.DeleteSecret(engine.LocalActor(), argv[0], argv[1])
				if err != nil {
					return err
				}
				if !existed {
					return a.done(map[string]any{"module": argv[0], "name": argv[1], "deleted": false}, "secret %s/%s was not set\n", argv[0], argv[1])
				}
				return a.done(map[string]any{"module": argv[0], "name": argv[1], "deleted": true}, "secret %s/%s deleted\n", argv[0], argv[1])
			})
		},
	}
	c.AddCommand(set, list, del)
	return c
}

// readSecretValue reads from a no-echo prompt on a terminal, else from
// stdin (one trailing newline dropped). An empty value is refused: it is
// almost always a mistake (an empty pipe).
func (a *app) readSecretValue(module, name string) (string, error) {
	if f, ok := a.stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprintf(a.stderr, "value for %s/%s (not echoed): ", module, name)
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(a.stderr)
		if err != nil {
			return "", err
		}
		if len(b) == 0 {
			return "", errors.New("empty value: nothing set")
		}
		return string(b), nil
	}
	b, err := io.ReadAll(io.LimitReader(a.stdin, storage.MaxValueSize+2))
	if err != nil {
		return "", err
	}
	v := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if len(v) > storage.MaxValueSize {
		return "", fmt.Errorf("value is longer than %d bytes: nothing set", storage.MaxValueSize)
	}
	if v == "" {
		return "", errors.New("empty value on stdin: nothing set (pipe the value in, or run on a terminal to be prompted)")
	}
	return v, nil
}

func (a *app) configCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "config",
		Short: "Set, get, list and delete module config values",
	}
	set := &cobra.Command{
		Use:     "set MODULE NAME VALUE",
		Short:   "Set a config value",
		Example: `  warden config set hello public_ip 203.0.113.7`,
		Args:    args(cobra.ExactArgs(3)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			return a.withEngine(func(e engine.Facade) error {
				if err := e.SetConfig(engine.LocalActor(), argv[0], argv[1], argv[2]); err != nil {
					return err
				}
				return a.done(map[string]any{"module": argv[0], "name": argv[1], "set": true}, "config %s/%s set\n", argv[0], argv[1])
			})
		},
	}
	get := &cobra.Command{
		Use:   "get MODULE NAME",
		Short: "Print a config value (exit 1 when it is not set)",
		Args:  args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			return a.withEngine(func(e engine.Facade) error {
				v, ok, err := e.Config(argv[0], argv[1])
				if err != nil {
					return err
				}
				if !ok {
					return fmt.Errorf("config %s/%s is not set (set it with `warden config set %s %s VALUE`)", argv[0], argv[1], argv[0], argv[1])
				}
				if a.json {
					return a.emitJSON(map[string]any{"module": argv[0], "name": argv[1], "value": v})
				}
				a.printf("%s\n", safe(v))
				return nil
			})
		},
	}
	list := &cobra.Command{
		Use:   "list MODULE",
		Short: "List a module's config names and values",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			return a.withEngine(func(e engine.Facade) error {
				m, err := e.ConfigAll(argv[0])
				if err != nil {
					return err
				}
				if a.json {
					return a.emitJSON(m)
				}
				if len(m) == 0 {
					a.printf("no config set for %s\n", argv[0])
					return nil
				}
				for _, n := range slices.Sorted(maps.Keys(m)) {
					a.printf("%s=%s\n", safe(n), safe(m[n]))
				}
				return nil
			})
		},
	}
	del := &cobra.Command{
		Use:   "delete MODULE NAME",
		Short: "Delete a config value",
		Args:  args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			return a.withEngine(func(e engine.Facade) error {
				existed, err := e.DeleteConfig(engine.LocalActor(), argv[0], argv[1])
				if err != nil {
					return err
				}
				if !existed {
					return a.done(map[string]any{"module": argv[0], "name": argv[1], "deleted": false}, "config %s/%s was not set\n", argv[0], argv[1])
				}
				return a.done(map[string]any{"module": argv[0], "name": argv[1], "deleted": true}, "config %s/%s deleted\n", argv[0], argv[1])
			})
		},
	}
	c.AddCommand(set, get, list, del)
	return c
}

// done prints a JSON object or a human line.
func (a *app) done(v any, format string, args ...any) error {
	if a.json {
		return a.emitJSON(v)
	}
	a.printf(format, args...)
	return nil
}

func (a *app) printNames(names []string, empty string) error {
	if a.json {
		if names == nil {
			names = []string{}
		}
		return a.emitJSON(names)
	}
	if len(names) == 0 {
		a.printf("%s\n", empty)
	}
	w := bufio.NewWriter(a.stdout)
	for _, n := range names {
		fmt.Fprintln(w, safe(n))
	}
	return w.Flush()
}

// moduleAdded reports whether a module with id is registered (true when
// that cannot be read: the note it guards is advice, not a check).
func moduleAdded(e engine.Facade, id string) bool {
	mods, err := e.Modules()
	if err != nil {
		return true
	}
	for _, m := range mods {
		if m.Record.ID == id {
			return true
		}
	}
	return false
}
