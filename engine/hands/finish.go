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
}

// Finish stops exactly the recorded container of root, and only when the
// engine is the recorded one, the container carries our owner label and
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
		return res, fmt.Errorf("%s is %w (container %s); nothing to do", root, ErrAlreadyFinished, shortID(rec.ContainerID))
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
		return res, fmt.Errorf("%s is %w (container %s); nothing to do", root, ErrAlreadyFinished, shortID(rec.ContainerID))
	}
	say("receipt", fmt.Sprintf("phase %s, container %s", rec.Phase, shortID(rec.ContainerID)))
	res.ContainerID = rec.ContainerID

	eng, err := openEngine(ctx, rec.EngineSocket)
	if err != nil {
		return res, err
	}
	defer eng.Close()
	if err := eng.checkIdentity(root, rec); err != nil {
		return res, err
	}
	say("engine", "daemon "+rec.DaemonID+" on "+rec.EngineSocket+" as recorded")

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
			return res, fmt.Errorf("reconciliation required: container %s carries this root's owner label but was never recorded, so warden will not stop it: "+
				"inspect it (`docker -H unix://%s inspect %s`), then `docker stop` it yourself, and run `warden hands finish --root %s` again",
				shortID(running[0]), rec.EngineSocket, running[0], root)
		}
		res.Note = "no container was created"
		if len(found) > 0 {
			// Stopped, so nothing to stop; they are the operator's to remove.
			res.Note = fmt.Sprintf("no container was recorded; stopped container(s) %s carry this root's owner label (remove them with `docker -H unix://%s rm ID` when done with them)",
				strings.Join(shortIDs(found), ", "), rec.EngineSocket)
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
			return res, fmt.Errorf("container %s does not carry this root's owner label, so warden will never stop it: "+
				"check that %s names the right container, inspect it (`docker -H unix://%s inspect %s`) and deal with it yourself, then init a new root",
				shortID(id), receiptPath(root), rec.EngineSocket, id)
		case rec.Generation == "" && o.Running:
			return res, fmt.Errorf("reconciliation required: container %s is running but init never recorded its generation, so warden cannot tell it is the one it started: "+
				"inspect it (`docker -H unix://%s inspect %s`), then `docker stop`/`docker rm` it yourself, and run `warden hands finish --root %s` again",
				shortID(id), rec.EngineSocket, id, root)
		case rec.Generation != "" && o.StartedAt != rec.Generation && o.Running:
			return res, fmt.Errorf("container %s was restarted behind warden's back (started %s, recorded generation %s), so warden will not stop it: "+
				"inspect it (`docker -H unix://%s inspect %s`), then `docker stop` it yourself and run `warden hands finish --root %s` again to close the books, or init a new root",
				shortID(id), o.StartedAt, rec.Generation, rec.EngineSocket, id, root)
		case rec.Generation != "" && o.StartedAt != rec.Generation:
			// Restarted behind our back, but stopped since: there is
			// nothing to stop, so nothing to refuse.
			res.Note = fmt.Sprintf("the container was restarted outside warden (started %s) and is not running now (%s)", o.StartedAt, o.State)
		case o.Running:
			say("inspected", fmt.Sprintf("container %s is running generation %s with our label", shortID(id), rec.Generation))
			stopped, err := eng.stopOwned(ctx, id, rec.Owner, root)
			if err != nil {
				return res, fmt.Errorf("%w; nothing was recorded: run `warden hands status --root %s` and try again", err, root)
			}
			res.Stopped = stopped
			say("stopped", "container "+shortID(id)+" is stopped (verified by inspection)")
		default:
			res.Note = "the container was not running (" + o.State + ")"
		}
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
	say("finished", root)
	return res, nil
}

func receiptPath(root string) string { return root + "/" + EvidenceDir + "/" + ReceiptFile }
