package main

import (
	"github.com/spf13/cobra"

	"github.com/wardenhq/warden/engine"
)

func (a *app) trustCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "trust",
		Short: "Show or rotate the trust root that signs capability tokens",
	}
	status := &cobra.Command{
		Use:   "status",
		Short: "Show the trust root's generation, fingerprint, agreement and token counts",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withEngine(func(e engine.Facade) error {
				st, err := e.TrustStatus()
				if err != nil {
					return err
				}
				if a.json {
					return a.emitJSON(st)
				}
				agree := "yes"
				if !st.Agrees {
					agree = "NO: " + safe(st.Problem)
				}
				a.printf("generation   %d\nfingerprint  %s\nsince        %s\nagrees       %s\ntokens       %d (%d live)\n",
					st.Generation, st.Fingerprint, st.Since.Local().Format("2006-01-02 15:04:05"), agree, st.Tokens, st.Live)
				return nil
			})
		},
	}
	rotate := &cobra.Command{
		Use:   "rotate",
		Short: "Make a new host.secret, start the next generation and revoke every token",
		Long: `rotate writes a fresh host.secret atomically, records its fingerprint as the
next generation and revokes every token issued before. Running hooks lose
their tokens. It is also the way out when host.secret and the recorded
fingerprint disagree.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withEngine(func(e engine.Facade) error {
				st, err := e.RotateTrust(engine.LocalActor())
				if err != nil {
					return err
				}
				return a.done(st, "trust root rotated: generation %d, fingerprint %s; every earlier token is revoked\n", st.Generation, st.Fingerprint)
			})
		},
	}
	c.AddCommand(status, rotate)
	return c
}
