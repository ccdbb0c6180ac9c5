package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/wardenhq/warden/engine"
)

func (a *app) hookPlanCommand() *cobra.Command {
	var inputs []string
	c := &cobra.Command{
		Use:   "plan MODULE HOOK",
		Short: "Print the jail's mount plan for a hook and what is absent on this host",
		Long: `plan shows every mount a jailed run of the hook would get: source, target,
mode (ro, rw, tmpfs), absence class and reason. A missing "required" row
would fail the run before spawn; missing rows of other classes are dropped
and listed in the run's receipt. Give path inputs with --input to plan them.`,
		Example: `  warden hook plan hello greet
  warden hook plan backup run --input target=/srv/data --json`,
		Args: args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			raw, err := parseInputFlags(inputs)
			if err != nil {
				return err
			}
			return a.withEngine(func(e engine.Facade) error {
				hp, err := e.PlanHook(argv[0], argv[1], raw)
				if err != nil {
					return err
				}
				if a.json {
					a.emitJSON(hp)
				} else {
					tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
					fmt.Fprintln(tw, "TARGET\tMODE\tABSENCE\tSOURCE\tREASON")
					for _, r := range hp.Plan.Rows {
						src := r.Source
						if r.Symlink != "" {
							src = "-> " + r.Symlink
						}
						fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", safe(r.Target), safe(string(r.Mode)), safe(string(r.Absence)), safe(src), safe(r.Reason))
					}
					tw.Flush()
					if len(hp.Plan.Missing) > 0 {
						a.printf("\nabsent on this host:\n")
						for _, r := range hp.Plan.Missing {
							a.printf("  %-10s %s (%s)\n", safe(string(r.Absence)), safe(r.Source), safe(r.Reason))
						}
					}
					a.printNetworkPlan(hp)
					a.printJailPlan(hp)
					lim := hp.Limits.String()
					if hp.LimitsOff != "" {
						lim += " (" + hp.LimitsOff + ")"
					}
					a.printf("limits: %s\n", lim)
				}
				if hp.Problem != "" {
					return fmt.Errorf("%s", hp.Problem)
				}
				return nil
			})
		},
	}
	c.Flags().StringArrayVar(&inputs, "input", nil, "a path input as NAME=VALUE (repeatable)")
	return c
}

// printJailPlan says which backend a run gets and, where the landlock
// backend can run, what each class of the plan becomes under it.
func (a *app) printJailPlan(hp *engine.HookPlan) {
	if hp.JailProblem != "" {
		a.printf("jail: none can run here: %s\n", safe(hp.JailProblem))
	} else {
		a.printf("jail: %s\n", safe(hp.Jail))
	}
	if hp.Landlock == nil {
		return
	}
	a.printf("\nunder the landlock backend (ABI %d; no namespaces):\n", hp.Landlock.ABI)
	for _, r := range hp.Landlock.Rows {
		a.printf("  %-32s %s\n", safe(r.Target), safe(r.Became))
	}
	for _, n := range hp.Landlock.NotHidden {
		a.printf("  not hidden: %s\n", safe(n))
	}
	if hp.LandlockRefused != "" {
		a.printf("  %s\n", safe(hp.LandlockRefused))
	}
}
