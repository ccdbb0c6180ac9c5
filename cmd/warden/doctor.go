package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"warden/engine"
)

func (a *app) doctorCommand() *cobra.Command {
	var bwrap string
	c := &cobra.Command{
		Use:   "doctor",
		Short: "Check the data dir, store, trust root and bubblewrap; exit 1 on any problem",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if bwrap == "" {
				set, err := loadSettings()
				if err != nil {
					return err
				}
				bwrap = set.Bwrap
			}
			rep := engine.Doctor(engine.DoctorOptions{DataDir: a.dataDir, BwrapPath: bwrap})
			if a.json {
				a.emitJSON(rep)
			} else {
				tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				for _, c := range rep.Checks {
					fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Status, c.Name, c.Detail)
					if c.Fix != "" {
						fmt.Fprintf(tw, "\t\tfix: %s\n", c.Fix)
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
	c.Flags().StringVar(&bwrap, "bwrap", "", "bubblewrap binary to check (absolute; default: the config file's bwrap, else /usr/bin/bwrap)")
	return c
}
