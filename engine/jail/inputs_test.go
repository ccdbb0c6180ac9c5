package jail

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckInputsRefusesSecrets: a path input into the data dir, the
// home or another module's dir is refused, so is one that holds one of
// them, and a symlink does not get around it; anything else passes.
func TestCheckInputsRefusesSecrets(t *testing.T) {
	root := t.TempDir()
	data := filepath.Join(root, "var", "lib", "warden")
	home := filepath.Join(root, "home", "op")
	other := filepath.Join(root, "mods", "web")
	work := filepath.Join(root, "work")
	for _, d := range []string{data, home, other, work} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(work, "innocent")
	if err := os.Symlink(data, link); err != nil {
		t.Fatal(err)
	}
	secrets := []Secret{{data, "the data dir"}, {home, "the operator's home"}, {other, "module web's dir"}}
	for _, c := range []struct {
		path   string
		secret string // "" when the input passes
		holds  bool
	}{
		{filepath.Join(data, "host.secret"), "the data dir", false},
		{data, "the data dir", false},
		{data + "/runs/../seal.key", "the data dir", false},
		{filepath.Join(home, ".ssh"), "the operator's home", false},
		{filepath.Join(other, "hook.sh"), "module web's dir", false},
		{filepath.Join(root, "var"), "the data dir", true},
		{"/", "the data dir", true},
		{link, "the data dir", false},
		{filepath.Join(link, "not-yet"), "the data dir", false},
		{work, "", false},
		{filepath.Join(work, "new", "file"), "", false},
		{filepath.Join(root, "home", "op2"), "", false},
	} {
		err := CheckInputs([]PathInput{{Name: "p", Path: c.path}}, secrets)
		var re *InputRefusedError
		switch {
		case c.secret == "" && err != nil:
			t.Errorf("input %s: refused: %v", c.path, err)
		case c.secret != "" && !errors.As(err, &re):
			t.Errorf("input %s: got %v, want refused for %s", c.path, err, c.secret)
		case c.secret != "" && (re.Secret.What != c.secret || re.Holds != c.holds):
			t.Errorf("input %s: refused for %s (holds %v), want %s (holds %v)", c.path, re.Secret.What, re.Holds, c.secret, c.holds)
		case c.secret != "" && !strings.Contains(err.Error(), "give a path outside"):
			t.Errorf("input %s: the error does not say what to do: %v", c.path, err)
		}
	}
}
