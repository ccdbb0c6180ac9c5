package tui

import (
	"errors"
	"path/filepath"

	"github.com/wardenhq/warden/engine"
)

// The wizards' checks of what the operator types: the hands root's
// path, and the engine socket, live as it is typed.

// checkRoot holds the root as typed to the engine's rules, once made
// absolute as the add-module prompt does (resolvePath: ~ is the home, a
// relative path is taken from the console's folder), so a relative path
// is not refused with the CLI's advice.
func (z *handsWizard) checkRoot(s string) error {
	if s == "" {
		return errors.New("type the new root's path")
	}
	abs, err := resolvePath(s)
	if err != nil {
		return err
	}
	z.create = nil
	err = z.eng().ValidateHandsRoot(abs)
	// A parent that is only missing, where the engine may create it,
	// does not stop the form: enter goes on to ask whether to create it.
	var re *engine.HandsRootError
	if errors.As(err, &re) && len(re.Create) > 0 {
		z.create, z.createUID = re.Create, re.UID
		return nil
	}
	return err
}

// checkLive validates the focused text field as it stands, and says why
// the form did not go on when a field refused (a select left on its
// placeholder).
func (z *handsWizard) checkLive() {
	z.live, z.liveOK = "", false
	if z.form == nil || z.stage != wsForm {
		return
	}
	f := z.form.GetFocusedField()
	if f == nil {
		return
	}
	switch f.GetKey() {
	default:
		if err := f.Error(); err != nil {
			z.live = "✗ " + OneLine(err.Error())
		}
	case "root":
		if z.kind != wizInit {
			return
		}
		if z.root == "" {
			z.live = "type the new root's absolute path"
			return
		}
		if err := z.checkRoot(z.root); err != nil {
			z.live = "✗ " + OneLine(err.Error())
			return
		}
		abs, _ := resolvePath(z.root)
		if len(z.create) > 0 {
			z.live, z.liveOK = "✓ "+abs+" is new; its parent "+filepath.Dir(abs)+" does not exist yet: enter offers to create it", true
			return
		}
		z.live, z.liveOK = "✓ "+abs+" is new and its ancestors are safe", true
	case "socketPath":
		if z.socketPath == "" {
			z.live = "type the socket's absolute path"
			return
		}
		if err := z.eng().ValidateHandsSocket(z.socketPath); err != nil {
			z.live = "✗ " + OneLine(err.Error())
			return
		}
		z.live, z.liveOK = "✓ "+z.socketPath+" is a socket", true
	}
}
