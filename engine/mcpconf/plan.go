package mcpconf

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
)

// Plan is a prepared change to one client's config: what the file holds
// now and what it will hold. Apply writes it; Diff shows it.
type Plan struct {
	Client  Client
	Path    string
	Name    string
	Before  []byte
	After   []byte
	Exists  bool   // the file exists now
	Old     *Entry // the entry there now, if any
	New     *Entry // the entry after (nil: removed)
	Changed bool
	// MissingDir is the file's directory when it does not exist: Diff
	// still shows the change, Apply refuses it (warden never creates a
	// client's directories).
	MissingDir string
	orig       original
}

// PlanInstall prepares adding or updating the name entry of client's
// config at path to run entry. Every file-safety check happens here; the
// result changes nothing until Apply.
func PlanInstall(c Client, path, name string, entry Entry) (*Plan, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	if err := AdmitExecutable(entry.Command); err != nil {
		return nil, err
	}
	entry.ApprovalMode = c.ApprovalMode
	return plan(c, path, name, &entry)
}

// PlanUninstall prepares removing the name entry.
func PlanUninstall(c Client, path, name string) (*Plan, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	return plan(c, path, name, nil)
}

func plan(c Client, path, name string, entry *Entry) (*Plan, error) {
	orig, err := readTarget(path)
	if err != nil {
		return nil, err
	}
	p := &Plan{Client: c, Path: path, Name: name, Before: orig.data, Exists: orig.exists, New: entry, MissingDir: orig.missingDir, orig: orig}
	var after []byte
	var old *Entry
	if c.TOML {
		after, old, err = editTOML(orig.data, name, entry)
	} else {
		after, old, err = editJSON(c, orig.data, name, entry)
	}
	if err != nil {
		fix := "fix the file by hand (or move it away to start fresh)"
		return nil, &Refusal{Path: path, Check: "strict parse", Problem: err.Error(), Fix: fix}
	}
	// What was written must read back as meant, and the rest as it was.
	var got *Entry
	if c.TOML {
		got, err = findTOML(after, name)
	} else {
		got, err = findJSON(after, name)
	}
	if err != nil || !sameEntry(got, entry) {
		return nil, fmt.Errorf("internal error: the edited %s does not read back as intended (%v); nothing was changed", path, err)
	}
	p.After, p.Old = after, old
	p.Changed = !bytes.Equal(orig.data, after) || (!orig.exists && entry != nil)
	return p, nil
}

func sameEntry(a, b *Entry) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	if len(a.Args) == 0 && len(b.Args) == 0 {
		return a.Command == b.Command && a.ApprovalMode == b.ApprovalMode
	}
	return reflect.DeepEqual(*a, *b)
}

// Apply writes the plan (see write): refused, with nothing changed, if
// the file changed since it was read. backup is the .bak written, if any.
func (p *Plan) Apply() (backup string, err error) {
	if !p.Changed {
		return "", nil
	}
	if p.MissingDir != "" {
		return "", missingDirRefusal(p.Path, p.MissingDir)
	}
	return write(p.Path, p.orig, p.After)
}

// Diff is a line diff of the change, "-" and "+" lines with a few lines
// of context, or "" when nothing changes.
func (p *Plan) Diff() string {
	if !p.Changed {
		return ""
	}
	a, b := splitLines(p.Before), splitLines(p.After)
	// Common prefix and suffix; the middle is the change (edits are one
	// contiguous region).
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	j := 0
	for j < len(a)-i && j < len(b)-i && a[len(a)-1-j] == b[len(b)-1-j] {
		j++
	}
	var out strings.Builder
	// git's form: a/ and b/ before the path without its leading slash.
	rel := strings.TrimPrefix(p.Path, "/")
	from := "a/" + rel
	if !p.Exists {
		from = "/dev/null"
	}
	fmt.Fprintf(&out, "--- %s\n+++ b/%s\n", from, rel)
	ctx := 3
	start := max(0, i-ctx)
	end := min(len(a), len(a)-j+ctx) // trailing context in a
	oldN := end - start
	newN := oldN - (len(a) - j - i) + (len(b) - j - i)
	fmt.Fprintf(&out, "@@ -%s +%s @@\n", hunkRange(start, oldN), hunkRange(start, newN))
	for _, l := range a[start:i] {
		out.WriteString(" " + l + "\n")
	}
	for _, l := range a[i : len(a)-j] {
		out.WriteString("-" + l + "\n")
	}
	for _, l := range b[i : len(b)-j] {
		out.WriteString("+" + l + "\n")
	}
	for _, l := range a[len(a)-j : end] {
		out.WriteString(" " + l + "\n")
	}
	return out.String()
}

// hunkRange is one side of a unified diff's hunk header: the first line
// (1-based) and the count; an empty side names the line before it, as
// diff and patch expect (-0,0 for a new file).
func hunkRange(start, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d,0", start)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}

func splitLines(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// Find reads the name entry of client's config at path: nil when the
// file or the entry is absent. The file is read under the same checks as
// for a change.
func Find(c Client, path, name string) (*Entry, error) {
	orig, err := readTarget(path)
	if err != nil || !orig.exists {
		return nil, err
	}
	if c.TOML {
		return findTOML(orig.data, name)
	}
	return findJSON(orig.data, name)
}
