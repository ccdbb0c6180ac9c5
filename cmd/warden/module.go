package main

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/engine/hooks"
)

func (a *app) moduleCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "module",
		Short: "Register, list, show and remove modules (folders with a module.yaml)",
	}
	add := &cobra.Command{
		Use:   "add PATH",
		Short: "Admit a module folder and register it",
		Long: `add holds the folder to the admission rules (absolute, canonical, owned by
root or you, no group- or world-writable ancestor), decodes module.yaml
strictly and registers the module under its id.`,
		Example: `  warden module add "$(realpath examples/modules/hello)"`,
		Args:    args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			return a.withEngine(func(e engine.Facade) error {
				m, err := e.AddModule(engine.LocalActor(), argv[0])
				if err != nil {
					return err
				}
				return a.done(m, "module %s %s added from %s (%d hooks: %s)\n", safe(m.Manifest.ID), safe(m.Manifest.Version), safe(m.Record.Path), len(m.Manifest.Hooks), hookList(m.Manifest))
			})
		},
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List registered modules",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withEngine(func(e engine.Facade) error {
				ms, err := e.Modules()
				if err != nil {
					return err
				}
				if a.json {
					if ms == nil {
						ms = []engine.Module{}
					}
					return a.emitJSON(ms)
				}
				if len(ms) == 0 {
					a.printf("no modules yet: add one with `warden module add PATH`\n")
					return nil
				}
				tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tVERSION\tHOOKS\tPATH")
				for _, m := range ms {
					hooks := "PROBLEM: " + oneLine(m.Problem, 200)
					if m.Manifest != nil {
						hooks = hookList(m.Manifest)
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", safe(m.Record.ID), safe(m.Record.Version), hooks, safe(m.Record.Path))
				}
				return tw.Flush()
			})
		},
	}
	show := &cobra.Command{
		Use:   "show ID",
		Short: "Show a module's manifest as read now",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			return a.withEngine(func(e engine.Facade) error {
				m, err := e.Module(argv[0])
				if err != nil {
					return err
				}
				if a.json {
					return a.emitJSON(m)
				}
				a.printf("id       %s\npath     %s\nversion  %s\n", safe(m.Record.ID), safe(m.Record.Path), safe(m.Record.Version))
				if m.Manifest == nil {
					a.printf("problem  %s\n", safe(m.Problem))
					return nil
				}
				mf := m.Manifest
				if mf.Description != "" {
					a.printf("about    %s\n", safe(mf.Description))
				}
				a.printf("secrets  %s\nconfig   %s\n", orNone(mf.Secrets), orNone(mf.Config))
				for _, name := range slices.Sorted(maps.Keys(mf.Hooks)) {
					h := mf.Hooks[name]
					a.printf("\nhook %s\n  run          %s\n  timeout      %s (idle %s)\n", safe(name), safe(strings.Join(h.Run, " ")), h.Timeout, h.IdleTimeout)
					if len(h.Requires) > 0 {
						a.printf("  requires     %s\n", safe(strings.Join(h.Requires, ", ")))
					}
					if len(h.Inputs) > 0 {
						a.printf("  inputs       %s\n", typeList(h.Inputs))
					}
					if len(h.Outputs) > 0 {
						a.printf("  outputs      %s\n", typeList(h.Outputs))
					}
					if h.Network {
						a.printf("  network      TRUE: the host's whole network, asked for (policy decides)\n")
					}
					if h.Egress {
						a.printf("  network      through the egress proxy, declares %s (policy decides each)\n", destList(h.Destinations))
					}
				}
				return nil
			})
		},
	}
	remove := &cobra.Command{
		Use:   "remove ID",
		Short: "Unregister a module (its secrets and config are kept)",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			return a.withEngine(func(e engine.Facade) error {
				if err := e.RemoveModule(engine.LocalActor(), argv[0]); err != nil {
					return err
				}
				return a.done(map[string]any{"id": argv[0], "removed": true}, "module %s removed (its secrets and config are kept)\n", argv[0])
			})
		},
	}
	c.AddCommand(add, list, show, remove)
	return c
}

func hookList(m *hooks.Manifest) string {
	return safe(strings.Join(slices.Sorted(maps.Keys(m.Hooks)), ", "))
}

func typeList(m map[string]hooks.Type) string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = n + ": " + m[n].String()
	}
	return safe(strings.Join(parts, ", "))
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return safe(strings.Join(s, ", "))
}
