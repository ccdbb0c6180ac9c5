package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzLoadProfile: any bytes as an operator's profile file load or are
// refused with an error naming the profile, never a panic; a profile that
// loads holds what its check promises (hosts that parse, env names that
// are names).
func FuzzLoadProfile(f *testing.F) {
	for _, name := range []string{"claude", "codex"} {
		raw, err := shippedProfiles.ReadFile("profiles/" + name + ".yaml")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Add([]byte("hosts: [localhost:11434, '*.example.org', ip:203.0.113.7:443]\nenv: [A_B]\nset_env: {X: $HOME/y}\n"))
	f.Add([]byte("hosts: [localhost]\n"))
	f.Add([]byte("nope: 1\n"))
	dir := f.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "profiles"), 0o700); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if err := os.WriteFile(filepath.Join(dir, "profiles", "p.yaml"), raw, 0o600); err != nil {
			t.Fatal(err)
		}
		p, err := LoadProfile(dir, "p")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "profile p") {
				t.Fatalf("a refusal that does not name the profile: %v", err)
			}
			return
		}
		if _, _, err := SplitHosts(p.Hosts); err != nil {
			t.Fatalf("loaded with hosts that do not parse: %v", err)
		}
		for _, k := range p.Env {
			if !validEnvName(k) {
				t.Fatalf("loaded with env name %q", k)
			}
		}
	})
}
