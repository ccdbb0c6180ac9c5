package hooks

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The README's whole module.yaml is one warden accepts, with every key
// it names decoded: a newcomer who copies it starts from a valid manifest.
func TestREADMEModuleYAMLParses(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	m := regexp.MustCompile("(?s)\n```yaml\n(.*?)\n```\n").FindStringSubmatch(readme)
	if m == nil {
		t.Fatal("the README has no ```yaml block (a whole module.yaml)")
	}
	if !strings.Contains(readme, "(docs/architecture.md#modules-and-hooks)") {
		t.Error("the README does not link the manifest's full grammar")
	}
	if _, err := os.Stat("../../docs/architecture.md"); err != nil {
		t.Error(err)
	}
	man, err := ParseManifest("README.md", []byte(m[1]+"\n"))
	if err != nil {
		t.Fatalf("the README's module.yaml is refused: %v\n%s", err, m[1])
	}
	if man.ID != "notes" || man.Version == "" || man.Description == "" || !slices.Equal(man.Secrets, []string{"api_token"}) || !slices.Equal(man.Config, []string{"endpoint"}) {
		t.Errorf("top-level keys: %+v", man)
	}
	h := man.Hooks["save"]
	if h == nil {
		t.Fatalf("no hook save: %+v", man.Hooks)
	}
	if h.Run[0] != "./hooks/save.sh" || h.Timeout == 0 || h.IdleTimeout == 0 || !slices.Equal(h.Requires, []string{CapOperator}) ||
		len(h.Inputs) != 2 || len(h.Outputs) != 2 || !h.Egress || !slices.Equal(h.Destinations, []string{"notes.example.com:443"}) {
		t.Errorf("hook save: %+v", h)
	}
	// The result the README says the hook ends with is what the outputs
	// declare.
	var res map[string]json.RawMessage
	if err := json.Unmarshal([]byte(`{"id":"n-42","saved":true}`), &res); err != nil {
		t.Fatal(err)
	}
	if err := CheckOutputs(h.Outputs, res); err != nil {
		t.Errorf("the README's result: %v", err)
	}
}
