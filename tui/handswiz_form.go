package tui

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/huh"

	"github.com/wardenhq/warden/engine"
)

// The wizards' forms: which huh form each step is, and its size.

// open builds and shows one of the forms.
func (z *handsWizard) open(which int) tea.Cmd {
	z.which, z.stage = which, wsForm
	e := z.eng()
	nonEmpty := func(what string) func(string) error {
		return func(s string) error {
			if s == "" {
				return errors.New("choose " + what + " (there is no default)")
			}
			return nil
		}
	}
	var groups []*huh.Group
	switch which {
	case formRoot:
		groups = append(groups, huh.NewGroup(
			huh.NewInput().Key("root").Title("Root").
				Description("a new directory for this task, not there yet, under safe ancestors (a relative path starts from the console's folder)").
				Placeholder("/home/you/hands/task1").CharLimit(1024).Value(&z.root).Validate(z.checkRoot),
		).Title(z.title("root")).Description("checked as you type · enter goes on · esc cancels"))
	case formParent:
		parent := filepath.Dir(z.root)
		what := "it"
		if len(z.create) > 1 {
			above := make([]string, 0, len(z.create)-1)
			for _, d := range z.create[:len(z.create)-1] {
				above = append(above, safe(d))
			}
			what = "it and the directories above it that are missing too (" + strings.Join(above, ", ") + ")"
		}
		owner := fmt.Sprintf("you (uid %d)", z.createUID)
		if z.createUID != os.Geteuid() {
			// Attached: the serving engine creates it, as its user.
			owner = fmt.Sprintf("uid %d, the user of the engine this console is attached to", z.createUID)
		}
		z.makeParent = true
		groups = append(groups, huh.NewGroup(
			huh.NewConfirm().Key("mkparent").Title("Create "+safe(parent)+"?").
				Description(fmt.Sprintf("The root's parent does not exist yet. warden creates %s with mode %04o (only its owner can enter it), owned by %s; init then creates the root inside. "+
					"It never creates a directory under one that anyone else can write, such as /tmp.", what, engine.HandsParentMode, owner)).
				Affirmative("Create").Negative("Back").Value(&z.makeParent),
		).Title(z.title("create the parent")))
	case formSocket:
		z.candidates = engine.HandsSocketCandidates()
		opts := []huh.Option[string]{huh.NewOption("choose the engine's socket (Docker or Podman)…", "")}
		for _, c := range z.candidates {
			opts = append(opts, huh.NewOption(c, c))
		}
		opts = append(opts, huh.NewOption("other path…", otherSocket))
		desc := "the engine the container runs on: warden never picks one for you (nor reads DOCKER_HOST)"
		pathDesc := "the unix socket dockerd (--host unix://PATH) or podman system service listens on"
		none := len(z.candidates) == 0
		if none {
			// No engine found: no list with nothing real in it, but what
			// to do, and the path to type once one runs.
			z.socketChoice = otherSocket
			pathDesc = noEngineHelp
		}
		groups = append(groups,
			huh.NewGroup(huh.NewSelect[string]().Key("socket").Title("Engine socket").Description(desc).
				Options(opts...).Value(&z.socketChoice).Validate(nonEmpty("an engine socket"))).
				Title(z.title("engine socket")).
				WithHideFunc(func() bool { return none }),
			huh.NewGroup(huh.NewInput().Key("socketPath").Title("Engine socket path").
				Description(pathDesc).
				Placeholder("/run/user/1000/docker.sock").CharLimit(256).Value(&z.socketPath).Validate(e.ValidateHandsSocket)).
				Title(z.title("engine socket")).
				WithHideFunc(func() bool { return z.socketChoice != otherSocket }),
		)
	case formImage:
		opts := []huh.Option[string]{huh.NewOption("choose a local image…", "")}
		width := 0
		for _, im := range z.images {
			width = max(width, len(im.Ref))
		}
		for _, im := range z.images {
			label := safe(im.Ref)
			if im.Ref != im.ID {
				label = fmt.Sprintf("%-*s  %s", width, safe(im.Ref), safe(im.ID))
			}
			opts = append(opts, huh.NewOption(label, im.Ref))
		}
		groups = append(groups,
			huh.NewGroup(huh.NewSelect[string]().Key("image").Title("Image on "+plain(z.engine.Label, 60)).
				Description("the engine's local images (warden never pulls; init pins the one you pick by its sha256 id)").
				Options(opts...).Value(&z.image).Validate(nonEmpty("an image")).Height(min(len(opts)+2, max(z.h-8, 5)))).
				Title(z.title("image")),
			huh.NewGroup(huh.NewSelect[string]().Key("access").Title("Access").
				Description("what the root's initial policy lets effects do with the workspace").
				Options(huh.NewOption("choose…", ""),
					huh.NewOption("files: the workspace may be read and written", engine.HandsAccessFiles),
					huh.NewOption("none: no workspace access until a policy grants it", engine.HandsAccessNone)).
				Value(&z.access).Validate(nonEmpty("an access mode"))).
				Title(z.title("access")),
		)
	case formConfirm:
		// Four steps were filled to get here: enter says Init (the
		// operator still sees the summary above it; esc or Cancel
		// cancels, and the pane says so).
		z.confirmed = true
		groups = append(groups, huh.NewGroup(
			huh.NewNote().Title("Summary").Description(noteText(z.summary())),
			huh.NewConfirm().Key("confirm").Title("Set up this hands root?").Affirmative("Init").Negative("Cancel").Value(&z.confirmed),
		).Title(z.title("confirm")))
	case formFinish:
		opts := make([]huh.Option[string], 0, len(z.finishable))
		for _, r := range z.finishable {
			opts = append(opts, huh.NewOption(fmt.Sprintf("%s  (%s, container %s)", safe(r.Root), safe(r.Phase), safe(engine.HandsShortID(r.ContainerID))), r.Root))
		}
		z.confirmed = false
		groups = append(groups,
			huh.NewGroup(huh.NewSelect[string]().Key("root").Title("Root").
				Description("the roots this data dir knows that are not finished").
				Options(opts...).Value(&z.root)).Title(z.title("which root")).
				WithHideFunc(func() bool { return z.preselected }),
			huh.NewGroup(huh.NewConfirm().Key("confirm").
				TitleFunc(func() string { return "Finish " + safe(z.root) + "?" }, &z.root).
				Description("stops exactly the recorded container (only if it still carries this root's owner label and is the recorded generation), writes phase finished and revokes every grant of the root's policy").
				Affirmative("Finish").Negative("Cancel").Value(&z.confirmed)).Title(z.title("confirm")),
		)
	}
	// huh's own help and error list are off: the footer shows the keys,
	// and its errors repeated the live line below the form and broke
	// words at the form's width. Every error of a field
	// (a path checked as typed, a select left on its placeholder) is
	// said once, by checkLive, wrapped at spaces to the pane.
	z.form = huh.NewForm(groups...).WithTheme(z.sh.th.Huh()).WithShowHelp(false).WithShowErrors(false)
	z.form.SubmitCmd, z.form.CancelCmd = nil, nil
	cmd := z.form.Init()
	z.sizeForm()
	z.checkLive()
	return cmd
}

// summary is what init is about to do, for the confirm form.
func (z *handsWizard) summary() string {
	access := "files (the workspace may be read and written)"
	if z.access == engine.HandsAccessNone {
		access = "none (no workspace access)"
	}
	return strings.Join([]string{
		"root    " + safe(z.root),
		"engine  " + safe(z.socket) + " · " + plain(z.engine.Label, 60),
		"image   " + safe(z.image),
		"access  " + access,
		"owner   " + string(z.sh.opts.Actor),
		"",
		"The container gets no network, a read-only root, no capabilities and a 128 MiB workspace.",
	}, "\n")
}

// resize follows the body's size.
func (z *handsWizard) resize(w, h int) {
	if w == z.w && h == z.h {
		return
	}
	z.w, z.h = w, h
	z.sizeForm()
}

// sizeForm tells the form how much room it has, as a window size: huh
// then sizes every group to what it needs, at most that.
func (z *handsWizard) sizeForm() {
	if z.form == nil || z.w == 0 {
		return
	}
	m, _ := z.form.Update(tea.WindowSizeMsg{Width: min(z.w, 96), Height: max(z.h-3, 5)})
	if f, ok := m.(*huh.Form); ok {
		z.form = f
	}
}
