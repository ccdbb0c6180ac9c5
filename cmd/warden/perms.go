package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/engine/termsafe"
	"github.com/wardenhq/warden/tui"
)

func (a *app) permsCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "perms",
		Short: "Policies: what modules and hands roots may do",
	}
	policy := &cobra.Command{
		Use:   "policy",
		Short: "Show or set a subject's policy (module:ID, hands:/ROOT or mcp:CLIENT)",
	}
	show := &cobra.Command{
		Use:     "show SUBJECT",
		Short:   "Show a policy and its revision",
		Example: `  warden perms policy show module:hello`,
		Args:    args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			return a.withEngine(func(e engine.Facade) error {
				p, exists, err := e.Policy(argv[0])
				if err != nil {
					return err
				}
				if a.json {
					return a.emitJSON(map[string]any{"policy": p, "exists": exists})
				}
				if !exists {
					a.printf("%s has no policy yet: everything is denied (set one with `warden perms policy set %s ...`)\n", argv[0], argv[0])
					return nil
				}
				// Each list follows its own heading: the network's
				// destinations (approve-always of a connection adds one
				// there) under network, exact rules under rules.
				a.printf("subject    %s\nrevision   %d\nupdated    %s by %s\nworkspace  read=%v write=%v\nexecute    %v\nnetwork    %s\n",
					safe(p.Subject), p.Revision, p.Updated.Local().Format("2006-01-02 15:04:05"), safe(p.By), p.Workspace.Read, p.Workspace.Write, p.Execute, policyNetwork(p))
				for _, d := range p.NetworkAllow {
					a.printf("  allow %s\n", safe(d))
				}
				switch n := len(p.Rules); n {
				case 0:
					a.printf("rules      none (approve-always adds exact rules here; an approved connection joins the network list instead)\n")
				case 1:
					a.printf("rules      1 exact rule:\n")
				default:
					a.printf("rules      %d exact rules:\n", n)
				}
				for _, r := range p.Rules {
					a.printf("  allow %s %s  %s\n", safe(r.Operation), safe(r.Digest[:12]), safe(r.Summary))
				}
				return nil
			})
		},
	}
	var network, execute, read, write string
	var allowTools, forgetTools []string
	var revision int64
	set := &cobra.Command{
		Use:   "set SUBJECT --revision N [--network true|false] [--execute ...] [--read ...] [--write ...]",
		Short: "Change a policy; --revision is the revision you reviewed (compare-and-swap)",
		Long: `set changes only the flags you give. It is a compare-and-swap: pass the
revision you reviewed with ` + "`perms policy show`" + `; if someone changed the policy since,
nothing is written and you are told both revisions. A subject without a
policy is at revision 0.`,
		Example: `  warden perms policy set module:hello --revision 0 --network api.github.com:443,pypi.org
  warden perms policy set module:hello --revision 1 --network false
  warden perms policy set module:hello --revision 2 --network true   # the host's network: loud`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if revision < 0 {
				return usageError{fmt.Errorf("--revision is required (see `warden perms policy show %s`)", argv[0])}
			}
			return a.withEngine(func(e engine.Facade) error {
				p, _, err := e.Policy(argv[0])
				if err != nil {
					return err
				}
				for _, f := range []struct {
					val  string
					name string
					dst  *bool
				}{{execute, "execute", &p.Execute}, {read, "read", &p.Workspace.Read}, {write, "write", &p.Workspace.Write}} {
					if f.val == "" {
						continue
					}
					b, err := strconv.ParseBool(f.val)
					if err != nil {
						return usageError{fmt.Errorf("--%s %q: want true or false", f.name, f.val)}
					}
					*f.dst = b
				}
				if len(allowTools)+len(forgetTools) > 0 && !strings.HasPrefix(p.Subject, "mcp:") {
					return usageError{fmt.Errorf("--allow-tool and --forget-tool are for MCP clients (mcp:NAME), not %s", p.Subject)}
				}
				for _, tool := range forgetTools {
					r, err := engine.MCPToolRule(tool)
					if err != nil {
						return err
					}
					kept := p.Rules[:0:0]
					for _, have := range p.Rules {
						if have.Operation != r.Operation || have.Digest != r.Digest {
							kept = append(kept, have)
						}
					}
					p.Rules = kept
				}
				for _, tool := range allowTools {
					r, err := engine.MCPToolRule(tool)
					if err != nil {
						return err
					}
					dup := false
					for _, have := range p.Rules {
						dup = dup || (have.Operation == r.Operation && have.Digest == r.Digest)
					}
					if !dup {
						p.Rules = append(p.Rules, r)
					}
				}
				if network != "" {
					if err := setPolicyNetwork(&p, network); err != nil {
						return err
					}
				}
				out, err := e.SetPolicy(engine.LocalActor(), p, uint64(revision))
				if err != nil {
					return err
				}
				return a.done(out, "policy %s is now at revision %d\n", safe(out.Subject), out.Revision)
			})
		},
	}
	set.Flags().Int64Var(&revision, "revision", -1, "the revision you reviewed (required)")
	set.Flags().StringVar(&network, "network", "", "false, true (the host's whole network), or destinations hooks may reach through the egress proxy:\ncomma-separated api.github.com:443,*.pythonhosted.org:443,pypi.org (443 and 80),ip:203.0.113.7:443")
	set.Flags().StringVar(&execute, "execute", "", "allow executing in a hands container (true|false)")
	set.Flags().StringVar(&read, "read", "", "allow reading the hands workspace (true|false)")
	set.Flags().StringVar(&write, "write", "", "allow writing the hands workspace (true|false)")
	set.Flags().StringSliceVar(&allowTools, "allow-tool", nil, "for an MCP client (mcp:NAME): let this tool run without asking, whatever its arguments (repeatable)")
	set.Flags().StringSliceVar(&forgetTools, "forget-tool", nil, "for an MCP client (mcp:NAME): remove the rule --allow-tool added (repeatable)")
	policy.AddCommand(show, set)
	c.AddCommand(policy)
	c.AddCommand(a.permsListCommand(), a.permsShowCommand())
	for _, v := range []string{engine.ApproveOnce, engine.ApproveAlways, engine.Deny} {
		c.AddCommand(a.permsDecideCommand(v))
	}
	return c
}

func (a *app) permsListCommand() *cobra.Command {
	var all bool
	var limit int
	var before uint64
	c := &cobra.Command{
		Use:   "list [--all]",
		Short: "List permission requests: the pending ones first (oldest first), then with --all the decided ones",
		Long: `Lists the pending permission requests, oldest first; with --all, then the
decided ones, newest first, --limit at a time. The next page is
--before the last ID shown (it lists decided requests only).`,
		Example: `  warden perms list
  warden perms list --all --json
  warden perms list --all --before 120 --limit 20`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 0 {
				return usageError{fmt.Errorf("--limit must be 0 (no limit) or more, got %d", limit)}
			}
			if before > 0 {
				all = true // only decided requests are older than a page
			}
			return a.withEngine(func(e engine.Facade) error {
				rs, err := e.Requests(engine.RequestFilter{All: all, Limit: limit, Before: before})
				if err != nil {
					return err
				}
				if a.json {
					if rs == nil {
						rs = []engine.Request{}
					}
					return a.emitJSON(rs)
				}
				if len(rs) == 0 {
					if all {
						a.printf("no permission requests yet\n")
					} else {
						a.printf("no pending permission requests (decided ones: `warden perms list --all`)\n")
					}
					return nil
				}
				now := time.Now()
				tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tSTATE\tAGE\tEXPIRES IN\tSUBJECT\tREQUESTER\tOPERATION")
				for _, r := range rs {
					state, expires := "pending", tui.ShortDuration(r.Expires.Sub(now))
					if d := r.Decision; d != nil {
						state, expires = d.Verdict, "-"
					}
					fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s/%s\t%s\n", r.ID, safe(state), tui.ShortDuration(now.Sub(r.Created)), expires, safe(r.Subject),
						safe(r.Requester.Module), safe(r.Requester.Hook), oneLine(engine.RequestSummary(r), 70))
				}
				if err := tw.Flush(); err != nil {
					return err
				}
				if rs[0].Decision == nil {
					a.printf("\ndecide with `warden perms approve|approve-always|deny ID [--reason R]`; details with `warden perms show ID`\n")
				}
				if last := rs[len(rs)-1]; all && limit > 0 && len(rs) == limit && last.Decision != nil && last.ID > 1 {
					a.printf("older: `warden perms list --all --limit %d --before %d`\n", limit, last.ID)
				}
				return nil
			})
		},
	}
	c.Flags().BoolVar(&all, "all", false, "also list decided requests, newest first")
	c.Flags().IntVar(&limit, "limit", 50, "at most this many (0 for all)")
	c.Flags().Uint64Var(&before, "before", 0, "only decided requests with an ID below this (the next page; implies --all)")
	return c
}

func (a *app) permsShowCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "show ID",
		Short:   "Show one permission request: its exact content, digest, policy revision and decision",
		Example: `  warden perms show 7`,
		Args:    args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			id, err := requestID(argv[0])
			if err != nil {
				return err
			}
			return a.withEngine(func(e engine.Facade) error {
				r, err := e.Request(id)
				if err != nil {
					return err
				}
				if a.json {
					return a.emitJSON(r)
				}
				now := time.Now()
				requester := fmt.Sprintf("%s/%s (run %s)", r.Requester.Module, r.Requester.Hook, r.Requester.Run)
				if q := r.Requester; q.Client != "" {
					requester = fmt.Sprintf("MCP client %s, tool %s, session %s", q.Client, oneLine(q.Hook, 80), oneLine(q.Session, 80))
				}
				a.printf("request    %d\nsubject    %s\nrequester  %s\noperation  %s\ndigest     %s\nrevision   %d (the policy revision it was made against)\ncreated    %s (%s ago)\n",
					r.ID, safe(r.Subject), safe(requester), safe(r.Operation), safe(r.Digest), r.Revision,
					r.Created.Local().Format("2006-01-02 15:04:05"), tui.ShortDuration(now.Sub(r.Created)))
				if r.Warning != "" {
					a.printf("warning    %s\n", safe(r.Warning))
				}
				if r.Decision == nil {
					a.printf("expires    %s (in %s)\ndecision   pending: `warden perms approve|approve-always|deny %d [--reason R]`\n",
						r.Expires.Local().Format("2006-01-02 15:04:05"), tui.ShortDuration(r.Expires.Sub(now)), r.ID)
				} else {
					d := r.Decision
					a.printf("expires    %s\ndecision   %s by %s at %s", r.Expires.Local().Format("2006-01-02 15:04:05"), safe(d.Verdict), safe(d.By), d.At.Local().Format("2006-01-02 15:04:05"))
					if d.Reason != "" {
						a.printf(": %s", safe(d.Reason))
					}
					a.printf("\n")
				}
				if c := r.Claim; c != nil {
					if c.Used {
						a.printf("claim      consumed by run %s at %s\n", safe(c.By), c.At.Local().Format("2006-01-02 15:04:05"))
					} else {
						a.printf("claim      open: the next identical operation of %s goes through once\n", safe(r.Subject))
					}
				}
				// The content is the hook's, multi-line when it is JSON:
				// each of its lines escaped on its own.
				var pretty bytes.Buffer
				if json.Indent(&pretty, r.Content, "           ", "  ") != nil {
					pretty.Reset()
					pretty.WriteString(safe(string(r.Content)))
				}
				a.printf("content    %s\n", termsafe.Text(pretty.String()))
				return nil
			})
		},
	}
}

func (a *app) permsDecideCommand(verdict string) *cobra.Command {
	var reason string
	var wholeTool bool
	use, short := "", ""
	switch verdict {
	case engine.ApproveOnce:
		use, short = "approve", "Approve a request once: the waiting call goes through (or one retry of the identical operation)"
	case engine.ApproveAlways:
		use, short = "approve-always", "Approve a request always: add an exact rule for the operation to the subject's policy"
	default:
		use, short = "deny", "Deny a request; the reason reaches the hook"
	}
	c := &cobra.Command{
		Use:     use + " ID [--reason R]",
		Short:   short,
		Example: fmt.Sprintf("  warden perms %s 7 --reason \"reviewed the command\"", use),
		Args:    args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			id, err := requestID(argv[0])
			if err != nil {
				return err
			}
			return a.withEngine(func(e engine.Facade) error {
				actor := engine.LocalActor()
				switch verdict {
				case engine.ApproveAlways:
					decide := e.ApproveAlways
					if wholeTool {
						decide = e.ApproveAlwaysTool
					}
					r, rule, p, err := decide(actor, id, reason)
					if err != nil {
						return err
					}
					if a.json {
						return a.emitJSON(map[string]any{"request": r, "rule": rule, "policy": p})
					}
					a.printf("request %d approved always\nrule added to %s: allow %s %s  %s\npolicy %s is now at revision %d\n",
						r.ID, safe(p.Subject), safe(rule.Operation), safe(rule.Digest[:12]), safe(rule.Summary), safe(p.Subject), p.Revision)
					return nil
				case engine.ApproveOnce:
					r, err := e.Approve(actor, id, reason)
					if err != nil {
						return err
					}
					return a.done(r, "request %d approved once (%s)\n", r.ID, oneLine(engine.RequestSummary(r), 70))
				default:
					if reason == "" {
						reason = "denied by the operator"
					}
					r, err := e.Deny(actor, id, reason)
					if err != nil {
						return err
					}
					return a.done(r, "request %d denied: %s\n", r.ID, safe(reason))
				}
			})
		},
	}
	c.Flags().StringVar(&reason, "reason", "", "why (recorded in the receipt; a deny reason reaches the hook)")
	if verdict == engine.ApproveAlways {
		c.Flags().BoolVar(&wholeTool, "tool", false, "for an MCP tool call (subject mcp:NAME): let the tool run whatever its arguments, not only with these")
	}
	return c
}

func requestID(s string) (uint64, error) {
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil || id == 0 {
		return 0, usageError{fmt.Errorf("ID must be a positive request number, got %q (see `warden perms list`)", s)}
	}
	return id, nil
}
