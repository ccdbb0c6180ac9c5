package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// refuseUnknownVerbs makes every command that only groups verbs (the root
// included) refuse an unknown verb as a usage error, exit 2. Left to
// cobra, `warden receipts lsit` prints help and exits 0, and `warden
// bogus` exits 1.
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
