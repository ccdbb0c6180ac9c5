package hookcli

import (
	"errors"
	"fmt"
	"strings"
)

// Command is one helper verb, described once and answered by both
// binaries: the full warden turns it into a cobra command (cmd/warden),
// and warden-hook runs it with Execute (execute.go), which parses argv
// and renders help exactly as cobra and pflag do for these verbs. The
// helper does not link cobra: with it, each call of a shell hook pays a
// fifth more start-up. TestWardenHookAnswersAsWarden holds
// the two to the same stdout, stderr and exit code.
type Command struct {
	Use     string // the name, then the arguments: "get NAME"
	Short   string
	Long    string
	Example string
	Hidden  bool
	// RawArgs passes argv to Run unparsed, flags and --help included
	// (cobra's DisableFlagParsing).
	RawArgs bool
	Flags   []Flag
	// Args checks the positional arguments; its error is a usage error,
	// to which the caller adds the verb's usage line. nil takes any.
	Args func(argv []string) error
	// Run does the verb; nil for a command that only groups Subs.
	Run  func(argv []string) error
	Subs []*Command
}

// Flag is a verb's flag: a bool or a string, bound to the variable the
// verb reads. The variable's value when the verb is built is the default.
type Flag struct {
	Name   string
	Usage  string
	Bool   *bool
	String *string
}

// ErrHelp, returned by a RawArgs verb's Run, asks for the verb's help.
var ErrHelp = errors.New("help requested")

// Name is the command's name: Use's first word.
func (c *Command) Name() string {
	name, _, _ := strings.Cut(c.Use, " ")
	return name
}

// The argument checks, with cobra's words so that both binaries say the
// same thing.

func maxArgs(n int) func([]string) error {
	return func(argv []string) error {
		if len(argv) > n {
			return fmt.Errorf("accepts at most %d arg(s), received %d", n, len(argv))
		}
		return nil
	}
}

func minArgs(n int) func([]string) error {
	return func(argv []string) error {
		if len(argv) < n {
			return fmt.Errorf("requires at least %d arg(s), only received %d", n, len(argv))
		}
		return nil
	}
}

func exactArgs(n int) func([]string) error {
	return func(argv []string) error {
		if len(argv) != n {
			return fmt.Errorf("accepts %d arg(s), received %d", n, len(argv))
		}
		return nil
	}
}

func rangeArgs(lo, hi int) func([]string) error {
	return func(argv []string) error {
		if len(argv) < lo || len(argv) > hi {
			return fmt.Errorf("accepts between %d and %d arg(s), received %d", lo, hi, len(argv))
		}
		return nil
	}
}

// ArgsError is a failed argument check as both binaries report it: a
// usage error that ends with the verb's usage line.
func ArgsError(err error, useLine string) error {
	return usageError{fmt.Errorf("%w\nusage: %s", err, useLine)}
}
