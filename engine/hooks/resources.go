package hooks

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml/ast"
)

// Resources are the kernel-enforced limits of one jailed run (module.yaml
// `limits`, per hook). Memory and Pids (and CPU) go through a cgroup per
// run; Tmp and RunDir are the sizes of the jail's /tmp and /run/warden
// tmpfs. Zero means "not set" (the default applies).
type Resources struct {
	Memory int64   `json:"memory"`  // bytes
	Pids   int64   `json:"pids"`    // processes and threads
	CPU    float64 `json:"cpu"`     // CPUs' worth of time (1.0 = one core)
	Tmp    int64   `json:"tmp"`     // bytes of /tmp
	RunDir int64   `json:"run_dir"` // bytes of /run/warden
}

// DefaultResources are a hook's limits when its manifest does not say:
// small enough that a few hostile hooks at once leave a small host alive.
var DefaultResources = Resources{Memory: 512 << 20, Pids: 256, CPU: 1.0, Tmp: 64 << 20, RunDir: 16 << 20}

// DefaultCeiling is the operator's ceiling when config.yaml has no
// `limits`: what a module may raise its limits to.
var DefaultCeiling = Resources{Memory: 2 << 30, Pids: 1024, CPU: 2.0, Tmp: 512 << 20, RunDir: 64 << 20}

// Floors: below these a jail cannot even start (bwrap, a shell and the
// helper need a few processes and some memory), so a lower value is a
// mistake, refused where it is written.
var minResources = Resources{Memory: 32 << 20, Pids: 16, CPU: 0.01, Tmp: 1 << 20, RunDir: 1 << 20}

// Caps beyond which a value is certainly a typo (and would overflow the
// kernel's files): 1 TiB, 4M processes, 1024 CPUs.
var maxResources = Resources{Memory: 1 << 40, Pids: 1 << 22, CPU: 1024, Tmp: 1 << 40, RunDir: 1 << 40}

// ResourceKeys are the keys of a `limits` mapping, in display order.
var ResourceKeys = []string{"memory", "pids", "cpu", "tmp", "run_dir"}

// Or fills the zero fields of r from d.
func (r Resources) Or(d Resources) Resources {
	if r.Memory == 0 {
		r.Memory = d.Memory
	}
	if r.Pids == 0 {
		r.Pids = d.Pids
	}
	if r.CPU == 0 {
		r.CPU = d.CPU
	}
	if r.Tmp == 0 {
		r.Tmp = d.Tmp
	}
	if r.RunDir == 0 {
		r.RunDir = d.RunDir
	}
	return r
}

// Min is, field by field, the smaller of r and c.
func (r Resources) Min(c Resources) Resources {
	return Resources{Memory: min(r.Memory, c.Memory), Pids: min(r.Pids, c.Pids), CPU: min(r.CPU, c.CPU),
		Tmp: min(r.Tmp, c.Tmp), RunDir: min(r.RunDir, c.RunDir)}
}

// Get returns the field named key (one of ResourceKeys) as a number.
func (r Resources) Get(key string) float64 {
	switch key {
	case "memory":
		return float64(r.Memory)
	case "pids":
		return float64(r.Pids)
	case "cpu":
		return r.CPU
	case "tmp":
		return float64(r.Tmp)
	case "run_dir":
		return float64(r.RunDir)
	}
	return 0
}

// Format renders the field named key as it is written in YAML ("512MiB",
// "256", "1.5").
func (r Resources) Format(key string) string {
	switch key {
	case "pids":
		return strconv.FormatInt(r.Pids, 10)
	case "cpu":
		return strconv.FormatFloat(r.CPU, 'f', -1, 64)
	}
	return FormatSize(int64(r.Get(key)))
}

// String lists every limit: "memory 512MiB, pids 256, cpu 1, tmp 64MiB,
// run_dir 16MiB".
func (r Resources) String() string {
	parts := make([]string, len(ResourceKeys))
	for i, k := range ResourceKeys {
		parts[i] = k + " " + r.Format(k)
	}
	return strings.Join(parts, ", ")
}

// Effective is what a hook runs with: its declared limits, the defaults
// (lowered to the ceiling) for the rest.
func (h *Hook) Effective(ceiling Resources) Resources {
	return h.Limits.Or(DefaultResources.Min(ceiling))
}

// CheckCeiling refuses a manifest whose hooks ask for more than the
// operator's ceiling, pointing at the line of the offending value.
func CheckCeiling(m *Manifest, ceiling Resources) error {
	for _, name := range m.HookNames() {
		h := m.Hooks[name]
		for _, k := range ResourceKeys {
			if h.Limits.Get(k) == 0 || h.Limits.Get(k) <= ceiling.Get(k) {
				continue
			}
			return &ManifestError{File: m.File, Line: h.LimitLines[k], Key: "hooks." + name + ".limits." + k,
				Problem: fmt.Sprintf("%s is above the operator's ceiling of %s (config.yaml limits.%s); lower it, or ask the operator to raise the ceiling",
					h.Limits.Format(k), ceiling.Format(k), k)}
		}
	}
	return nil
}

// sizeUnits are the units a size is written with.
var sizeUnits = []struct {
	name string
	mult int64
}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}

// ParseSize reads a size such as 512MiB, 1GiB or 64KiB (binary units; the
// unit is required, so that 512 is never taken for bytes by mistake).
func ParseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	for _, u := range sizeUnits {
		num, ok := strings.CutSuffix(s, u.name)
		if !ok {
			continue
		}
		num = strings.TrimSpace(num)
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || n < 0 || num == "" || num[0] == '+' {
			return 0, fmt.Errorf("invalid size %s (use a whole number and a unit: 512MiB, 1GiB, 64KiB)", strconv.Quote(s))
		}
		if n > math.MaxInt64/u.mult {
			return 0, fmt.Errorf("size %s is too large", strconv.Quote(s))
		}
		return n * u.mult, nil
	}
	return 0, fmt.Errorf("invalid size %s (use a whole number and a unit: 512MiB, 1GiB, 64KiB)", strconv.Quote(s))
}

// FormatSize writes n bytes in the largest binary unit that divides it.
func FormatSize(n int64) string {
	for _, u := range sizeUnits {
		if n != 0 && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}

// ParseResource reads one limit value from its YAML node, checked against
// the floors and caps. It is shared by module.yaml and config.yaml, so
// both spell limits alike. It returns the problem text (no file or line).
func ParseResource(key string, n ast.Node) (Resources, error) {
	var r Resources
	switch key {
	case "memory", "tmp", "run_dir":
		s, ok := n.(*ast.StringNode)
		if !ok {
			return r, fmt.Errorf("expected a size like 512MiB, got %s", describeNode(n))
		}
		v, err := ParseSize(s.Value)
		if err != nil {
			return r, err
		}
		switch key {
		case "memory":
			r.Memory = v
		case "tmp":
			r.Tmp = v
		default:
			r.RunDir = v
		}
	case "pids":
		in, ok := n.(*ast.IntegerNode)
		if !ok {
			return r, fmt.Errorf("expected a whole number of processes like 256, got %s", describeNode(n))
		}
		v, err := strconv.ParseInt(in.GetToken().Value, 10, 64)
		if err != nil {
			return r, fmt.Errorf("expected a whole number of processes like 256, got %s", describeNode(n))
		}
		r.Pids = v
	case "cpu":
		var text string
		switch n.(type) {
		case *ast.IntegerNode, *ast.FloatNode:
			text = n.GetToken().Value
		default:
			return r, fmt.Errorf("expected a number of CPUs like 1.0 or 0.5, got %s", describeNode(n))
		}
		v, err := strconv.ParseFloat(text, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return r, fmt.Errorf("expected a number of CPUs like 1.0 or 0.5, got %s", describeNode(n))
		}
		r.CPU = v
	default:
		return r, fmt.Errorf("%s", unknownKeyProblem(ResourceKeys))
	}
	if v := r.Get(key); v < minResources.Get(key) {
		return Resources{}, fmt.Errorf("%s is below the least a jail can run with (%s)", r.Format(key), minResources.Format(key))
	} else if v > maxResources.Get(key) {
		return Resources{}, fmt.Errorf("%s is more than %s, surely a mistake", r.Format(key), maxResources.Format(key))
	}
	return r, nil
}

// merge sets the fields of r that v sets (v holds one limit).
func (r *Resources) merge(v Resources) {
	*r = v.Or(*r)
}

// limits decodes a hook's `limits` mapping.
func (d *manifestDecoder) limits(f yamlEntry, h *Hook) error {
	if isNullNode(f.value) {
		return nil
	}
	entries, err := d.mapping(f.value, f.path, "a mapping of limits (memory, pids, cpu, tmp, run_dir)")
	if err != nil {
		return err
	}
	h.LimitLines = map[string]int{}
	for _, e := range entries {
		v, err := ParseResource(e.key, e.value)
		if err != nil {
			line := nodeLine(e.value)
			if line == 0 {
				line = e.line
			}
			return d.errf(line, e.path, "%v", err)
		}
		h.Limits.merge(v)
		h.LimitLines[e.key] = e.line
	}
	return nil
}
