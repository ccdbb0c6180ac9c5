package tui

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/spinner"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/huh"

	"warden/engine"
	"warden/engine/hands"
)

// The hands wizards: `i` sets up a new hands root, `x` finishes one. Each
// is a few huh forms embedded as sub-models (the fields are validated as
// the operator types), then a live progress view of the engine's steps,
// driven by its Progress callback, then the outcome.

const (
	wizInit   = "init"
	wizFinish = "finish"
)

type wizStage int

const (
	wsForm    wizStage = iota // a huh form has the keyboard
	wsLoading                 // asking the engine for its images
	wsLoadErr                 // the engine could not list them
	wsRun                     // the job runs: progress
	wsDone                    // ready/finished, or failed
)

// The forms of the init wizard, in order.
const (
	formRoot = iota
	formSocket
	formImage
	formConfirm
	formFinish
)

// otherSocket is the socket option that asks for a path.
const otherSocket = "\x00other"

type wizKeys struct {
	Cancel, Close, Status, Finish, Retry, Yes, No key.Binding
}

func newWizKeys() wizKeys {
	return wizKeys{
		Cancel: key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "cancel")),
		Close:  key.NewBinding(key.WithKeys("enter", "esc"), key.WithHelp("enter", "close")),
		Status: key.NewBinding(key.WithKeys("s"), key.WithHelp("s", "status & drift")),
		Finish: key.NewBinding(key.WithKeys("x"), key.WithHelp("x", "finish it")),
		Retry:  key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "choose another socket")),
		Yes:    key.NewBinding(key.WithKeys("y", "Y"), key.WithHelp("y", "yes, cancel it")),
		No:     key.NewBinding(key.WithKeys("n", "N", "esc"), key.WithHelp("n", "no, go on")),
	}
}

// handsWizard is one run of the init or finish wizard.
type handsWizard struct {
	sh    *shared
	kind  string
	stage wizStage
	which int // the form shown (formRoot ...)
	form  *huh.Form
	// preselected: x was pressed on a root, so finish asks only to confirm.
	preselected bool
	k           wizKeys
	w, h        int

	// What the operator chose.
	root, socketChoice, socketPath, socket, image, access string
	confirmed                                             bool
	candidates                                            []string
	engine                                                engine.HandsEngineInfo // the engine on socket, as HandsEngine found it
	images                                                []engine.HandsImage
	finishable                                            []engine.HandsRecord

	loadErr    string
	live       string // the live validation line under the form
	liveOK     bool
	spin       spinner.Model
	job        *progressJob
	prog       *progress
	askCancel  bool
	cancelling bool
	err        error
	initRes    engine.HandsInitResult
	finRes     engine.HandsFinishResult

	// closed: the pane drops the wizard; showStatus: and asks for the
	// root's status; showFinish: and opens the finish wizard on it.
	closed     bool
	showStatus bool
	showFinish bool
	// aborted: the operator cancelled before anything was done (esc, or
	// Cancel on the last step); the pane says so until the next wizard.
	aborted bool
}

func newWizard(sh *shared, kind string, w, h int) *handsWizard {
	return &handsWizard{sh: sh, kind: kind, k: newWizKeys(), w: w, h: h,
		spin: spinner.New(spinner.WithSpinner(spinner.MiniDot), spinner.WithStyle(sh.th.RunRunning))}
}

// newInitWizard opens the init wizard on its first form. prev, when set,
// is the last init wizard that did not end ready: starting over keeps
// what was typed and chosen there (each field is checked again).
func newInitWizard(sh *shared, prev *handsWizard, w, h int) (*handsWizard, tea.Cmd) {
	z := newWizard(sh, wizInit, w, h)
	if prev != nil {
		z.root, z.socketChoice, z.socketPath, z.image, z.access = prev.root, prev.socketChoice, prev.socketPath, prev.image, prev.access
	}
	return z, z.open(formRoot)
}

// newFinishWizard opens the finish wizard with the given root chosen; the
// roots offered are those not finished yet.
func newFinishWizard(sh *shared, roots []engine.HandsRecord, selected string, w, h int) (*handsWizard, tea.Cmd) {
	z := newWizard(sh, wizFinish, w, h)
	for _, r := range roots {
		if r.Phase != string(hands.PhaseFinished) {
			z.finishable = append(z.finishable, r)
		}
	}
	if len(z.finishable) == 0 {
		return nil, nil
	}
	z.root = z.finishable[0].Root
	for _, r := range z.finishable {
		if r.Root == selected {
			// x on a root: finish that one, without asking which.
			z.root, z.preselected = r.Root, true
		}
	}
	return z, z.open(formFinish)
}

func (z *handsWizard) title(step string) string {
	if z.kind == wizFinish {
		return "Hands finish · " + step
	}
	n := map[int]string{formRoot: "1/5", formSocket: "2/5", formImage: "3/5", formConfirm: "5/5"}[z.which]
	if step == "access" {
		n = "4/5"
	}
	return fmt.Sprintf("Hands init %s · %s", n, step)
}

// open builds and shows one of the forms.
func (z *handsWizard) open(which int) tea.Cmd {
	z.which, z.stage = which, wsForm
	e := z.sh.e
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
			opts = append(opts, huh.NewOption(fmt.Sprintf("%s  (%s, container %s)", safe(r.Root), safe(r.Phase), safe(hands.ShortID(r.ContainerID))), r.Root))
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

// Messages of the wizards.
type (
	handsImagesMsg struct {
		socket string
		engine engine.HandsEngineInfo // which engine, checked as init will
		images []engine.HandsImage
		err    error
	}
)

func (z *handsWizard) keys() keyMap {
	k := z.k
	switch z.stage {
	case wsForm:
		return keyMap{short: append([]key.Binding{k.Cancel}, z.form.KeyBinds()...)}
	case wsLoading:
		return keyMap{short: []key.Binding{k.Cancel}}
	case wsLoadErr:
		return keyMap{short: []key.Binding{k.Retry, k.Cancel}}
	case wsRun:
		if z.askCancel {
			return keyMap{short: []key.Binding{k.Yes, k.No}}
		}
		c := key.NewBinding(key.WithKeys("esc", "ctrl+c"), key.WithHelp("esc/ctrl+c", "cancel the "+z.kind))
		return keyMap{short: []key.Binding{c}}
	default:
		if z.kind == wizInit {
			return keyMap{short: []key.Binding{k.Close, k.Finish, k.Status}}
		}
		return keyMap{short: []key.Binding{k.Close, k.Status}}
	}
}

// wantsCtrlC: while a job runs, ctrl+c asks to cancel it rather than
// quitting the console under it.
func (z *handsWizard) wantsCtrlC() bool { return z.stage == wsRun }

func (z *handsWizard) update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case handsImagesMsg:
		if z.stage != wsLoading || msg.socket != z.socket {
			return nil
		}
		switch {
		case msg.err != nil:
			z.stage, z.loadErr = wsLoadErr, OneLine(msg.err.Error())
		case len(msg.images) == 0:
			z.stage = wsLoadErr
			z.loadErr = fmt.Sprintf("the engine at %s (%s) has no local images, and warden never pulls: load one first (e.g. `docker -H unix://%s pull busybox:1.36`, or `podman --url unix://%s pull busybox:1.36`), then choose the socket again",
				z.socket, plain(msg.engine.Label, 60), z.socket, z.socket)
		default:
			z.images, z.engine = msg.images, msg.engine
			return z.open(formImage)
		}
		return nil
	case jobProgressMsg:
		if z.job == nil || msg.id != z.job.id {
			return nil
		}
		for _, s := range msg.steps {
			z.prog.step(s[0], s[1])
		}
		if !msg.done {
			return z.job.next()
		}
		z.finished()
		return nil
	case spinner.TickMsg:
		if z.stage != wsRun && z.stage != wsLoading {
			return nil
		}
		var cmd tea.Cmd
		z.spin, cmd = z.spin.Update(msg)
		return cmd
	case tea.KeyMsg:
		return z.key(msg)
	}
	if z.stage == wsForm {
		return z.feed(msg)
	}
	return nil
}

func (z *handsWizard) key(msg tea.KeyMsg) tea.Cmd {
	k := z.k
	switch z.stage {
	case wsForm:
		if key.Matches(msg, k.Cancel) {
			z.cancelled()
			return nil
		}
		return z.feed(msg)
	case wsLoading:
		if key.Matches(msg, k.Cancel) {
			z.cancelled()
		}
	case wsLoadErr:
		switch {
		case key.Matches(msg, k.Retry):
			return z.open(formSocket)
		case key.Matches(msg, k.Cancel):
			z.cancelled()
		}
	case wsRun:
		if z.askCancel {
			switch {
			case key.Matches(msg, k.Yes):
				z.askCancel, z.cancelling = false, true
				z.job.cancel(fmt.Errorf("cancelled from the console by %s", z.sh.opts.Actor))
			case key.Matches(msg, k.No):
				z.askCancel = false
			}
			return nil
		}
		if !z.cancelling && (msg.String() == "esc" || msg.String() == "ctrl+c") {
			z.askCancel = true
		}
	case wsDone:
		switch {
		case key.Matches(msg, k.Status):
			z.closed, z.showStatus = true, true
		case key.Matches(msg, k.Finish) && z.kind == wizInit:
			z.closed, z.showFinish = true, true
		case key.Matches(msg, k.Close):
			z.closed = true
		}
	}
	return nil
}

func (z *handsWizard) cancelled() {
	z.closed, z.aborted = true, true
	z.sh.setStatus("hands "+z.kind+" cancelled: nothing was done", false)
}

// feed passes a message to the form and acts on its completion.
func (z *handsWizard) feed(msg tea.Msg) tea.Cmd {
	m, cmd := z.form.Update(msg)
	if f, ok := m.(*huh.Form); ok {
		z.form = f
	}
	switch z.form.State {
	case huh.StateAborted:
		z.cancelled()
		return cmd
	case huh.StateCompleted:
		return tea.Batch(cmd, z.next())
	}
	z.checkLive()
	return cmd
}

// next moves on once a form is complete.
func (z *handsWizard) next() tea.Cmd {
	switch z.which {
	case formRoot:
		z.root, _ = resolvePath(z.root) // checkRoot passed: it resolves
		return z.open(formSocket)
	case formSocket:
		z.socket = z.socketChoice
		if z.socketChoice == otherSocket {
			z.socket = z.socketPath
		}
		z.stage, z.images = wsLoading, nil
		e, socket, ctx := z.sh.e, z.socket, z.sh.context()
		return tea.Batch(z.spin.Tick, func() tea.Msg {
			ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			// The checks init makes before it creates anything: which
			// engine, and whether it can run --init.
			in, err := e.HandsEngine(ctx, socket)
			if err == nil && in.Problem != "" {
				err = fmt.Errorf("the %s engine at %s cannot run a hands container: %s", in.Engine, socket, in.Problem)
			}
			if err != nil {
				return handsImagesMsg{socket: socket, err: err}
			}
			ims, err := e.HandsImages(ctx, socket)
			return handsImagesMsg{socket: socket, engine: in, images: ims, err: err}
		})
	case formImage:
		return z.open(formConfirm)
	case formConfirm, formFinish:
		if !z.confirmed {
			z.cancelled()
			return nil
		}
		return z.start()
	}
	return nil
}

// start runs the engine's init or finish off the UI goroutine; its
// progress arrives batched per frame.
func (z *handsWizard) start() tea.Cmd {
	z.stage, z.form, z.live = wsRun, nil, ""
	z.job = newProgressJob(z.sh.context())
	z.prog = newProgress(z.kind)
	e, actor, root := z.sh.e, z.sh.opts.Actor, z.root
	if z.kind == wizInit {
		opts := engine.HandsInitOptions{Root: root, EngineSocket: z.socket, Image: z.image, Access: z.access}
		z.job.run(func(ctx context.Context, progress func(step, detail string)) (func(), error) {
			opts.Progress = progress
			res, err := e.HandsInit(ctx, actor, opts)
			return func() { z.initRes = res }, err
		})
	} else {
		z.job.run(func(ctx context.Context, progress func(step, detail string)) (func(), error) {
			res, err := e.HandsFinish(ctx, actor, root, progress)
			return func() { z.finRes = res }, err
		})
	}
	return tea.Batch(z.job.next(), z.spin.Tick)
}

// finished takes the job's outcome.
func (z *handsWizard) finished() {
	z.stage, z.askCancel = wsDone, false
	z.job.mu.Lock()
	z.err = z.job.err
	if z.job.keep != nil {
		z.job.keep()
	}
	z.job.mu.Unlock()
	z.job.cancel(nil)
	if z.err != nil {
		z.prog.fail(OneLine(z.err.Error()))
		z.sh.setStatus("hands "+z.kind+" of "+z.root+" failed", true)
		return
	}
	if z.kind == wizFinish {
		z.prog.finishDone(z.finRes)
		z.sh.setStatus("hands "+z.root+" finished", false)
		return
	}
	z.sh.setStatus("hands "+z.root+" ready", false)
}

// view draws the wizard.
func (z *handsWizard) view(w, h int) string {
	z.resize(w, h)
	th := z.sh.th
	var out []string
	switch z.stage {
	case wsForm:
		out = strings.Split(z.form.View(), "\n")
		for len(out) > 0 && strings.TrimSpace(out[len(out)-1]) == "" {
			out = out[:len(out)-1]
		}
		if z.live != "" {
			st := th.Dim
			switch {
			case z.liveOK:
				st = th.StatusOK
			case strings.HasPrefix(z.live, "✗"):
				st = th.StatusErr
			}
			out = append(out, "")
			out = append(out, wrapHanging(st, "", "  ", z.live, w-2)...)
		}
	case wsLoading:
		out = []string{th.Title.Render(z.title("image")), "",
			z.spin.View() + " " + plain("asking the engine at "+z.socket+" what it is and for its local images…", w-3)}
	case wsLoadErr:
		out = []string{th.Title.Render(z.title("image")), "", th.StatusErr.Render("✗ the engine's images could not be listed")}
		out = append(out, wrapHanging(th.StatusErr, "  ", "  ", z.loadErr, w-2)...)
		out = append(out, "", th.Dim.Render("enter: choose another socket · esc: cancel (nothing was done)"))
	default:
		out = z.progressView(w, h)
	}
	for len(out) < h {
		out = append(out, "")
	}
	out = out[:h]
	for i := range out {
		out[i] = fit(out[i], w)
	}
	return strings.Join(out, "\n")
}

// failureView shows the error, the evidence and what to do next.
func (z *handsWizard) failureView(w int) []string {
	th := z.sh.th
	out := wrapHanging(th.StatusErr, th.StatusErr.Render("✗ "), "  ", OneLine(z.err.Error()), w-2)
	out = append(out, "")
	var failed *engine.HandsInitFailedError
	evidence := safe(z.root) + "/" + engine.HandsEvidenceDir + "/"
	switch {
	case errors.As(z.err, &failed):
		out = append(out, th.HeaderKey.Render("evidence ")+evidence)
		out = append(out, wrapHanging(th.Dim, "  ", "  ", fmt.Sprintf("%s says phase failed; %s says stopped %v, reconciliation required %v",
			engine.HandsReceiptFile, engine.HandsFailureFile, failed.Evidence.Stopped, failed.Evidence.ReconciliationRequired), w-2)...)
	case z.kind == wizInit:
		out = append(out, th.HeaderKey.Render("evidence ")+th.Dim.Render("none: the init stopped before "+engine.HandsReceiptFile+" was written"))
	default:
		out = append(out, th.HeaderKey.Render("evidence ")+evidence)
	}
	out = append(out, th.HeaderKey.Render("next"))
	for _, n := range nextSteps(z.kind, z.err) {
		out = append(out, wrapHanging(th.HeaderVal, "  • ", "    ", n, w-2)...)
	}
	if failed != nil {
		out = append(out, th.Dim.Render("x finishes it · s shows status and drift · enter closes"))
	} else {
		out = append(out, th.Dim.Render("s shows status and drift · enter closes"))
	}
	return out
}

// nextSteps says what to do after a failed init or finish: the fixes the
// error carries (hands.Fixes: its structured Fix fields, never its text
// taken apart), then what the console offers.
func nextSteps(kind string, err error) []string {
	var failed *engine.HandsInitFailedError
	var rootErr *engine.HandsRootError
	if errors.As(err, &rootErr) {
		return []string{rootErr.Fix, "nothing was touched: press i to start again with another root"}
	}
	out := hands.Fixes(err)
	if errors.As(err, &failed) {
		if failed.Evidence.ReconciliationRequired {
			out = append(out, "press s on this root for its status and drift, and deal with the containers it lists")
		}
		if strings.HasPrefix(failed.Cause.Error(), "interrupted") {
			out = append(out, "the init was cancelled and the engine's failure path ran: check the evidence")
		}
		out = append(out, "a root is never reused: press x to finish this one (it closes its books), then i to init a new root")
		return out
	}
	if kind == wizFinish {
		out = append(out, "press s for this root's status and drift, fix what it says, then x to finish again")
	} else if len(out) == 0 {
		out = append(out, "fix what the error says, then press i to start again")
	}
	return out
}

// noEngineHelp is what the wizard says when no Docker Engine or Podman
// socket is where engines put theirs.
const noEngineHelp = "No Docker Engine or Podman socket found (looked at /run/docker.sock, /var/run/docker.sock, $XDG_RUNTIME_DIR/docker.sock, /run/podman/podman.sock, $XDG_RUNTIME_DIR/podman/podman.sock). " +
	"Start Docker: sudo systemctl start docker (install it: sudo apt-get install docker.io); " +
	"or rootless Podman: systemctl --user start podman.socket. Then type its socket path here, or esc and press i again."
