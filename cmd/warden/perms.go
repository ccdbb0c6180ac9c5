package main

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"warden/engine"
)

func (a *app) permsCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "perms",
		Short: "Policies: what modules and hands roots may do",
	}
	policy := &cobra.Command{
		Use:   "policy",
		Short: "Show or set a subject's policy (module:ID or hands:/ROOT)",
	}
	show := &cobra.Command{
		Use:     "show SUBJECT",
		Short:   "Show a policy and its revision",
		Example: `  warden perms policy show module:hello`,
		Args:    args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			return a.withEngine(func(e *engine.Engine) error {
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
				a.printf("subject    %s\nrevision   %d\nworkspace  read=%v write=%v\nexecute    %v\nnetwork    %v\nrules      %d\nupdated    %s by %s\n",
					p.Subject, p.Revision, p.Workspace.Read, p.Workspace.Write, p.Execute, p.Network, len(p.Rules), p.Updated.Local().Format("2006-01-02 15:04:05"), p.By)
				for _, r := range p.Rules {
					a.printf("  allow %s %s  %s\n", r.Operation, r.Digest[:12], r.Summary)
				}
				return nil
			})
		},
	}
	var network, execute, read, write string
	var revision int64
	set := &cobra.Command{
		Use:   "set SUBJECT --revision N [--network true|false] [--execute ...] [--read ...] [--write ...]",
		Short: "Change a policy; --revision is the revision you reviewed (compare-and-swap)",
		Long: `set changes only the flags you give. It is a compare-and-swap: pass the
revision you reviewed with ` + "`perms policy show`" + `; if someone changed the policy since,
nothing is written and you are told both revisions. A subject without a
policy is at revision 0.`,
		Example: `  warden perms policy set module:hello --revision 0 --network true`,
		Args:    args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if revision < 0 {
				return usageError{fmt.Errorf("--revision is required (see `warden perms policy show %s`)", argv[0])}
			}
			return a.withEngine(func(e *engine.Engine) error {
				p, _, err := e.Policy(argv[0])
				if err != nil {
					return err
				}
				for _, f := range []struct {
					val  string
					name string
					dst  *bool
				}{{network, "network", &p.Network}, {execute, "execute", &p.Execute}, {read, "read", &p.Workspace.Read}, {write, "write", &p.Workspace.Write}} {
					if f.val == "" {
						continue
					}
					b, err := strconv.ParseBool(f.val)
					if err != nil {
						return usageError{fmt.Errorf("--%s %q: want true or false", f.name, f.val)}
					}
					*f.dst = b
				}
				out, err := e.SetPolicy(engine.LocalActor(), p, uint64(revision))
				if err != nil {
					return err
				}
				return a.done(out, "policy %s is now at revision %d\n", out.Subject, out.Revision)
			})
		},
	}
	set.Flags().Int64Var(&revision, "revision", -1, "the revision you reviewed (required)")
	set.Flags().StringVar(&network, "network", "", "allow network inside the jail (true|false)")
	set.Flags().StringVar(&execute, "execute", "", "allow executing in a hands container (true|false)")
	set.Flags().StringVar(&read, "read", "", "allow reading the hands workspace (true|false)")
	set.Flags().StringVar(&write, "write", "", "allow writing the hands workspace (true|false)")
	policy.AddCommand(show, set)
	c.AddCommand(policy)
	return c
}
