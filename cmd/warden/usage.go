package main

import (
	"github.com/spf13/cobra"

	"github.com/wardenhq/warden/engine/hookcli"
)

// refuseUnknownVerbs makes every command that only groups verbs (the root
// included) refuse an unknown verb as a usage error, exit 2. It is the
// in-jail helper's rule too (hookcli), so both binaries answer alike.
func refuseUnknownVerbs(root *cobra.Command) { hookcli.RefuseUnknownVerbs(root) }
