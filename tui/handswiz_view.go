package tui

import (
	"errors"
	"fmt"
	"strings"

	"github.com/wardenhq/warden/engine"
)

// The wizards' views: the forms, the live progress of the engine's steps,
// and the outcome with what to do next.

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
// error carries (engine.HandsFixes: its structured Fix fields, never its text
// taken apart), then what the console offers.
func nextSteps(kind string, err error) []string {
	var failed *engine.HandsInitFailedError
	var rootErr *engine.HandsRootError
	if errors.As(err, &rootErr) {
		return []string{rootErr.Fix, "nothing was touched: press i to start again with another root"}
	}
	out := engine.HandsFixes(err)
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
