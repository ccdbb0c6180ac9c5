package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/wardenhq/warden/cmd/serve/mcpgw"
	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/engine/mcpconf"
)

func (a *app) mcpCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "mcp",
		Short: "Put AI agents behind warden: serve hooks as MCP tools, and prepare MCP clients' configs",
		Long: `warden speaks the Model Context Protocol: an AI agent's MCP client (Claude
Code, Claude Desktop, Cursor, Codex...) starts ` + "`warden mcp serve`" + ` and sees one
tool per registered module hook. Every call is shown to a warden operator
(console Requests pane, ` + "`warden perms list`" + `), who approves it once, always,
or denies it with a reason; the hook then runs in the jail, and the agent
gets its outputs and last stream lines.`,
	}
	c.AddCommand(a.mcpServeCommand(), a.mcpInstallCommand(), a.mcpUninstallCommand(), a.mcpPluginCommand())
	return c
}

func (a *app) mcpServeCommand() *cobra.Command {
	var ttl time.Duration
	var tail int
	c := &cobra.Command{
		Use:   "serve",
		Short: "Serve the registered hooks as MCP tools over stdio (an MCP client starts this)",
		Long: `Serves MCP over stdin/stdout for the client that started it. Attaches to the
warden process holding the data dir (a console, ` + "`warden serve`" + `), or holds it
itself. One tool per hook, named <module>__<hook>; its input schema is the
hook's declared inputs.

Every call is gated: the client is the actor mcp:<clientInfo.name> (with
this serve's session id) in every receipt, and its policy (` + "`warden perms\npolicy show mcp:<name>`" + `) says which tools run without asking (none by
default). Any other call opens a permission request and waits, at most
--request-ttl, for an operator: approve, approve-always (this tool with
these arguments; ` + "`--tool`" + ` for the tool whatever its arguments) or deny with a
reason. With no operator attached (no console, local or over SSH) the call
is refused at once, and says so. Arguments that do not match the schema
are refused and nothing runs.

Nothing but MCP is written to stdout; diagnostics go to stderr.`,
		Args: args(cobra.NoArgs),
		RunE: func(c *cobra.Command, _ []string) error {
			if ttl <= 0 {
				return usageError{fmt.Errorf("--request-ttl must be positive, got %s", ttl)}
			}
			return a.mcpServe(ttl, tail)
		},
	}
	c.Flags().DurationVar(&ttl, "request-ttl", engine.DefaultMCPRequestTTL, "how long a call waits for the operator's decision")
	c.Flags().IntVar(&tail, "tail", 20, "how many of the run's last stream lines a result carries")
	return c
}

func (a *app) mcpServe(ttl time.Duration, tail int) error {
	a.sayNewDataDir()
	e, err := a.openEngine()
	if err != nil {
		return err
	}
	logf := func(format string, args ...any) { fmt.Fprintf(a.stderr, "warden: "+format+"\n", args...) }
	g := mcpgw.New(mcpgw.Options{Engine: e, Actor: engine.LocalActor(), TTL: ttl, Tail: tail, Version: version, Logf: logf})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	go func() {
		select {
		case <-sigs:
			noteStop()
			cancel()
		case <-ctx.Done():
		}
	}()
	// The engine we attached to may go away (its console quit, its serve
	// stopped): like an attached console, this serve then attaches to
	// the next holder or holds the data dir itself, and the MCP client
	// carries on.
	var mu sync.Mutex
	current := e
	defer func() {
		mu.Lock()
		current.Close()
		mu.Unlock()
	}()
	go func() {
		for {
			c, ok := current.(interface{ Done() <-chan struct{} })
			if !ok {
				return // this process holds the data dir
			}
			select {
			case <-ctx.Done():
				return
			case <-c.Done():
			}
			// Not "taking over": another process (a console attached to
			// the same holder) may well take the data dir first, and then
			// this one attaches to it. What happened is said below.
			logf("the warden process serving %s (pid %d) went away; attaching to the next holder, or holding the data dir", current.DataDir(), attachedPID(current))
			var next engine.Facade
			for next == nil {
				n, err := a.openEngine()
				if err == nil {
					next = n
					break
				}
				logf("attaching or holding: %v (trying again)", err)
				select {
				case <-ctx.Done():
					return
				case <-time.After(500 * time.Millisecond):
				}
			}
			mu.Lock()
			old := current
			current = next
			mu.Unlock()
			g.SetEngine(next)
			old.Close()
			if pid := attachedPID(next); pid != 0 {
				logf("attached to pid %d, which holds %s now", pid, next.DataDir())
			} else {
				logf("holding %s (pid %d)", next.DataDir(), os.Getpid())
			}
		}
	}()
	logf("mcp serve: session %s on %s (pid %d)", g.Session(), e.DataDir(), os.Getpid())
	err = g.Run(ctx, mcpgw.GuardedStdio(readCloser(a.stdin), writeCloser(a.stdout)))
	if ctx.Err() != nil || err == io.EOF {
		return nil
	}
	return err
}

type nopReadCloser struct{ io.Reader }

func (nopReadCloser) Close() error { return nil }

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

func readCloser(r io.Reader) io.ReadCloser {
	if rc, ok := r.(io.ReadCloser); ok {
		return rc
	}
	return nopReadCloser{r}
}

func writeCloser(w io.Writer) io.WriteCloser { return nopWriteCloser{w} }

func (a *app) mcpInstallCommand() *cobra.Command   { return a.mcpConfigCommand(true) }
func (a *app) mcpUninstallCommand() *cobra.Command { return a.mcpConfigCommand(false) }

// mcpConfigCommand is `mcp install` (add or update warden's entry in an
// MCP client's config) and `mcp uninstall` (remove it).
func (a *app) mcpConfigCommand(install bool) *cobra.Command {
	var client, path, name, wardenPath string
	var dryRun bool
	use, short := "uninstall", "Remove warden's entry from an MCP client's config, under the same file-safety rules"
	if install {
		use, short = "install", "Add or update warden's entry in an MCP client's config (claude-code, claude-desktop, cursor, codex)"
	}
	c := &cobra.Command{
		Use:   use + " --client NAME [--config PATH] [--name warden] [--dry-run]",
		Short: short,
		Long: short + `.

Default config files:
  claude-code     ~/.claude.json (user scope, "mcpServers")
  claude-desktop  ~/.config/Claude/claude_desktop_config.json ("mcpServers")
  cursor          ~/.cursor/mcp.json ("mcpServers")
  codex           $CODEX_HOME/config.toml, else ~/.codex/config.toml ([mcp_servers.NAME])

The entry runs this warden binary (its real, absolute path, admitted like
bubblewrap: owned by root or you, not writable by others; never looked up
on PATH) as ` + "`mcp serve --data-dir DIR`" + `.

warden writes another program's file only if it is safe to: the path is
absolute and canonical; the file is yours, a regular file with one link
(never followed through a symlink), at most 1 MiB, not group/world
writable, under directories that are not group/world writable; it parses
strictly; and every other server and key keeps its bytes. The new file is
written beside it (0600), fsynced, and renamed over it only if the file
did not change meanwhile; the original is kept as FILE.bak. A refusal
names the check and the fix, and changes nothing. --dry-run prints the
diff and changes nothing; when the client's directory is missing it still
shows the diff and says the real run needs that directory (--json:
missingDir), which warden never creates.`,
		Example: "  warden mcp " + use + " --client claude-code --dry-run\n  warden mcp " + use + " --client codex --config ~/.codex/config.toml",
		Args:    args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if client == "" {
				return usageError{fmt.Errorf("--client is required (one of %s)", strings.Join(mcpconf.ClientNames(), ", "))}
			}
			cl, err := mcpconf.Lookup(client)
			if err != nil {
				return usageError{err}
			}
			if path == "" {
				if path, err = cl.DefaultPath(); err != nil {
					return err
				}
			} else if abs, err := filepath.Abs(path); err == nil && !filepath.IsAbs(path) {
				path = abs
			}
			var plan *mcpconf.Plan
			if install {
				dir, err := engine.ResolveDataDir(a.dataDir)
				if err != nil {
					return err
				}
				entry, err := mcpServeEntry(wardenPath, dir)
				if err != nil {
					return err
				}
				plan, err = mcpconf.PlanInstall(cl, path, name, entry)
				if err != nil {
					return err
				}
			} else {
				if plan, err = mcpconf.PlanUninstall(cl, path, name); err != nil {
					return err
				}
			}
			return a.reportMCPPlan(plan, install, dryRun)
		},
	}
	c.Flags().StringVar(&client, "client", "", "the MCP client: "+strings.Join(mcpconf.ClientNames(), ", "))
	c.Flags().StringVar(&path, "config", "", "the client's config file (default: its usual path, see above)")
	c.Flags().StringVar(&name, "name", "warden", "the server's name in the config")
	c.Flags().BoolVar(&dryRun, "dry-run", false, "print the diff; change nothing")
	if install {
		c.Flags().StringVar(&wardenPath, "warden", "", "the warden binary the entry runs (default: this one, by its real path)")
	}
	return c
}

func (a *app) reportMCPPlan(p *mcpconf.Plan, install, dryRun bool) error {
	var backup string
	if !dryRun {
		var err error
		if backup, err = p.Apply(); err != nil {
			return err
		}
	}
	if a.json {
		out := map[string]any{"client": p.Client.Name, "config": p.Path, "name": p.Name, "changed": p.Changed,
			"dryRun": dryRun, "diff": p.Diff(), "backup": backup, "old": p.Old, "entry": p.New, "missingDir": p.MissingDir}
		if p.New != nil && p.New.ApprovalMode != "" {
			out["approvalModeWhy"] = mcpconf.ApprovalWhy
		}
		return a.emitJSON(out)
	}
	switch {
	case !p.Changed && install:
		a.printf("%s's config %s already runs %s as %q: nothing to change\n", p.Client.Name, p.Path, p.New.Command, p.Name)
		return nil
	case !p.Changed:
		a.printf("%s's config %s has no %q entry: nothing to remove\n", p.Client.Name, p.Path, p.Name)
		return nil
	}
	fmt.Fprint(a.stdout, p.Diff())
	if dryRun {
		a.printf("dry run: nothing was changed\n")
		if p.MissingDir != "" {
			a.printf("the real run needs the directory %s, which does not exist (is %s installed?): create it first (mkdir -p -m 700 %s)\n", p.MissingDir, p.Client.Name, p.MissingDir)
		}
		return nil
	}
	verb := "removed"
	if install {
		verb = "added"
		if p.Old != nil {
			verb = "updated"
		}
	}
	a.printf("%s %q in %s's config %s", verb, p.Name, p.Client.Name, p.Path)
	if backup != "" {
		a.printf(" (the original is kept as %s)", backup)
	}
	a.printf("\n")
	if install {
		if p.New != nil && p.New.ApprovalMode != "" {
			a.printf("its entry says default_tools_approval_mode = %q: %s\n", p.New.ApprovalMode, mcpconf.ApprovalWhy)
		}
		a.printf("restart %s to load it; each tool call then waits for an operator: the console's Requests pane, or `warden perms list`\n", p.Client.Name)
	}
	return nil
}

// mcpServeEntry is the MCP server entry a client config or a plugin root
// gets: wardenPath (default: this binary, by its real path) running
// `mcp serve --data-dir dir`.
func mcpServeEntry(wardenPath, dir string) (mcpconf.Entry, error) {
	if wardenPath == "" {
		var err error
		if wardenPath, err = os.Executable(); err != nil {
			return mcpconf.Entry{}, fmt.Errorf("cannot find this warden binary (%v): give --warden PATH", err)
		}
		if real, err := filepath.EvalSymlinks(wardenPath); err == nil {
			wardenPath = real
		}
	}
	return mcpconf.Entry{Command: wardenPath, Args: []string{"mcp", "serve", "--data-dir", dir}}, nil
}
