package jail

import (
	"fmt"
	"os"
	"path/filepath"
)

// Secret is a tree no hook may reach under any backend: warden's data
// dir (the store, the trust root, other runs), the operator's home, the
// dirs of other modules.
type Secret struct {
	Path string
	What string // "the data dir", "the operator's home", "module web's dir"
}

// InputRefusedError is a path input that names a secret tree, lies
// beneath one or holds one.
type InputRefusedError struct {
	Input, Path string // the input's name and value
	Secret      Secret
	Holds       bool // the input holds the secret (rather than lying in it)
}

func (e *InputRefusedError) Error() string {
	rel := "is inside"
	if e.Holds {
		rel = "holds"
	}
	return fmt.Sprintf("path input %s=%s %s %s (%s), which no hook may reach under any jail: give a path outside warden's data dir, the operator's home and other modules' dirs (copy what the hook needs there first)", e.Input, e.Path, rel, e.Secret.What, e.Secret.Path)
}

// CheckInputs refuses the first path input that is, lies beneath or
// holds one of secrets, symlinks resolved (a link in /tmp to the data
// dir is the data dir). A bind or a Landlock rule grants a whole tree,
// so an input holding a secret would hand it over as surely as one
// inside it.
func CheckInputs(inputs []PathInput, secrets []Secret) error {
	for _, in := range inputs {
		p := resolved(in.Path)
		// What the input lies in is named before what it holds: ~ is
		// "the operator's home", not "holds module web's dir".
		for _, holds := range []bool{false, true} {
			for _, s := range secrets {
				if s.Path == "" {
					continue
				}
				sp := resolved(s.Path)
				if (!holds && within(p, sp)) || (holds && within(sp, p)) {
					return &InputRefusedError{Input: in.Name, Path: in.Path, Secret: s, Holds: holds}
				}
			}
		}
	}
	return nil
}

// resolved is p with symlinks resolved as far as the path exists: a
// path that does not exist yet is placed where its nearest existing
// parent really is.
func resolved(p string) string {
	p = filepath.Clean(p)
	if !filepath.IsAbs(p) {
		if abs, err := filepath.Abs(p); err == nil {
			p = abs
		}
	}
	var rest []string
	for {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(append([]string{r}, rest...)...)
		} else if _, lerr := os.Lstat(p); lerr == nil {
			// It exists but cannot be resolved (a dangling or looping
			// link): keep it as written.
			return filepath.Join(append([]string{p}, rest...)...)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return filepath.Join(append([]string{p}, rest...)...)
		}
		rest = append([]string{filepath.Base(p)}, rest...)
		p = parent
	}
}
