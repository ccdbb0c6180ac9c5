package hookcli

import (
	"fmt"
	"slices"
	"strings"
)

// help is a command's --help as cobra's default help and usage templates
// write it, with pflag's flag table.
func (n *node) help() string {
	var b strings.Builder
	if about := strings.TrimRight(cmp(n.c.Long, n.c.Short), " \t\r\n"); about != "" {
		b.WriteString(about + "\n\n")
	}
	// Every command runs: one that only groups verbs answers an unknown
	// one (and both binaries list it so).
	b.WriteString("Usage:\n  " + n.useLine())
	if n.hasVisibleSubs() {
		b.WriteString("\n  " + n.path() + " [command]")
	}
	if n.c.Example != "" {
		b.WriteString("\n\nExamples:\n" + n.c.Example)
	}
	if n.hasVisibleSubs() {
		b.WriteString("\n\nAvailable Commands:")
		for _, s := range n.subs {
			if !s.c.Hidden {
				fmt.Fprintf(&b, "\n  %-*s %s", n.namePad, s.c.Name(), s.c.Short)
			}
		}
	}
	var help, version bool
	var local, inherited []flagSpec
	for _, f := range n.flagSet(&help, &version, true) {
		if f.inherited {
			inherited = append(inherited, f)
		} else {
			local = append(local, f)
		}
	}
	b.WriteString("\n\nFlags:\n" + strings.TrimRight(flagUsages(local), " \t\r\n"))
	if len(inherited) > 0 {
		b.WriteString("\n\nGlobal Flags:\n" + strings.TrimRight(flagUsages(inherited), " \t\r\n"))
	}
	if n.hasVisibleSubs() {
		fmt.Fprintf(&b, "\n\nUse \"%s [command] --help\" for more information about a command.", n.path())
	}
	b.WriteString("\n")
	return b.String()
}

func cmp(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func (n *node) hasVisibleSubs() bool {
	for _, s := range n.subs {
		if !s.c.Hidden {
			return true
		}
	}
	return false
}

// flagUsages is pflag's FlagUsages: one line a flag, sorted by name, the
// usage texts aligned one column past the longest flag.
func flagUsages(fs []flagSpec) string {
	fs = slices.Clone(fs)
	slices.SortFunc(fs, func(a, b flagSpec) int { return strings.Compare(a.name, b.name) })
	type row struct{ flag, usage string }
	var rows []row
	width := 0
	for _, f := range fs {
		line := "      --" + f.name
		if f.short != "" {
			line = "  -" + f.short + ", --" + f.name
		}
		varname, usage := unquoteUsage(f)
		if varname != "" {
			line += " " + varname
		}
		width = max(width, len(line)+1)
		switch {
		case f.s != nil && f.def != "":
			usage += fmt.Sprintf(" (default %q)", f.def)
		case f.b != nil && f.def != "false":
			usage += " (default " + f.def + ")"
		}
		rows = append(rows, row{line, usage})
	}
	var b strings.Builder
	for _, r := range rows {
		// pflag's Fprintln(flag, spacing, usage): a space each side of
		// the spacing, which fills to the widest flag.
		b.WriteString(r.flag + " " + strings.Repeat(" ", width-len(r.flag)) + " " + r.usage + "\n")
	}
	return b.String()
}

// unquoteUsage is pflag's: a `name` in back quotes in the usage is the
// value's name; else a string flag's value is "string", a bool's none.
func unquoteUsage(f flagSpec) (name, usage string) {
	usage = f.usage
	if i := strings.IndexByte(usage, '`'); i >= 0 {
		if j := strings.IndexByte(usage[i+1:], '`'); j >= 0 {
			name = usage[i+1 : i+1+j]
			return name, usage[:i] + name + usage[i+2+j:]
		}
	}
	if f.s != nil {
		return "string", usage
	}
	return "", usage
}
