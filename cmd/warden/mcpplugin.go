package main

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/engine/mcpconf"
)

// mcpPluginCommand is `mcp plugin`: warden as the MCP server of an
// unpacked local plugin root (the Agent Plugins layout).
func (a *app) mcpPluginCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "plugin",
		Short: "Make warden the MCP server of an unpacked, operator-owned local plugin root",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageError{fmt.Errorf("name a subcommand: prepare")}
		},
	}
	c.AddCommand(a.mcpPluginPrepareCommand())
	return c
}

func (a *app) mcpPluginPrepareCommand() *cobra.Command {
	var name, wardenPath string
	var dryRun bool
	c := &cobra.Command{
		Use:   "prepare DIR [--name warden] [--warden PATH] [--dry-run]",
		Short: "Fill DIR/mcp.json, the plugin root's template, with one stdio server: this warden",
		Long: `Fill DIR/mcp.json, the template of an unpacked local plugin root (the
Agent Plugins layout), with one stdio server: this warden binary (its real,
absolute path, admitted like bubblewrap) running ` + "`mcp serve --data-dir DATA`" + `,
started in ` + mcpconf.PluginRootVar + ` (the host puts the plugin's root there).

The checks, each a refusal that names it and changes nothing:
  - DIR is absolute, canonical, yours and 0700;
  - DIR/mcp.json is a regular file (opened with O_NOFOLLOW), yours, with one
    link, at most 16 KiB, not group or world writable;
  - it holds exactly {"$schema": <an Agent Plugins MCP schema>, "mcpServers": {}}.
The new file is written beside it (O_EXCL, 0600), fsynced, and renamed over
it only if the template's device, inode, size and mtime are unchanged; the
temp file is removed on any failure. --dry-run prints what would be written.`,
		Example: "  warden mcp plugin prepare ~/plugins/warden --dry-run\n  warden mcp plugin prepare ~/plugins/warden",
		Args:    args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			root := argv[0]
			if !filepath.IsAbs(root) {
				if abs, err := filepath.Abs(root); err == nil {
					root = abs
				}
			}
			dir, err := engine.ResolveDataDir(a.dataDir)
			if err != nil {
				return err
			}
			entry, err := mcpServeEntry(wardenPath, dir)
			if err != nil {
				return err
			}
			prep, err := mcpconf.PreparePlugin(root, name, entry)
			if err != nil {
				return err
			}
			if !dryRun {
				if err := prep.Apply(); err != nil {
					return err
				}
			}
			if a.json {
				return a.emitJSON(map[string]any{"root": prep.Root, "file": prep.Path, "name": prep.Name, "schema": prep.Schema,
					"entry": prep.Entry, "dryRun": dryRun, "content": string(prep.After)})
			}
			if dryRun {
				a.printf("%s would be:\n%sdry run: nothing was changed\n", prep.Path, prep.After)
				return nil
			}
			a.printf("prepared %s: server %q runs %s mcp serve --data-dir %s, in %s\n", prep.Path, prep.Name, prep.Entry.Command, dir, mcpconf.PluginRootVar)
			a.printf("each tool call then waits for an operator: the console's Requests pane, or `warden perms list`\n")
			return nil
		},
	}
	c.Flags().StringVar(&name, "name", "warden", "the server's name in mcp.json")
	c.Flags().StringVar(&wardenPath, "warden", "", "the warden binary the server runs (default: this one, by its real path)")
	c.Flags().BoolVar(&dryRun, "dry-run", false, "print the new mcp.json; change nothing")
	return c
}
