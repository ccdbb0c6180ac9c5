package tui

import "errors"

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
	return z.sh.e.ValidateHandsRoot(abs)
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
		z.live, z.liveOK = "✓ "+abs+" is new and its ancestors are safe", true
	case "socketPath":
		if z.socketPath == "" {
			z.live = "type the socket's absolute path"
			return
		}
		if err := z.sh.e.ValidateHandsSocket(z.socketPath); err != nil {
			z.live = "✗ " + OneLine(err.Error())
			return
		}
		z.live, z.liveOK = "✓ "+z.socketPath+" is a socket", true
	}
}
