// Package hooks holds module manifests (module.yaml), the typed values that
// flow in and out of hooks, and the admission check for module folders.
//
// See docs/architecture.md (Modules and hooks).
package hooks

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/wardenhq/warden/engine/egress"
)

// ManifestFile is the name of the manifest inside a module folder.
const ManifestFile = "module.yaml"

// MaxManifestSize is the largest module.yaml accepted, in bytes.
const MaxManifestSize = 256 << 10

// maxManifestDepth bounds the nesting of a manifest (the format needs 4 levels).
const maxManifestDepth = 64

// maxManifestUnits bounds the number of YAML tokens (roughly: words plus
// indicator characters) of a manifest. The YAML parser is superlinear on
// some shapes of input; real manifests are far below this.
const maxManifestUnits = 16384

// Defaults for hook limits.
const (
	DefaultTimeout     = 10 * time.Minute
	DefaultIdleTimeout = 30 * time.Second
	// MaxKillGrace bounds kill_grace: a stopping hook holds up a
	// shutdown of the engine for that long.
	MaxKillGrace = time.Minute
)

// Capabilities a hook may list in `requires`.
const (
	CapOperator = "operator"
	CapHands    = "hands"
)

// KnownCapabilities lists the capabilities a hook may require, sorted.
var KnownCapabilities = []string{CapHands, CapOperator}

// Compiled on first use, not at init: every warden process (each CLI verb)
// paid for these at start, the {0,62} bounds making each a large program.
var (
	idRe     = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`) })
	hookRe   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9_-]{0,62}$`) })
	nameRe   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`) })
	ioNameRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9_-]{0,62}$`) })
)

// ValidModuleID reports whether id is a valid module id.
func ValidModuleID(id string) bool { return idRe().MatchString(id) }

// ValidHookName reports whether name is a valid hook name.
func ValidHookName(name string) bool { return hookRe().MatchString(name) }

// ValidSecretName reports whether name is a valid secret or config name.
func ValidSecretName(name string) bool { return nameRe().MatchString(name) }

// Manifest is a decoded module.yaml.
type Manifest struct {
	ID          string
	Version     string
	Description string
	Secrets     []string // secret names hooks may get/set/delete (nil when none)
	Config      []string // config names hooks may set/delete (nil when none)
	Hooks       map[string]*Hook
	Dir         string // absolute module dir (not from YAML)
	File        string // path of the manifest file (not from YAML)
}

// Hook is one entry of a manifest's `hooks` map.
type Hook struct {
	Name        string
	Run         []string // argv; Run[0] is relative to the module dir
	RunLine     int      // module.yaml line of run (0 when unknown)
	Timeout     time.Duration
	IdleTimeout time.Duration
	Requires    []string        // nil when none
	Inputs      map[string]Type // nil when none
	Outputs     map[string]Type // nil when none
	// Network true asks for the host's network (the policy decides).
	Network bool
	// Egress is set when network is a list of destinations: the jail
	// keeps its empty network namespace and the hook reaches the world
	// only through the run's filtering proxy. Destinations is the list as
	// written, canonical; what the hook may reach is still the policy's
	// decision (a module author's list is a declaration, never a grant).
	Egress       bool
	Destinations []string
	// KillGrace is the time between SIGTERM and SIGKILL (kill_grace;
	// DefaultKillGrace when not set).
	KillGrace time.Duration
	// Limits are the declared resource limits (zero fields: not declared;
	// see Effective). LimitLines has the line of each declared one.
	Limits     Resources
	LimitLines map[string]int
}

// HookNames returns the manifest's hook names, sorted.
func (m *Manifest) HookNames() []string {
	names := make([]string, 0, len(m.Hooks))
	for n := range m.Hooks {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ManifestError is a refusal of a manifest, pointing at a file, a line and a
// dotted key path (e.g. "hooks.on_install.timeout", "secrets[1]").
type ManifestError struct {
	File    string
	Line    int // 1-based; 0 when unknown
	Col     int // 1-based; 0 when unknown (only YAML syntax errors have one)
	Key     string
	Problem string
}

func (e *ManifestError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteString(":")
		b.WriteString(strconv.Itoa(e.Line))
		if e.Col > 0 {
			b.WriteString(":")
			b.WriteString(strconv.Itoa(e.Col))
		}
	}
	b.WriteString(": ")
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString(e.Problem)
	return b.String()
}

// LoadManifest reads and decodes dir/module.yaml. dir must be absolute.
// It does not run AdmitModulePath; callers that execute code from the
// module must do that too.
func LoadManifest(dir string) (*Manifest, error) {
	file := filepath.Join(dir, ManifestFile)
	fail := func(format string, args ...any) error {
		return &ManifestError{File: file, Problem: fmt.Sprintf(format, args...)}
	}
	if !filepath.IsAbs(dir) {
		return nil, fail("module dir %q is not an absolute path", dir)
	}
	dir = filepath.Clean(dir)
	file = filepath.Join(dir, ManifestFile)
	fi, err := os.Lstat(file)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fail("no %s in %s (a module is a folder with a %s)", ManifestFile, dir, ManifestFile)
		}
		return nil, fail("%v", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fail("not a regular file (%s); %s must be a plain file, not a symlink or special file", fi.Mode().Type(), ManifestFile)
	}
	if fi.Size() > MaxManifestSize {
		return nil, fail("too large (%d bytes; the limit is %d)", fi.Size(), MaxManifestSize)
	}
	f, err := os.OpenFile(file, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fail("%v", err)
	}
	defer f.Close()
	if fi2, err := f.Stat(); err != nil || !fi2.Mode().IsRegular() {
		return nil, fail("changed while being opened or is not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxManifestSize+1))
	if err != nil {
		return nil, fail("%v", err)
	}
	if len(data) > MaxManifestSize {
		return nil, fail("too large (more than %d bytes)", MaxManifestSize)
	}
	m, err := ParseManifest(file, data)
	if err != nil {
		return nil, err
	}
	m.Dir = dir
	return m, nil
}

// ParseManifest decodes a module.yaml. file is used in errors and to set
// File (and Dir, when file is absolute). The decoding is strict: unknown
// keys, wrong types, bad names and bad values are refused with a
// *ManifestError. Anchors, aliases, tags, merge keys, directives and
// multi-document files are refused too.
func ParseManifest(file string, data []byte) (m *Manifest, err error) {
	d := &manifestDecoder{file: file}
	defer func() {
		// The decoder is written not to panic, and the YAML parser should
		// not either; this is a last line of defence for hostile input.
		if r := recover(); r != nil {
			m = nil
			err = &ManifestError{File: file, Problem: fmt.Sprintf("cannot parse manifest (internal error: %v)", r)}
		}
	}()
	if len(data) > MaxManifestSize {
		return nil, d.errf(0, "", "too large (%d bytes; the limit is %d)", len(data), MaxManifestSize)
	}
	if err := d.preScan(data); err != nil {
		return nil, err
	}
	m, err = d.decode(data)
	if err != nil {
		return nil, err
	}
	m.File = file
	if filepath.IsAbs(file) {
		m.Dir = filepath.Dir(filepath.Clean(file))
	}
	return m, nil
}

type manifestDecoder struct {
	file string
}

func (d *manifestDecoder) errf(line int, key, format string, args ...any) *ManifestError {
	if r := []rune(key); len(r) > 120 {
		key = string(r[:57]) + "..." + string(r[len(r)-60:])
	}
	return &ManifestError{File: d.file, Line: line, Key: key, Problem: fmt.Sprintf(format, args...)}
}

func nodeLine(n ast.Node) int {
	if n == nil {
		return 0
	}
	tk := n.GetToken()
	if tk == nil || tk.Position == nil {
		return 0
	}
	return tk.Position.Line
}

// printable renders user text (keys, values) safely for an error message.
func printableKey(s string) string {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == '"' || r == '\\' || r == 0xfffd || (r >= 0x80 && r < 0xa0) {
			return strconv.Quote(s)
		}
	}
	if len(s) > 80 {
		return strconv.Quote(s[:77] + "...")
	}
	return s
}

func joinKey(parent, key string) string {
	key = printableKey(key)
	if parent == "" {
		return key
	}
	return parent + "." + key
}

func indexKey(parent string, i int) string {
	return parent + "[" + strconv.Itoa(i) + "]"
}

// preScan bounds the work the YAML parser will do: it counts tokens
// (conservatively) and the nesting of flow collections ([ and {), skipping
// comments and quoted scalars approximately. It errs on the side of
// counting too much, which only matters for absurd manifests.
func (d *manifestDecoder) preScan(data []byte) error {
	line, units, depth := 1, 0, 0
	inField, comment, escaped := false, false, false
	var quote byte
	prev := byte('\n')
	for _, c := range data {
		switch c {
		case ' ', '\t', '\r':
			inField = false
		case '\n':
			inField, comment = false, false
		default:
			if !inField {
				inField = true
				units++
			}
		}
		switch c {
		case '[', ']', '{', '}', ',', ':', '-', '?', '&', '*', '!', '|', '>', '#', '\'', '"', '\n':
			units++
		}
		if units > maxManifestUnits {
			return d.errf(line, "", "too complex (more than %d YAML tokens); a manifest should be small", maxManifestUnits)
		}
		switch {
		case comment:
		case quote == '"':
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				quote = 0
			}
		case quote == '\'':
			if c == '\'' {
				quote = 0
			}
		case c == '#' && (prev == ' ' || prev == '\t' || prev == '\n'):
			comment = true
		case (c == '"' || c == '\'') && strings.IndexByte(" \t\r\n[{,:", prev) >= 0:
			quote = c
		case c == '[' || c == '{':
			depth++
			if depth > maxManifestDepth/2 {
				return d.errf(line, "", "nested too deeply (more than %d levels of [ or {)", maxManifestDepth/2)
			}
		case c == ']' || c == '}':
			if depth > 0 {
				depth--
			}
		}
		if c == '\n' {
			line++
		}
		prev = c
	}
	return nil
}

// forbidden walks the whole tree and refuses YAML features that the
// manifest format does not use, naming the key path where they appear.
func (d *manifestDecoder) forbidden(n ast.Node, path string, depth int) error {
	if n == nil {
		return nil
	}
	if depth > maxManifestDepth {
		return d.errf(nodeLine(n), path, "nested too deeply (more than %d levels)", maxManifestDepth)
	}
	switch v := n.(type) {
	case *ast.AnchorNode:
		return d.errf(nodeLine(n), path, "YAML anchors (&name) are not allowed in %s", ManifestFile)
	case *ast.AliasNode:
		return d.errf(nodeLine(n), path, "YAML aliases (*name) are not allowed in %s", ManifestFile)
	case *ast.TagNode:
		return d.errf(nodeLine(n), path, "YAML tags (!tag) are not allowed in %s; quote the value instead", ManifestFile)
	case *ast.MergeKeyNode:
		return d.errf(nodeLine(n), path, "YAML merge keys (<<) are not allowed in %s", ManifestFile)
	case *ast.DirectiveNode:
		return d.errf(nodeLine(n), path, "YAML directives (%%...) are not allowed in %s", ManifestFile)
	case *ast.MappingNode:
		for _, mv := range v.Values {
			if err := d.forbidden(mv, path, depth+1); err != nil {
				return err
			}
		}
	case *ast.MappingValueNode:
		if err := d.forbidden(v.Key, path, depth+1); err != nil {
			return err
		}
		kp := path
		if key, ok := scalarText(v.Key); ok {
			kp = joinKey(path, key)
		}
		return d.forbidden(v.Value, kp, depth+1)
	case *ast.MappingKeyNode:
		return d.forbidden(v.Value, path, depth+1)
	case *ast.SequenceNode:
		for i, it := range v.Values {
			if err := d.forbidden(it, indexKey(path, i), depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

func (d *manifestDecoder) decode(data []byte) (*Manifest, error) {
	f, err := parser.ParseBytes(data, 0, parser.AllowDuplicateMapKey())
	if err != nil {
		line, col, msg := YAMLErrorAt(err)
		e := d.errf(line, "", "invalid YAML: %s", msg)
		e.Col = col
		return nil, e
	}
	var docs []*ast.DocumentNode
	if f != nil {
		for _, doc := range f.Docs {
			if doc != nil {
				docs = append(docs, doc)
			}
		}
	}
	for _, doc := range docs {
		if err := d.forbidden(doc.Body, "", 0); err != nil {
			return nil, err
		}
	}
	if len(docs) > 1 {
		line := 0
		if docs[1].Start != nil && docs[1].Start.Position != nil {
			line = docs[1].Start.Position.Line
		} else {
			line = nodeLine(docs[1].Body)
		}
		return nil, d.errf(line, "", "more than one YAML document; %s must hold exactly one", ManifestFile)
	}
	var body ast.Node
	if len(docs) == 1 {
		body = docs[0].Body
	}
	return d.manifest(body)
}

// yamlEntry is one key/value pair of a mapping.
type yamlEntry struct {
	key   string
	path  string
	line  int // line of the key
	value ast.Node
}

// mapping returns the entries of a mapping node, refusing non-string keys
// and duplicated keys. A null node is an empty mapping when nullOK.
func (d *manifestDecoder) mapping(n ast.Node, path, what string) ([]yamlEntry, error) {
	var values []*ast.MappingValueNode
	switch v := n.(type) {
	case *ast.MappingNode:
		values = v.Values
	case *ast.MappingValueNode:
		values = []*ast.MappingValueNode{v}
	default:
		return nil, d.errf(nodeLine(n), path, "expected %s, got %s", what, describeNode(n))
	}
	seen := make(map[string]int, len(values))
	out := make([]yamlEntry, 0, len(values))
	for _, mv := range values {
		if mv == nil {
			continue
		}
		var kn ast.Node = mv.Key
		if k, ok := kn.(*ast.MappingKeyNode); ok {
			kn = k.Value
		}
		line := nodeLine(kn)
		if line == 0 {
			line = nodeLine(mv)
		}
		key, ok := scalarText(kn)
		if !ok {
			return nil, d.errf(line, path, "keys must be plain strings, got %s", describeNode(kn))
		}
		kp := joinKey(path, key)
		if first, dup := seen[key]; dup {
			return nil, d.errf(line, kp, "duplicated key (first at line %d)", first)
		}
		seen[key] = line
		out = append(out, yamlEntry{key: key, path: kp, line: line, value: mv.Value})
	}
	return out, nil
}

// scalarText returns the text of a string or numeric scalar.
func scalarText(n ast.Node) (string, bool) {
	switch v := n.(type) {
	case *ast.StringNode:
		return v.Value, true
	case *ast.LiteralNode:
		if v.Value == nil {
			return "", true
		}
		return v.Value.Value, true
	case *ast.IntegerNode, *ast.FloatNode:
		tk := n.GetToken()
		if tk == nil {
			return "", false
		}
		return tk.Value, true
	}
	return "", false
}

// stringValue returns the text of a string scalar (numbers are accepted
// when numbersOK, using their source spelling, e.g. version: 1.0).
func (d *manifestDecoder) stringValue(n ast.Node, path string, numbersOK bool) (string, error) {
	switch n.(type) {
	case *ast.StringNode, *ast.LiteralNode:
		s, _ := scalarText(n)
		return s, nil
	case *ast.IntegerNode, *ast.FloatNode:
		if numbersOK {
			if s, ok := scalarText(n); ok {
				return s, nil
			}
		}
	}
	return "", d.errf(nodeLine(n), path, "expected a string, got %s", describeNode(n))
}

func isNullNode(n ast.Node) bool {
	if n == nil {
		return true
	}
	_, ok := n.(*ast.NullNode)
	return ok
}

// describe names the YAML kind of a node for error messages.
func describeNode(n ast.Node) string {
	switch v := n.(type) {
	case nil, *ast.NullNode:
		return "nothing (null)"
	case *ast.StringNode, *ast.LiteralNode:
		s, _ := scalarText(n)
		return fmt.Sprintf("string %s", shortQuote(s))
	case *ast.IntegerNode, *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		return "number " + shortQuote(n.GetToken().Value)
	case *ast.BoolNode:
		return "bool " + v.Token.Value
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	case *ast.MappingKeyNode:
		return "a complex key"
	default:
		return "a " + n.Type().String()
	}
}

func shortQuote(s string) string {
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return strconv.Quote(s)
}

// sequence returns the items of a list node. null is an empty list when
// nullOK.
func (d *manifestDecoder) sequence(n ast.Node, path, what string, nullOK bool) ([]ast.Node, error) {
	if nullOK && isNullNode(n) {
		return nil, nil
	}
	s, ok := n.(*ast.SequenceNode)
	if !ok {
		return nil, d.errf(nodeLine(n), path, "expected a list of %s, got %s", what, describeNode(n))
	}
	return s.Values, nil
}

// nameList decodes a list of unique names matching re.
func (d *manifestDecoder) nameList(n ast.Node, path, what string, re *regexp.Regexp, rule string) ([]string, error) {
	items, err := d.sequence(n, path, what+"s", true)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(items))
	seen := map[string]int{}
	for i, it := range items {
		ip := indexKey(path, i)
		s, err := d.stringValue(it, ip, false)
		if err != nil {
			return nil, err
		}
		if !re.MatchString(s) {
			return nil, d.errf(nodeLine(it), ip, "invalid %s %s (must match %s)", what, shortQuote(s), rule)
		}
		if first, dup := seen[s]; dup {
			return nil, d.errf(nodeLine(it), ip, "duplicated %s %q (first at line %d)", what, s, first)
		}
		seen[s] = nodeLine(it)
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

var manifestTopKeys = []string{"id", "version", "description", "secrets", "config", "hooks"}
var manifestHookKeys = []string{"run", "timeout", "idle_timeout", "kill_grace", "requires", "inputs", "outputs", "network", "limits"}

func unknownKeyProblem(known []string) string {
	return "unknown key (known: " + strings.Join(known, ", ") + ")"
}

func (d *manifestDecoder) manifest(body ast.Node) (*Manifest, error) {
	if isNullNode(body) {
		return nil, d.errf(1, "id", "missing (%s is empty; it needs at least id, version and hooks)", ManifestFile)
	}
	entries, err := d.mapping(body, "", "a mapping with id, version and hooks")
	if err != nil {
		return nil, err
	}
	m := &Manifest{}
	seen := map[string]bool{}
	for _, e := range entries {
		seen[e.key] = true
		switch e.key {
		case "id":
			s, err := d.stringValue(e.value, e.path, true)
			if err != nil {
				return nil, err
			}
			if !idRe().MatchString(s) {
				return nil, d.errf(nodeLine(e.value), e.path, "invalid module id %s (must match ^[a-z0-9][a-z0-9-]{0,62}$)", shortQuote(s))
			}
			m.ID = s
		case "version":
			s, err := d.stringValue(e.value, e.path, true)
			if err != nil {
				return nil, err
			}
			s = strings.TrimSpace(s)
			if s == "" {
				return nil, d.errf(nodeLine(e.value), e.path, "must not be empty")
			}
			if len(s) > 128 || strings.ContainsAny(s, "\x00\n\r\t") {
				return nil, d.errf(nodeLine(e.value), e.path, "invalid version %s (one line, at most 128 bytes)", shortQuote(s))
			}
			m.Version = s
		case "description":
			if isNullNode(e.value) {
				continue
			}
			s, err := d.stringValue(e.value, e.path, true)
			if err != nil {
				return nil, err
			}
			if strings.ContainsRune(s, 0) {
				return nil, d.errf(nodeLine(e.value), e.path, "must not contain NUL bytes")
			}
			m.Description = strings.TrimSpace(s)
		case "secrets":
			if m.Secrets, err = d.nameList(e.value, e.path, "secret name", nameRe(), "^[a-z][a-z0-9_]{0,62}$"); err != nil {
				return nil, err
			}
		case "config":
			if m.Config, err = d.nameList(e.value, e.path, "config name", nameRe(), "^[a-z][a-z0-9_]{0,62}$"); err != nil {
				return nil, err
			}
		case "hooks":
			if m.Hooks, err = d.hooks(e); err != nil {
				return nil, err
			}
		default:
			return nil, d.errf(e.line, e.path, "%s", unknownKeyProblem(manifestTopKeys))
		}
	}
	line := nodeLine(body)
	for _, k := range []string{"id", "version", "hooks"} {
		if !seen[k] {
			return nil, d.errf(line, k, "missing (required)")
		}
	}
	return m, nil
}

func (d *manifestDecoder) hooks(e yamlEntry) (map[string]*Hook, error) {
	if isNullNode(e.value) {
		return nil, d.errf(e.line, e.path, "must declare at least one hook")
	}
	entries, err := d.mapping(e.value, e.path, "a mapping of hook names to hooks")
	if err != nil {
		return nil, err
	}
	if len(entries) == 0 {
		return nil, d.errf(e.line, e.path, "must declare at least one hook")
	}
	hooks := make(map[string]*Hook, len(entries))
	for _, he := range entries {
		if !hookRe().MatchString(he.key) {
			return nil, d.errf(he.line, he.path, "invalid hook name (must match ^[a-z][a-z0-9_-]{0,62}$)")
		}
		h, err := d.hook(he)
		if err != nil {
			return nil, err
		}
		hooks[he.key] = h
	}
	return hooks, nil
}

func (d *manifestDecoder) hook(e yamlEntry) (*Hook, error) {
	if isNullNode(e.value) {
		return nil, d.errf(e.line, joinKey(e.path, "run"), "missing (required)")
	}
	entries, err := d.mapping(e.value, e.path, "a hook (a mapping with run, timeout, ...)")
	if err != nil {
		return nil, err
	}
	h := &Hook{Name: e.key, Timeout: DefaultTimeout, IdleTimeout: DefaultIdleTimeout, KillGrace: DefaultKillGrace}
	hasRun := false
	for _, f := range entries {
		switch f.key {
		case "run":
			hasRun = true
			h.RunLine = f.line
			if h.Run, err = d.run(f); err != nil {
				return nil, err
			}
		case "timeout":
			if h.Timeout, err = d.duration(f); err != nil {
				return nil, err
			}
		case "idle_timeout":
			if h.IdleTimeout, err = d.duration(f); err != nil {
				return nil, err
			}
		case "kill_grace":
			if h.KillGrace, err = d.duration(f); err != nil {
				return nil, err
			}
			if h.KillGrace > MaxKillGrace {
				return nil, d.errf(nodeLine(f.value), f.path, "at most %s (a hook that needs longer to stop should checkpoint as it goes)", MaxKillGrace)
			}
		case "limits":
			if err := d.limits(f, h); err != nil {
				return nil, err
			}
		case "requires":
			items, err := d.sequence(f.value, f.path, "capabilities", true)
			if err != nil {
				return nil, err
			}
			seen := map[string]bool{}
			for i, it := range items {
				ip := indexKey(f.path, i)
				s, err := d.stringValue(it, ip, false)
				if err != nil {
					return nil, err
				}
				if s != CapOperator && s != CapHands {
					return nil, d.errf(nodeLine(it), ip, "unknown capability %s (known: %s)", shortQuote(s), strings.Join(KnownCapabilities, ", "))
				}
				if seen[s] {
					return nil, d.errf(nodeLine(it), ip, "duplicated capability %q", s)
				}
				seen[s] = true
				h.Requires = append(h.Requires, s)
			}
		case "inputs":
			if h.Inputs, err = d.typeMap(f, "input"); err != nil {
				return nil, err
			}
		case "outputs":
			if h.Outputs, err = d.typeMap(f, "output"); err != nil {
				return nil, err
			}
		case "network":
			if err := d.network(f, h); err != nil {
				return nil, err
			}
		default:
			return nil, d.errf(f.line, f.path, "%s", unknownKeyProblem(manifestHookKeys))
		}
	}
	if !hasRun {
		return nil, d.errf(e.line, joinKey(e.path, "run"), "missing (required)")
	}
	return h, nil
}

// network reads `network: true|false` or a list of destinations
// (egress.Parse); a bad entry is refused at its own line.
func (d *manifestDecoder) network(f yamlEntry, h *Hook) error {
	if b, ok := f.value.(*ast.BoolNode); ok {
		h.Network = b.Value
		return nil
	}
	if _, ok := f.value.(*ast.SequenceNode); !ok {
		return d.errf(nodeLine(f.value), f.path, "expected true, false or a list of destinations (api.github.com:443, *.pythonhosted.org:443, pypi.org, ip:203.0.113.7:443), got %s", describeNode(f.value))
	}
	items, err := d.sequence(f.value, f.path, "destinations", false)
	if err != nil {
		return err
	}
	if len(items) > egress.MaxEntries {
		return d.errf(nodeLine(f.value), f.path, "%d destinations: at most %d", len(items), egress.MaxEntries)
	}
	seen := map[string]int{}
	h.Egress, h.Destinations = true, []string{}
	for i, it := range items {
		ip := indexKey(f.path, i)
		s, err := d.stringValue(it, ip, false)
		if err != nil {
			return err
		}
		dest, err := egress.Parse(s)
		if err != nil {
			return d.errf(nodeLine(it), ip, "%v", err)
		}
		c := dest.String()
		if first, dup := seen[c]; dup {
			return d.errf(nodeLine(it), ip, "duplicated destination %s (first at line %d)", shortQuote(c), first)
		}
		seen[c] = nodeLine(it)
		h.Destinations = append(h.Destinations, c)
	}
	return nil
}

func (d *manifestDecoder) run(f yamlEntry) ([]string, error) {
	if isNullNode(f.value) {
		return nil, d.errf(f.line, f.path, "must not be empty (a list: program relative to the module dir, then its arguments)")
	}
	items, err := d.sequence(f.value, f.path, "strings (argv: [./hooks/x.sh, --flag])", false)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, d.errf(nodeLine(f.value), f.path, "must not be empty (a list: program relative to the module dir, then its arguments)")
	}
	argv := make([]string, 0, len(items))
	for i, it := range items {
		ip := indexKey(f.path, i)
		s, err := d.stringValue(it, ip, i > 0)
		if err != nil {
			return nil, err
		}
		if strings.ContainsRune(s, 0) {
			return nil, d.errf(nodeLine(it), ip, "must not contain NUL bytes")
		}
		argv = append(argv, s)
	}
	prog := argv[0]
	ip := indexKey(f.path, 0)
	switch {
	case prog == "":
		return nil, d.errf(nodeLine(items[0]), ip, "program must not be empty")
	case filepath.IsAbs(prog):
		return nil, d.errf(nodeLine(items[0]), ip, "program %s is absolute; it must be relative to the module dir (e.g. ./hooks/x.sh)", shortQuote(prog))
	}
	clean := filepath.Clean(prog)
	if clean == "." || clean == ".." || strings.HasPrefix(clean, "../") {
		return nil, d.errf(nodeLine(items[0]), ip, "program %s escapes the module dir; it must name a file inside it (e.g. ./hooks/x.sh)", shortQuote(prog))
	}
	if strings.HasSuffix(prog, "/") {
		return nil, d.errf(nodeLine(items[0]), ip, "program %s names a directory; it must name a file inside the module dir", shortQuote(prog))
	}
	return argv, nil
}

func (d *manifestDecoder) duration(f yamlEntry) (time.Duration, error) {
	s, ok := f.value.(*ast.StringNode)
	if !ok {
		return 0, d.errf(nodeLine(f.value), f.path, "expected a duration like 30s or 2m, got %s", describeNode(f.value))
	}
	v, err := time.ParseDuration(strings.TrimSpace(s.Value))
	if err != nil {
		return 0, d.errf(nodeLine(f.value), f.path, "invalid duration %s (use e.g. 30s, 2m, 1h30m)", shortQuote(s.Value))
	}
	if v <= 0 {
		return 0, d.errf(nodeLine(f.value), f.path, "duration %s must be positive", shortQuote(s.Value))
	}
	return v, nil
}

func (d *manifestDecoder) typeMap(f yamlEntry, what string) (map[string]Type, error) {
	if isNullNode(f.value) {
		return nil, nil
	}
	out := map[string]Type{}
	entries, err := d.mapping(f.value, f.path, "a mapping of "+what+" names to types")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if !ioNameRe().MatchString(e.key) {
			return nil, d.errf(e.line, e.path, "invalid %s name (must match ^[a-z][a-z0-9_-]{0,62}$)", what)
		}
		s, ok := e.value.(*ast.StringNode)
		if !ok {
			return nil, d.errf(nodeLine(e.value), e.path, "expected a type (%s), got %s", typeSpellingList, describeNode(e.value))
		}
		t, err := ParseType(s.Value)
		if err != nil {
			return nil, d.errf(nodeLine(e.value), e.path, "%v", err)
		}
		if t.RW && what != "input" {
			return nil, d.errf(nodeLine(e.value), e.path, "path:rw is only meaningful for inputs; declare the output as path")
		}
		out[e.key] = t
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// CheckPrograms holds each hook's program to what the run will need: a
// regular file inside the module dir with an execute bit. Said in the
// module's terms (hooks/x.sh, module.yaml's line), since the run would
// only say "exec …: no such file or directory" from inside the jail,
// with exit 127.
func CheckPrograms(m *Manifest) error {
	for _, name := range m.HookNames() {
		h := m.Hooks[name]
		if len(h.Run) == 0 {
			continue
		}
		rel := filepath.Clean(h.Run[0])
		fail := func(format string, args ...any) error {
			return &ManifestError{File: m.File, Line: h.RunLine, Key: "hooks." + printableKey(name) + ".run[0]", Problem: fmt.Sprintf(format, args...)}
		}
		fi, err := os.Stat(filepath.Join(m.Dir, rel))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return fail("%s does not exist in the module dir %s", printableKey(rel), m.Dir)
		case err != nil:
			return fail("%s: %v", printableKey(rel), errText(err))
		case fi.IsDir():
			return fail("%s is a directory in the module dir; run names the hook's program", printableKey(rel))
		case !fi.Mode().IsRegular():
			return fail("%s is not a regular file (%s)", printableKey(rel), fi.Mode().Type())
		case fi.Mode().Perm()&0o111 == 0:
			return fail("%s is not executable: chmod +x %s", printableKey(rel), printableKey(rel))
		}
	}
	return nil
}

func errText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// yamlAt is goccy/go-yaml's "[LINE:COL] message" prefix, for errors that
// are not a *yaml.SyntaxError but still say where.
var yamlAt = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\s*\[(\d+):(\d+)\]\s*(.*)`) })

// YAMLErrorAt is where a YAML parse error points (1-based line and
// column; 0 when the parser gave none) and its message's first line, so
// that an error names the file's line and column, not only the message.
func YAMLErrorAt(err error) (line, col int, msg string) {
	var se *yaml.SyntaxError
	if errors.As(err, &se) {
		if se.Token != nil && se.Token.Position != nil {
			line, col = se.Token.Position.Line, se.Token.Position.Column
		}
		msg = se.Message
	} else {
		msg = err.Error()
		if m := yamlAt().FindStringSubmatch(msg); m != nil {
			line, _ = strconv.Atoi(m[1])
			col, _ = strconv.Atoi(m[2])
			msg = m[3]
		}
	}
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	return line, col, msg
}
