package hands

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// ErrAlreadyFinished is returned by Finish for a root that was finished.
var ErrAlreadyFinished = errors.New("already finished")

// FinishResult says how a root was finished.
type FinishResult struct {
	Root        string `json:"root"`
	Phase       Phase  `json:"phase"`
	ContainerID string `json:"containerId"`
	Stopped     bool   `json:"stopped"` // warden stopped the container now
	Note        string `json:"note,omitempty"`
	// ContainerKept: the stopped container stays on the runtime. warden
	// never removes a container: the stopped one still holds what the
	// evidence files do not copy (its logs, its filesystem changes, its
	// inspect record). KeptWhy says so; RemoveWith is the runtime's
	// command that removes it, for when the operator is done with it.
	ContainerKept bool   `json:"containerKept"`
	KeptWhy       string `json:"keptWhy,omitempty"`
	RemoveWith    string `json:"removeWith,omitempty"`
}

// keptWhy is why finish leaves the stopped container on the runtime.
const keptWhy = "warden never removes a container: the stopped one keeps its logs, filesystem changes and inspect record, which evidence/ does not copy"

// Finish stops exactly the recorded container of root, and only when the
// runtime is the recorded one, the container carries our owner label and
// it is still the recorded generation; it verifies by inspection that the
// container stopped, then writes phase finished and calls onPhase. Anything
// else is refused with what to do next, and nothing is stopped.
func Finish(ctx context.Context, root string, progress func(step, detail string), onPhase func(SetupReceipt) error) (FinishResult, error) {
	say := func(step, detail string) {
		if progress != nil {
			progress(step, detail)
		}
	}
	res := FinishResult{Root: root}
	rec, err := ReadReceipt(root)
	if err != nil {
		return res, err
	}
	if rec.Phase == PhaseFinished {
		return res, fmt.Errorf("%s is %w (container %s); nothing to do", root, ErrAlreadyFinished, ShortID(rec.ContainerID))
	}
	lease, err := takeLease(root)
	if err != nil {
		return res, err
	}
	defer lease.Close()
	// Read again under the lease: an init that just ended may have moved it.
	if rec, err = ReadReceipt(root); err != nil {
		return res, err
	}
	if rec.Phase == PhaseFinished {
		return res, fmt.Errorf("%s is %w (container %s); nothing to do", root, ErrAlreadyFinished, ShortID(rec.ContainerID))
	}
	say(StepReceipt, fmt.Sprintf("phase %s, container %s", rec.Phase, ShortID(rec.ContainerID)))
	res.ContainerID = rec.ContainerID

	eng, err := openRuntime(ctx, rec.EngineSocket)
	if err != nil {
		return res, err
	}
	defer eng.Close()
	if err := eng.checkIdentity(root, rec); err != nil {
		return res, err
	}
	say(StepRuntime, runtimeName(rec.Engine)+" "+rec.DaemonID+" on "+rec.EngineSocket+" as recorded")
	cli := cliFor(rec.Engine, rec.EngineSocket)

	if rec.ContainerID == "" {
		// Creation may have happened without its id reaching the receipt.
		found, err := eng.labelled(ctx, rec.Owner, root)
		if err != nil {
			return res, err
		}
		running, err := eng.runningOf(ctx, found, rec.Owner, root)
		if err != nil {
			return res, err
		}
		if len(running) > 0 {
			return res, &FixError{Problem: fmt.Sprintf("reconciliation required: container %s carries this root's owner label but was never recorded, so warden will not stop it", ShortID(running[0])),
				Fix: fmt.Sprintf("inspect it (`%s inspect %s`), then `%s stop` it yourself, and run `warden hands finish --root %s` again", cli, running[0], cli, root)}
		}
		res.Note = "no container was created"
		if len(found) > 0 {
			// Stopped, so nothing to stop; they are the operator's to remove.
			res.Note = fmt.Sprintf("no container was recorded; stopped container(s) %s carry this root's owner label (remove them with `%s rm ID` when done with them)",
				strings.Join(shortIDs(found), ", "), cli)
		}
	} else {
		o, _, err := eng.inspect(ctx, rec.ContainerID, rec.Owner, root)
		if err != nil {
			return res, err
		}
		id := rec.ContainerID
		switch {
		case o.Missing:
			res.Note = "the container was already gone"
		case !o.LabelOK:
			return res, &FixError{Problem: fmt.Sprintf("container %s does not carry this root's owner label, so warden will never stop it", ShortID(id)),
				Fix: fmt.Sprintf("check that %s names the right container, inspect it (`%s inspect %s`) and deal with it yourself, then init a new root", receiptPath(root), cli, id)}
		case rec.Generation == "" && o.Running:
			return res, &FixError{Problem: fmt.Sprintf("reconciliation required: container %s is running but init never recorded its generation, so warden cannot tell it is the one it started", ShortID(id)),
				Fix: fmt.Sprintf("inspect it (`%s inspect %s`), then `%s stop` it yourself, and run `warden hands finish --root %s` again", cli, id, cli, root)}
		case rec.Generation != "" && o.StartedAt != rec.Generation && o.Running:
			return res, &FixError{Problem: fmt.Sprintf("container %s was restarted behind warden's back (started %s, recorded generation %s), so warden will not stop it", ShortID(id), o.StartedAt, rec.Generation),
				Fix: fmt.Sprintf("inspect it (`%s inspect %s`), then `%s stop` it yourself and run `warden hands finish --root %s` again to close the books, or init a new root", cli, id, cli, root)}
		case rec.Generation != "" && o.StartedAt != rec.Generation:
			// Restarted behind our back, but stopped since: there is
			// nothing to stop, so nothing to refuse.
			res.Note = fmt.Sprintf("the container was restarted outside warden (started %s) and is not running now (%s)", o.StartedAt, o.State)
		case o.Running:
			say(StepInspected, fmt.Sprintf("container %s is running generation %s with our label", ShortID(id), rec.Generation))
			stopped, err := eng.stopOwned(ctx, id, rec.Owner, root)
			if err != nil {
				return res, &FixError{Problem: err.Error() + "; nothing was recorded", Fix: "run `warden hands status --root " + root + "` and try again", Err: err}
			}
			res.Stopped = stopped
			say(StepStopped, "container "+ShortID(id)+" is stopped (verified by inspection)")
		default:
			res.Note = "the container was not running (" + o.State + ")"
		}
	}
	if rec.ContainerID != "" && res.Note != "the container was already gone" {
		res.ContainerKept, res.KeptWhy = true, keptWhy
		res.RemoveWith = cli + " rm " + rec.ContainerID
	}
	rec.Phase = PhaseFinished
	if err := writeReceipt(root, rec); err != nil {
		return res, err
	}
	res.Phase = PhaseFinished
	if onPhase != nil {
		if err := onPhase(rec); err != nil {
			return res, fmt.Errorf("%s is finished but recording it failed: %w", root, err)
		}
	}
	say(StepFinished, root)
	return res, nil
}

func receiptPath(root string) string { return root + "/" + EvidenceDir + "/" + ReceiptFile }
