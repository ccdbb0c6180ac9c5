package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/wardenhq/warden/engine/hookcli"
)

// flagError is the root's flag error func: a bad flag is a usage error
// that points at the verb's help. warden-hook says the same words
// (hookcli.Execute).
func flagError(c *cobra.Command, err error) error {
	return usageError{fmt.Errorf("%w\nsee `%s --help`", err, c.CommandPath())}
}

// refuseUnknownVerbs makes every command that only groups verbs (the root
// included) refuse an unknown verb as a usage error, exit 2. Left to
// cobra, `warden receipts lsit` prints help and exits 0, and `warden
// bogus` exits 1. It is the in-jail helper's rule too (hookcli.Execute),
// so both binaries answer alike.
func refuseUnknownVerbs(root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if !c.HasSubCommands() {
			return
		}
		if c.Run == nil && c.RunE == nil {
			c.Args = cobra.ArbitraryArgs
			c.RunE = unknownVerb
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// unknownVerb is the RunE of a command that only groups verbs: help
// without a verb, a usage error (with suggestions) for an unknown one.
func unknownVerb(c *cobra.Command, argv []string) error {
	if len(argv) == 0 {
		return c.Help()
	}
	msg := fmt.Sprintf("unknown command %q for %q", argv[0], c.CommandPath())
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2 // cobra's own default, applied lazily
	}
	if s := c.SuggestionsFor(argv[0]); len(s) > 0 {
		msg += " (did you mean " + strings.Join(s, " or ") + "?)"
	}
	return usageError{fmt.Errorf("%s\nsee `%s --help`", msg, c.CommandPath())}
}

// hookVerbs are the in-jail helper's verbs (hookcli), described once
// there, as cobra commands under the full binary's `hook`.
func hookVerbs(verbs []*hookcli.Command) []*cobra.Command {
	var out []*cobra.Command
	for _, v := range verbs {
		out = append(out, hookVerb(v))
	}
	return out
}

func hookVerb(v *hookcli.Command) *cobra.Command {
	c := &cobra.Command{
		Use:                v.Use,
		Short:              v.Short,
		Long:               v.Long,
		Example:            v.Example,
		Hidden:             v.Hidden,
		DisableFlagParsing: v.RawArgs,
	}
	for _, f := range v.Flags {
		if f.Bool != nil {
			c.Flags().BoolVar(f.Bool, f.Name, *f.Bool, f.Usage)
		} else {
			c.Flags().StringVar(f.String, f.Name, *f.String, f.Usage)
		}
	}
	if v.Run != nil {
		c.Args = func(c *cobra.Command, argv []string) error {
			if v.Args == nil {
				return nil
			}
			if err := v.Args(argv); err != nil {
				return hookcli.ArgsError(err, c.UseLine())
			}
			return nil
		}
		c.RunE = func(c *cobra.Command, argv []string) error {
			err := v.Run(argv)
			if errors.Is(err, hookcli.ErrHelp) {
				return c.Help()
			}
			return err
		}
	}
	c.AddCommand(hookVerbs(v.Subs)...)
	return c
}
