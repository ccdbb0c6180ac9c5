package tui

import (
	"fmt"

	"github.com/wardenhq/warden/engine"
)

// progress is the phases of a job, each pending, current, done, skipped
// or failed; the engine's steps move it along.
type rowState int

const (
	rowPending rowState = iota
	rowDone
	rowSkipped
	rowFailed
)

type progRow struct {
	name   string
	steps  []string // the engine's steps that make up this phase; the last ends it
	state  rowState
	detail string // the latest step's detail while current
	text   func(p *progress) string
}

type progress struct {
	kind    string
	rows    []progRow
	cur     int
	details map[string]string
}

func newProgress(kind string) *progress {
	p := &progress{kind: kind, details: map[string]string{}}
	stages, texts := engine.HandsFinishStages(), finishStageText
	if kind == wizInit {
		stages, texts = engine.HandsInitStages(), initStageText
	}
	for _, st := range stages {
		p.rows = append(p.rows, progRow{name: st.Name, steps: st.Steps, text: texts[st.Name]})
	}
	return p
}

// initStageText and finishStageText say what a completed stage did.
var (
	initStageText = map[string]func(*progress) string{
		engine.HandsStepPrepared: func(*progress) string { return "layout made, receipt written (evidence/setup.json)" },
		engine.HandsStepCreating: func(p *progress) string {
			return "container " + engine.HandsShortID(p.details[engine.HandsStepCreated]) + " created: owner label, image pinned by id, options verified"
		},
		engine.HandsStepRunning: func(*progress) string { return "container started, generation recorded, hands.json written" },
		engine.HandsStepReady:   func(p *progress) string { return "initial policy set: " + p.details[engine.HandsStepPolicy] },
	}
	finishStageText = map[string]func(*progress) string{
		engine.HandsStepReceipt:  func(p *progress) string { return "read: " + p.details[engine.HandsStepReceipt] },
		engine.HandsStepRuntime:  func(*progress) string { return "the recorded engine answers (same engine, same storage)" },
		engine.HandsStepStopped:  func(*progress) string { return "the recorded container, verified stopped by inspection" },
		engine.HandsStepFinished: func(*progress) string { return "phase finished written, every grant revoked" },
	}
)

// step applies one of the engine's progress steps.
func (p *progress) step(step, detail string) {
	p.details[step] = detail
	if step == engine.HandsStepFailed {
		return // fail() marks the row with the whole error
	}
	for i := range p.rows {
		r := &p.rows[i]
		idx := -1
		for n, s := range r.steps {
			if s == step {
				idx = n
			}
		}
		if idx < 0 {
			continue
		}
		for j := p.cur; j < i; j++ {
			if p.rows[j].state == rowPending {
				p.rows[j].state = rowSkipped
			}
		}
		p.cur = max(p.cur, i)
		r.detail = step + ": " + detail
		if idx == len(r.steps)-1 {
			r.state = rowDone
			p.cur = i + 1
		}
		return
	}
	// A step of no phase (e.g. the failure path stopping the container).
	if p.cur < len(p.rows) {
		p.rows[p.cur].detail = step + ": " + detail
	}
}

// fail marks the current phase failed.
func (p *progress) fail(why string) {
	if p.cur < len(p.rows) {
		p.rows[p.cur].state = rowFailed
		p.rows[p.cur].detail = why
	}
}

// finishDone says why a phase finish skipped (no container to stop).
func (p *progress) finishDone(res engine.HandsFinishResult) {
	for i := range p.rows {
		if p.rows[i].state == rowSkipped || p.rows[i].state == rowPending {
			p.rows[i].state = rowSkipped
			p.rows[i].detail = res.Note
		}
	}
}

func (z *handsWizard) progressView(w, h int) []string {
	out := z.progressLines(w)
	// Short of room (80x24): drop the blank separators, then the engine
	// and image lines; the phases and the outcome always show.
	if len(out) > h {
		kept := out[:0:0]
		for i, l := range out {
			if l != "" || i == 0 {
				kept = append(kept, l)
			}
		}
		out = kept
	}
	if len(out) > h && z.kind == wizInit && len(out) > 4 {
		out = append(out[:2:2], out[4:]...)
	}
	return out
}

func (z *handsWizard) progressLines(w int) []string {
	th := z.sh.th
	state := "running"
	switch {
	case z.cancelling && z.stage == wsRun:
		state = "cancelling…"
	case z.stage == wsDone && z.err != nil:
		state = "failed"
	case z.stage == wsDone && z.kind == wizInit:
		state = "ready"
	case z.stage == wsDone:
		state = "finished"
	}
	out := []string{th.Title.Render("Hands " + z.kind + " · " + state), ""}
	kv := func(k, v string) string { return th.HeaderKey.Render(fmt.Sprintf("  %-7s ", k)) + plain(v, w-10) }
	out = append(out, kv("root", z.root))
	if z.kind == wizInit {
		out = append(out, kv("engine", z.socket), kv("image", z.image+" · access "+z.access))
	}
	out = append(out, "")
	for i, r := range z.prog.rows {
		var mark, text string
		st := th.Dim
		switch {
		case r.state == rowDone:
			mark, st, text = "✓", th.RunOK, r.text(z.prog)
		case r.state == rowSkipped:
			mark, text = "–", "skipped: "+r.detail
		case r.state == rowFailed:
			mark, st, text = "✗", th.RunFailed, "failed"
		case i == z.prog.cur && z.stage == wsRun:
			mark, st, text = z.spin.View(), th.RunRunning, r.detail
		default:
			mark = "·"
		}
		if mark != z.spin.View() {
			mark = st.Render(mark)
		}
		line := "  " + mark + " " + st.Render(fmt.Sprintf("%-9s", r.name)) + " " + th.Dim.Render(plain(text, max(w-16, 1)))
		out = append(out, line)
	}
	out = append(out, "")
	switch {
	case z.stage == wsRun && z.askCancel:
		q := "Cancel the init? The engine's failure path stops the container (only if it carries this root's owner label), marks the root failed and writes evidence."
		if z.kind == wizFinish {
			q = "Cancel the finish? What was not done yet stays as it was; run finish again later."
		}
		out = append(out, wrapStyled(th.Pending, q, w-2)...)
		out = append(out, th.Dim.Render("y: cancel it · n: go on"))
	case z.stage == wsRun && z.cancelling:
		out = append(out, th.Pending.Render("cancelling: waiting for the engine to stop what it started…"))
	case z.stage == wsRun:
		out = append(out, th.Dim.Render("esc or ctrl+c cancels"))
	case z.err != nil:
		out = append(out, z.failureView(w)...)
	case z.kind == wizInit:
		out = append(out, th.RunOK.Render(fmt.Sprintf("✓ ready: container %s from %s, access %s", safe(engine.HandsShortID(z.initRes.ContainerID)), safe(z.image), safe(z.access))))
		out = append(out, th.Dim.Render("x finishes it · s shows status and drift · enter closes"))
	default:
		msg := "✓ finished"
		if z.finRes.Stopped {
			msg += ": container " + safe(engine.HandsShortID(z.finRes.ContainerID)) + " stopped"
		} else if z.finRes.Note != "" {
			msg += ": " + z.finRes.Note
		}
		out = append(out, th.RunOK.Render(msg))
		if z.finRes.ContainerKept {
			// warden never removes it: say so, and how.
			out = append(out, wrapHanging(th.Dim, "", "  ", "the stopped container stays on the engine ("+z.finRes.KeptWhy+"); remove it when done: "+safe(z.finRes.RemoveWith), w-2)...)
		}
		out = append(out, th.Dim.Render("s shows status and drift · enter closes"))
	}
	return out
}
