package tui

import (
	"context"
	"fmt"
	"time"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/spinner"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/huh"

	"github.com/wardenhq/warden/engine"
)

// The hands wizards: `i` sets up a new hands root, `x` finishes one. Each
// is a few huh forms embedded as sub-models (the fields are validated as
// the operator types), then a live progress view of the engine's steps,
// driven by its Progress callback, then the outcome. This file is the
// state machine; its forms are in handswiz_form.go, the checks of what
// is typed in handswiz_checks.go, and what it draws in handswiz_view.go.

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
	formParent // the root's parent is missing: create it? (between root and socket)
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
	// create: the root's missing parent dirs the engine offers to make
	// (HandsRootError.Create), as the last check of the root found them;
	// createUID is whose they will be. makeParent is the answer.
	create     []string
	createUID  int
	makeParent bool
	candidates []string
	engine     engine.HandsEngineInfo // the engine on socket, as HandsEngine found it
	images     []engine.HandsImage
	finishable []engine.HandsRecord

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
		if r.Phase != engine.HandsPhaseFinished {
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
	n := map[int]string{formRoot: "1/5", formParent: "1/5", formSocket: "2/5", formImage: "3/5", formConfirm: "5/5"}[z.which]
	if step == "access" {
		n = "4/5"
	}
	return fmt.Sprintf("Hands init %s · %s", n, step)
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
		if len(z.create) > 0 {
			return z.open(formParent)
		}
		return z.open(formSocket)
	case formParent:
		if !z.makeParent {
			return z.open(formRoot) // back, the path kept
		}
		// The engine checks again before and after it creates anything.
		made, err := z.eng().MakeHandsRootParent(z.sh.opts.Actor, z.root)
		if err != nil {
			cmd := z.open(formRoot)
			z.live, z.liveOK = "✗ "+OneLine(err.Error()), false
			return cmd
		}
		if len(made) > 0 {
			z.sh.setStatus(fmt.Sprintf("created %s (mode %04o)", made[len(made)-1], engine.HandsParentMode), false)
		}
		return z.open(formSocket)
	case formSocket:
		z.socket = z.socketChoice
		if z.socketChoice == otherSocket {
			z.socket = z.socketPath
		}
		z.stage, z.images = wsLoading, nil
		e, socket, ctx := z.eng(), z.socket, z.sh.context()
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
	e, actor, root := z.eng(), z.sh.opts.Actor, z.root
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

// noEngineHelp is what the wizard says when no Docker Engine or Podman
// socket is where engines put theirs.
const noEngineHelp = "No Docker Engine or Podman socket found (looked at /run/docker.sock, /var/run/docker.sock, $XDG_RUNTIME_DIR/docker.sock, /run/podman/podman.sock, $XDG_RUNTIME_DIR/podman/podman.sock). " +
	"Start Docker: sudo systemctl start docker (install it: sudo apt-get install docker.io); " +
	"or Podman as root: sudo podman system service --time=0 unix:///run/podman/podman.sock (rootless Podman is refused: it drops the container's ulimits). " +
	"Then type its socket path here, or esc and press i again."

// eng is the engine as the wizard needs it: the hands roots.
func (z *handsWizard) eng() engine.Hands { return z.sh.e }
