package engine

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/wardenhq/warden/engine/egress"
)

// Profile is what `warden run --profile NAME` gives a command: the hosts
// it may reach, the env names it reads from the operator's environment,
// fixed values it needs to run unattended in a jail, and more read-only
// paths. warden ships claude and codex (profiles/); an operator's own
// live in the data dir's profiles/NAME.yaml and win over a shipped one of
// the same name.
type Profile struct {
	Name        string            `yaml:"-" json:"name"`
	Source      string            `yaml:"-" json:"source"` // the file, or "built in"
	Description string            `yaml:"description" json:"description,omitempty"`
	Command     string            `yaml:"command" json:"command,omitempty"` // the program it is for (its args apply only to it)
	Hosts       []string          `yaml:"hosts" json:"hosts,omitempty"`
	Env         []string          `yaml:"env" json:"env,omitempty"`
	SetEnv      map[string]string `yaml:"set_env" json:"setEnv,omitempty"`
	Args        []string          `yaml:"args" json:"args,omitempty"`
	RO          []string          `yaml:"ro" json:"ro,omitempty"`
	Timeout     string            `yaml:"timeout" json:"timeout,omitempty"`
}

//go:embed profiles/*.yaml
var shippedProfiles embed.FS

// maxProfileBytes bounds a profile file.
const maxProfileBytes = 64 << 10

// ProfileNames lists the profiles a data dir offers: the shipped ones and
// the operator's.
func ProfileNames(dataDir string) []string {
	var names []string
	for _, dir := range []func() ([]fs.DirEntry, error){
		func() ([]fs.DirEntry, error) { return shippedProfiles.ReadDir("profiles") },
		func() ([]fs.DirEntry, error) { return os.ReadDir(filepath.Join(dataDir, "profiles")) },
	} {
		ents, _ := dir()
		for _, e := range ents {
			if n, ok := strings.CutSuffix(e.Name(), ".yaml"); ok && ValidProfileName(n) && !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	slices.Sort(names)
	return names
}

// LoadProfile reads the profile name: the data dir's profiles/NAME.yaml,
// else the shipped one. Unknown keys, bad hosts and bad env names are
// refused, naming the file.
func LoadProfile(dataDir, name string) (*Profile, error) {
	if !ValidProfileName(name) {
		return nil, fmt.Errorf("bad profile name %q: want lower-case letters, digits, - and _ (profiles here: %s)", name, namesOrNone(ProfileNames(dataDir)))
	}
	file := filepath.Join(dataDir, "profiles", name+".yaml")
	raw, err := readBounded(file)
	source := file
	if errors.Is(err, fs.ErrNotExist) {
		raw, err = shippedProfiles.ReadFile("profiles/" + name + ".yaml")
		source = "built in"
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("no profile %q (profiles here: %s; write your own as %s)", name, namesOrNone(ProfileNames(dataDir)), file)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("profile %s: %w", name, err)
	}
	p := &Profile{Name: name, Source: source}
	if err := decodeProfile(raw, p); err != nil {
		return nil, fmt.Errorf("profile %s (%s): %w", name, source, err)
	}
	if err := p.check(); err != nil {
		return nil, fmt.Errorf("profile %s (%s): %w", name, source, err)
	}
	return p, nil
}

// decodeProfile decodes raw strictly into p. The YAML decoder panics on
// some malformed input (a tag on a scalar where a list belongs,
// FuzzLoadProfile's corpus): that is a refusal of the file, not a crash
// of the verb.
func decodeProfile(raw []byte, p *Profile) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("not a profile's YAML (the decoder gave up: %v); see engine/profiles/claude.yaml for the shape", r)
		}
	}()
	if err := yaml.UnmarshalWithOptions(raw, p, yaml.Strict()); err != nil {
		return errors.New(yaml.FormatError(err, false, true))
	}
	return nil
}

func readBounded(file string) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(io.LimitReader(f, maxProfileBytes+1)); err != nil {
		return nil, err
	}
	if b.Len() > maxProfileBytes {
		return nil, fmt.Errorf("%s is over %d KiB: a profile is a short list", file, maxProfileBytes>>10)
	}
	return b.Bytes(), nil
}

func (p *Profile) check() error {
	if _, _, err := SplitHosts(p.Hosts); err != nil {
		return fmt.Errorf("hosts: %w", err)
	}
	for _, k := range p.Env {
		if !validEnvName(k) {
			return fmt.Errorf("env: %q is not a variable name", k)
		}
	}
	for k, v := range p.SetEnv {
		if !validEnvName(k) || strings.ContainsRune(v, 0) {
			return fmt.Errorf("set_env: %q is not a variable name", k)
		}
	}
	for _, r := range p.RO {
		if !filepath.IsAbs(r) {
			return fmt.Errorf("ro: %q is not an absolute path", r)
		}
	}
	if p.Timeout != "" {
		if d, err := time.ParseDuration(p.Timeout); err != nil || d <= 0 {
			return fmt.Errorf("timeout: %q is not a duration such as 8h", p.Timeout)
		}
	}
	return nil
}

// TimeoutOr is the profile's timeout, else d.
func (p *Profile) TimeoutOr(d time.Duration) time.Duration {
	if p == nil || p.Timeout == "" {
		return d
	}
	t, _ := time.ParseDuration(p.Timeout)
	return t
}

// SplitHosts reads host entries as `warden run --allow-host` and a
// profile's hosts take them: localhost:PORT (also 127.0.0.1 and [::1])
// names one port of the host's own loopback, and needs the port; every
// other entry is an egress destination (api.example.com:443,
// *.example.org, ip:203.0.113.7:443).
func SplitHosts(entries []string) (hosts []string, loopback []uint16, err error) {
	for _, e := range entries {
		h, port, hasPort := strings.Cut(e, ":")
		if strings.HasPrefix(e, "[") {
			if i := strings.Index(e, "]"); i > 0 {
				h, port, hasPort = e[:i+1], strings.TrimPrefix(e[i+1:], ":"), strings.Contains(e[i+1:], ":")
			}
		}
		if isLoopbackName(h) {
			if !hasPort {
				return nil, nil, fmt.Errorf("%q: name the one port of the host's loopback to reach (localhost:11434)", e)
			}
			d, perr := egress.Parse("localhost:" + port)
			if perr != nil {
				return nil, nil, fmt.Errorf("%q: %v", e, perr)
			}
			if !slices.Contains(loopback, d.Ports[0]) {
				loopback = append(loopback, d.Ports[0])
			}
			continue
		}
		if _, perr := egress.Parse(e); perr != nil {
			return nil, nil, perr
		}
		if !slices.Contains(hosts, e) {
			hosts = append(hosts, e)
		}
	}
	return hosts, loopback, nil
}
