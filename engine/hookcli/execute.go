package hookcli

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Execute runs the verb argv names in the tree under root, as cobra
// would run the same tree: the verb is found by its words (flags may come
// anywhere), its flags and root's (global) flags are parsed with pflag's
// rules and words, -h/--help prints cobra's help to out, root's
// -v/--version prints "NAME version VERSION", and a command that only
// groups verbs refuses an unknown one as cmd/warden's does. The errors
// are returned, not printed; usage mistakes are UsageErrors.
//
// It covers what the helper verbs use (bool and string flags, no
// aliases, groups or completions); TestWardenHookAnswersAsWarden holds it
// to cobra's output for each of them.
func Execute(root *Command, version string, argv []string, out io.Writer) error {
	top := newNode(root, nil)
	n, rest := top.find(argv)
	if n.c.RawArgs {
		return n.run(rest, out)
	}
	var help, showVersion bool
	flags := n.flagSet(&help, &showVersion, version != "")
	args, err := parseFlags(flags, rest)
	if err != nil {
		return usageError{fmt.Errorf("%w\nsee `%s --help`", err, n.path())}
	}
	switch {
	case help:
		_, err := io.WriteString(out, n.help())
		return err
	case showVersion && n.parent == nil:
		_, err := fmt.Fprintf(out, "%s version %s\n", n.c.Name(), version)
		return err
	case n.c.Run == nil:
		return n.unknownVerb(args, out)
	}
	if n.c.Args != nil {
		if err := n.c.Args(args); err != nil {
			return ArgsError(err, n.useLine())
		}
	}
	return n.run(args, out)
}

// node is a command placed in its tree.
type node struct {
	c      *Command
	parent *node
	subs   []*node // sorted by name, as cobra lists them
	// namePad is the width cobra pads sub-command names to in a list:
	// the longest name among them, hidden ones included, at least 11.
	namePad int
	// defs is each of c's flags' value when the tree was built: its
	// default, which help lists whatever argv then set (as pflag's
	// DefValue).
	defs []string
}

func newNode(c *Command, parent *node) *node {
	n := &node{c: c, parent: parent, namePad: 11}
	for _, f := range c.Flags {
		n.defs = append(n.defs, f.value())
	}
	for _, s := range c.Subs {
		n.subs = append(n.subs, newNode(s, n))
		n.namePad = max(n.namePad, len(s.Name()))
	}
	slices.SortFunc(n.subs, func(a, b *node) int { return strings.Compare(a.c.Name(), b.c.Name()) })
	return n
}

func (n *node) root() *node {
	for n.parent != nil {
		n = n.parent
	}
	return n
}

func (n *node) path() string {
	if n.parent == nil {
		return n.c.Name()
	}
	return n.parent.path() + " " + n.c.Name()
}

// useLine is cobra's: the parent's path, Use, and [flags] (every parsed
// command has at least --help).
func (n *node) useLine() string {
	line := n.c.Use
	if n.parent != nil {
		line = n.parent.path() + " " + line
	}
	if !strings.Contains(line, "[flags]") {
		line += " [flags]"
	}
	return line
}

func (n *node) run(args []string, out io.Writer) error {
	err := n.c.Run(args)
	if err == ErrHelp {
		_, err = io.WriteString(out, n.help())
	}
	return err
}

// find walks argv's words down the tree, as cobra's Find does: flags and
// the values of flags that take one are skipped, the first other word
// must name a sub-command to go down, and it is taken out of argv.
func (n *node) find(argv []string) (*node, []string) {
	for {
		words := n.stripFlags(argv)
		if len(words) == 0 {
			return n, argv
		}
		var next *node
		for _, s := range n.subs {
			if s.c.Name() == words[0] {
				next = s
			}
		}
		if next == nil {
			return n, argv
		}
		argv = n.withoutFirst(argv, words[0])
		n = next
	}
}

// takesValue says whether --name (or -name for a one-letter name) at n
// consumes the next argument: a string flag does; a bool flag does not;
// an unknown flag does, as in cobra. --help and --version count as
// unknown here: cobra adds them only after it has found the command, so
// `secret -h get` is secret's help, the -h taking "get" as its value.
func (n *node) takesValue(name string) bool {
	var help, v bool
	for _, f := range n.flagSet(&help, &v, true) {
		if f.implicit {
			continue
		}
		if f.name == name || f.short != "" && f.short == name {
			return f.b == nil
		}
	}
	return true
}

func (n *node) stripFlags(args []string) []string {
	var words []string
	for len(args) > 0 {
		s := args[0]
		args = args[1:]
		switch {
		case s == "--":
			return words
		case strings.HasPrefix(s, "--") && !strings.Contains(s, "=") && n.takesValue(s[2:]),
			strings.HasPrefix(s, "-") && !strings.HasPrefix(s, "--") && !strings.Contains(s, "=") && len(s) == 2 && n.takesValue(s[1:]):
			if len(args) <= 1 {
				return words
			}
			args = args[1:]
		case s != "" && !strings.HasPrefix(s, "-"):
			words = append(words, s)
		}
	}
	return words
}

func (n *node) withoutFirst(args []string, x string) []string {
	for pos := 0; pos < len(args); pos++ {
		s := args[pos]
		switch {
		case s == "--":
			return args
		case strings.HasPrefix(s, "--") && !strings.Contains(s, "=") && n.takesValue(s[2:]),
			strings.HasPrefix(s, "-") && !strings.HasPrefix(s, "--") && !strings.Contains(s, "=") && len(s) == 2 && n.takesValue(s[1:]):
			pos++
		case !strings.HasPrefix(s, "-") && s == x:
			return append(slices.Clone(args[:pos]), args[pos+1:]...)
		}
	}
	return args
}

// unknownVerb answers a command that only groups verbs: its help without
// a verb, a usage error (with cobra's suggestions) for an unknown one.
func (n *node) unknownVerb(args []string, out io.Writer) error {
	if len(args) == 0 {
		_, err := io.WriteString(out, n.help())
		return err
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], n.path())
	var near []string
	for _, s := range n.subs {
		name := s.c.Name()
		if !s.c.Hidden && (levenshtein(strings.ToLower(args[0]), strings.ToLower(name)) <= 2 || strings.HasPrefix(strings.ToLower(name), strings.ToLower(args[0]))) {
			near = append(near, name)
		}
	}
	if len(near) > 0 {
		msg += " (did you mean " + strings.Join(near, " or ") + "?)"
	}
	return usageError{fmt.Errorf("%s\nsee `%s --help`", msg, n.path())}
}

func levenshtein(s, t string) int {
	prev := make([]int, len(t)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(s); i++ {
		cur := make([]int, len(t)+1)
		cur[0] = i
		for j := 1; j <= len(t); j++ {
			if s[i-1] == t[j-1] {
				cur[j] = prev[j-1]
			} else {
				cur[j] = 1 + min(prev[j], cur[j-1], prev[j-1])
			}
		}
		prev = cur
	}
	return prev[len(t)]
}

// flagSpec is a flag as parsed and listed.
type flagSpec struct {
	name, short, usage string
	b                  *bool
	s                  *string
	def                string
	inherited          bool
	implicit           bool // --help or --version, which every command has
}

func spec(f Flag, def string, inherited bool) flagSpec {
	return flagSpec{name: f.Name, usage: f.Usage, b: f.Bool, s: f.String, def: def, inherited: inherited}
}

// value is the flag's current value as text.
func (f Flag) value() string {
	if f.String != nil {
		return *f.String
	}
	return strconv.FormatBool(*f.Bool)
}

// flagSet is every flag n parses: its own, --help, root's --version (on
// root), and root's flags, which every verb inherits unless it has one of
// the same name.
func (n *node) flagSet(help, version *bool, withVersion bool) []flagSpec {
	var fs []flagSpec
	for i, f := range n.c.Flags {
		fs = append(fs, spec(f, n.defs[i], false))
	}
	fs = append(fs, flagSpec{name: "help", short: "h", usage: "help for " + n.c.Name(), b: help, def: "false", implicit: true})
	if n.parent == nil && withVersion {
		fs = append(fs, flagSpec{name: "version", short: "v", usage: "version for " + n.c.Name(), b: version, def: "false", implicit: true})
	}
	if n.parent != nil {
		root := n.root()
	inherit:
		for i, f := range root.c.Flags {
			for _, have := range fs {
				if have.name == f.Name {
					continue inherit
				}
			}
			fs = append(fs, spec(f, root.defs[i], true))
		}
	}
	return fs
}

func (f flagSpec) set(value string) error {
	if f.s != nil {
		*f.s = value
		return nil
	}
	v, err := strconv.ParseBool(value)
	if err != nil {
		name := "--" + f.name
		if f.short != "" {
			name = "-" + f.short + ", --" + f.name
		}
		return fmt.Errorf("invalid argument %q for %q flag: %v", value, name, err)
	}
	*f.b = v
	return nil
}

// parseFlags is pflag's parse with interspersed flags: it sets the flags
// argv gives and returns the other arguments.
func parseFlags(fs []flagSpec, argv []string) ([]string, error) {
	lookup := func(name string, short bool) (flagSpec, bool) {
		for _, f := range fs {
			if !short && f.name == name || short && f.short == name {
				return f, true
			}
		}
		return flagSpec{}, false
	}
	var args []string
	for len(argv) > 0 {
		s := argv[0]
		argv = argv[1:]
		switch {
		case len(s) < 2 || s[0] != '-':
			args = append(args, s)
		case s == "--":
			return append(args, argv...), nil
		case strings.HasPrefix(s, "--"):
			name, value, hasValue := strings.Cut(s[2:], "=")
			if name == "" || name[0] == '-' || s[2] == '=' {
				return nil, fmt.Errorf("bad flag syntax: %s", s)
			}
			f, ok := lookup(name, false)
			switch {
			case !ok:
				return nil, fmt.Errorf("unknown flag: --%s", name)
			case hasValue:
			case f.b != nil:
				value = "true"
			case len(argv) > 0:
				value, argv = argv[0], argv[1:]
			default:
				return nil, fmt.Errorf("flag needs an argument: --%s", name)
			}
			if err := f.set(value); err != nil {
				return nil, err
			}
		default: // -abc: one-letter flags
			for shorts := s[1:]; shorts != ""; {
				f, ok := lookup(shorts[:1], true)
				if !ok {
					// pflag names the flag string(byte), then quotes that
					// string's first byte as a rune: a non-ASCII byte shows
					// as its UTF-8 lead byte. Same words, same bytes.
					c := rune(string(rune(shorts[0]))[0])
					return nil, fmt.Errorf("unknown shorthand flag: %q in -%s", c, shorts)
				}
				var value string
				switch {
				case len(shorts) > 2 && shorts[1] == '=':
					value, shorts = shorts[2:], ""
				case f.b != nil:
					value, shorts = "true", shorts[1:]
				case len(shorts) > 1:
					value, shorts = shorts[1:], ""
				case len(argv) > 0:
					value, argv, shorts = argv[0], argv[1:], ""
				default:
					return nil, fmt.Errorf("flag needs an argument: %q in -%s", shorts[0], shorts)
				}
				if err := f.set(value); err != nil {
					return nil, err
				}
			}
		}
	}
	return args, nil
}
