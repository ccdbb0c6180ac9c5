package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"warden/engine"
	"warden/engine/control"
)

func (a *app) doctorCommand() *cobra.Command {
	var bwrap, operators string
	var fl fleetJoin
	c := &cobra.Command{
		Use:   "doctor",
		Short: "Check the data dir, store, trust root and bubblewrap; exit 1 on any problem",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			set, err := loadSettings()
			if err != nil {
				return err
			}
			if bwrap == "" {
				bwrap = set.Bwrap
			}
			fl = fl.or(set.Fleet)
			if err := fl.check(); err != nil {
				return err
			}
			rep := engine.Doctor(engine.DoctorOptions{DataDir: a.dataDir, BwrapPath: bwrap,
				Attach: func(dir string) (engine.Facade, int, error) {
					c, err := control.Dial(dir)
					if err != nil {
						return nil, 0, err
					}
					return c, c.PID(), nil
				}})
			if operators != "" {
				rep.Checks = append(rep.Checks, operatorsChecks(operators)...)
			}
			if fl.url != "" {
				rep.Checks = append(rep.Checks, fleetCheck(rep.DataDir, fl))
			}
			if a.json {
				a.emitJSON(rep)
			} else {
				tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				for _, c := range rep.Checks {
					fmt.Fprintf(tw, "%s\t%s\t%s\n", safe(c.Status), safe(c.Name), safe(c.Detail))
					if c.Fix != "" {
						fmt.Fprintf(tw, "\t\tfix: %s\n", safe(c.Fix))
					}
				}
				tw.Flush()
			}
			if !rep.OK() {
				return &exitError{code: 1}
			}
			return nil
		},
	}
	c.Flags().StringVar(&operators, "operators", "", "also check an SSH operators file (the one `warden serve --operators` reads)")
	fl.bind(c)
	c.Flags().StringVar(&bwrap, "bwrap", "", "bubblewrap binary to check (absolute; default: the config file's bwrap, else /usr/bin/bwrap)")
	return c
}

// operatorsChecks reports an operators file: one problem per malformed
// line, or ok. serve skips such a line and the others keep working, but
// doctor was asked about this file, so a bad line fails it (exit 1).
func operatorsChecks(path string) []engine.Check {
	problems := checkOperatorsFile(path)
	if len(problems) == 0 {
		return []engine.Check{{Name: "operators file", Status: "ok", Detail: path + ": every line is well-formed"}}
	}
	out := make([]engine.Check, len(problems))
	for i, p := range problems {
		out[i] = engine.Check{Name: "operators file", Status: "problem", Detail: p,
			Fix: "edit that line to `operator|viewer ssh-ed25519 AAAA... name`, or remove it (it is skipped until then)"}
	}
	return out
}
