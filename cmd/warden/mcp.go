package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"warden/engine"
	"warden/engine/mcpgw"
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
	c.AddCommand(a.mcpServeCommand())
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
	e, err := a.openEngine()
	if err != nil {
		return err
	}
	defer e.Close()
	logf := func(format string, args ...any) { fmt.Fprintf(a.stderr, "warden: "+format+"\n", args...) }
	g := mcpgw.New(mcpgw.Options{Engine: e, Actor: engine.LocalActor(), TTL: ttl, Tail: tail, Version: version, Logf: logf})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		select {
		case <-sigs:
			cancel()
		case <-ctx.Done():
		}
	}()
	// The engine we attached to may go away: then so does this serve
	// (the client restarts it, and it holds the data dir itself).
	if gone, ok := e.(interface{ Done() <-chan struct{} }); ok {
		go func() {
			select {
			case <-gone.Done():
				logf("the warden process serving %s went away; stopping (the MCP client may start this again)", e.DataDir())
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	logf("mcp serve: session %s on %s (pid %d)", g.Session(), e.DataDir(), os.Getpid())
	err = g.Run(ctx, &mcp.IOTransport{Reader: readCloser(a.stdin), Writer: writeCloser(a.stdout)})
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
