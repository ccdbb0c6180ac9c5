package hands

import (
	"context"
	"fmt"
	"strings"
)

// StatusReport is a root's receipt beside what the runtime shows now.
type StatusReport struct {
	Root         string           `json:"root"`
	Phase        Phase            `json:"phase"`
	Owner        string           `json:"owner"`
	EngineSocket string           `json:"engineSocket"`
	Image        string           `json:"image"`
	ContainerID  string           `json:"containerId"`
	Generation   string           `json:"generation"`
	InProgress   bool             `json:"inProgress"` // another process holds the lease
	Engine       string           `json:"engine"`     // ok, unreachable, different
	EngineKind   string           `json:"engineKind"` // docker or podman, as recorded
	Storage      string           `json:"engineStorage,omitempty"`
	Inodes       string           `json:"inodes"` // the workspace's inode bound, as recorded
	Container    ContainerStatus  `json:"container"`
	Unrecorded   []string         `json:"unrecorded,omitempty"` // labelled containers the receipt does not name
	Failure      *FailureEvidence `json:"failure,omitempty"`
	Drift        []Drift          `json:"drift"`
}

// ContainerStatus is the live state of the recorded container.
type ContainerStatus struct {
	State             string `json:"state"` // running, exited, created, missing, none (not recorded), unknown
	StartedAt         string `json:"startedAt,omitempty"`
	GenerationMatches bool   `json:"generationMatches"`
	LabelOK           bool   `json:"labelOk"`
}

// Drift is a mismatch between the receipt and the runtime, with its fix.
type Drift struct {
	Problem string `json:"problem"`
	Fix     string `json:"fix"`
}

// Status reads the receipt strictly and compares it with the runtime. Only
// an unreadable receipt is an error; everything else is reported as drift.
func Status(ctx context.Context, root string) (StatusReport, error) {
	rec, err := ReadReceipt(root)
	if err != nil {
		return StatusReport{}, err
	}
	s := StatusReport{Root: root, Phase: rec.Phase, Owner: rec.Owner, EngineSocket: rec.EngineSocket, EngineKind: rec.Engine,
		Storage: rec.EngineStorage, Inodes: rec.Inodes, Image: rec.Image,
		ContainerID: rec.ContainerID, Generation: rec.Generation, Container: ContainerStatus{State: "unknown"}, Drift: []Drift{}}
	drift := func(problem, fix string) { s.Drift = append(s.Drift, Drift{problem, fix}) }
	finish := fmt.Sprintf("run `warden hands finish --root %s` to close the books", root)
	if ev, ok, err := readFailure(root); err != nil {
		drift(err.Error(), "inspect the evidence dir by hand")
	} else if ok {
		s.Failure = &ev
	}
	s.InProgress = leaseHeld(root)

	eng, err := openRuntime(ctx, rec.EngineSocket)
	if err != nil {
		s.Engine = "unreachable"
		drift(err.Error(), "start the engine (or fix its socket), then run `warden hands status --root "+root+"` again")
		return s, nil
	}
	defer eng.Close()
	if err := eng.checkIdentity(root, rec); err != nil {
		s.Engine = "different"
		drift(err.Error(), "point at the engine that holds the container; warden acts on nothing until it matches")
		return s, nil
	}
	s.Engine = "ok"

	var o observed
	if rec.ContainerID == "" {
		s.Container.State = "none"
		if rec.Phase != PhasePrepared {
			found, err := eng.labelled(ctx, rec.Owner, root)
			if err != nil {
				drift(err.Error(), "check the engine, then run status again")
			}
			s.Unrecorded = found
		}
	} else {
		if o, _, err = eng.inspect(ctx, rec.ContainerID, rec.Owner, root); err != nil {
			s.Container.State = "unknown"
			drift(err.Error(), "check the engine, then run status again")
			return s, nil
		}
		s.Container = ContainerStatus{State: o.State, StartedAt: o.StartedAt, LabelOK: o.LabelOK,
			GenerationMatches: rec.Generation != "" && o.StartedAt == rec.Generation}
	}
	if s.InProgress && rec.Phase != PhaseFinished {
		return s, nil // init or finish is at work: nothing has drifted yet
	}
	id := rec.ContainerID
	cli := cliFor(rec.Engine, rec.EngineSocket)
	inspectIt := fmt.Sprintf("inspect it (`%s inspect %s`)", cli, id)
	restarted := func() {
		was := fmt.Sprintf("container %s was restarted outside warden (started %s, recorded generation %s)", ShortID(id), o.StartedAt, rec.Generation)
		if !o.Running {
			drift(was+fmt.Sprintf(" and is %s now", o.State), finish)
			return
		}
		// finish refuses to stop it (it is not the container warden
		// started) and accepts it once stopped: say exactly that.
		drift(was, inspectIt+", then `"+cli+" stop` it yourself and "+finish+", or init a new root")
	}
	foreign := func() {
		drift(fmt.Sprintf("container %s does not carry this root's owner label: warden will never stop it", ShortID(id)),
			"check that "+receiptPath(root)+" names the right container; "+inspectIt+" and deal with it yourself")
	}
	unrecorded := func() bool {
		if len(s.Unrecorded) == 0 {
			return false
		}
		running, err := eng.runningOf(ctx, s.Unrecorded, rec.Owner, root)
		switch {
		case err != nil:
			drift(err.Error(), "check the engine, then run status again")
		case len(running) > 0:
			drift(fmt.Sprintf("reconciliation required: container(s) %s carry this root's owner label but were never recorded, and %s running", strings.Join(shortIDs(s.Unrecorded), ", "), strings.Join(shortIDs(running), ", ")),
				fmt.Sprintf("inspect them (`%s inspect ID`), `%s stop` the running ones yourself, then %s", cli, cli, finish))
		default:
			drift(fmt.Sprintf("stopped container(s) %s carry this root's owner label but were never recorded", strings.Join(shortIDs(s.Unrecorded), ", ")),
				fmt.Sprintf("%s (warden stops nothing; `%s rm ID` them when you are done with them)", finish, cli))
		}
		return true
	}
	switch rec.Phase {
	case PhaseReady:
		switch {
		case o.Missing:
			drift(fmt.Sprintf("container %s was removed outside warden", ShortID(id)), finish)
		case !o.LabelOK:
			foreign()
		case !s.Container.GenerationMatches:
			restarted()
		case !o.Running:
			drift(fmt.Sprintf("the container stopped outside warden (%s)", o.State), finish)
		}
	case PhasePrepared, PhaseCreating, PhaseRunning:
		at := fmt.Sprintf("init was interrupted at phase %s", rec.Phase)
		switch {
		case id == "":
			if !unrecorded() {
				drift(at+" before a container was created", finish)
			}
		case o.Missing:
			drift(at+fmt.Sprintf("; container %s is gone", ShortID(id)), finish)
		case !o.LabelOK:
			foreign()
		case o.Running && rec.Generation == "":
			drift(at+fmt.Sprintf("; reconciliation required: container %s is running but its generation was never recorded, so warden will not stop it", ShortID(id)),
				inspectIt+", `"+cli+" stop` it yourself, then "+finish)
		case rec.Generation != "" && !s.Container.GenerationMatches:
			restarted()
		case o.Running:
			drift(at+fmt.Sprintf("; container %s is still running", ShortID(id)), fmt.Sprintf("run `warden hands finish --root %s` to stop it and close the books", root))
		default:
			drift(at+fmt.Sprintf("; container %s is %s", ShortID(id), o.State), finish)
		}
	case PhaseFailed:
		switch {
		case id == "":
			if !unrecorded() {
				drift("init failed before a container was created", finish)
			}
		case o.Missing:
			drift(fmt.Sprintf("init failed; container %s is gone", ShortID(id)), finish)
		case !o.LabelOK:
			foreign()
		case o.Running && rec.Generation != "" && s.Container.GenerationMatches:
			drift(fmt.Sprintf("reconciliation required: init failed but container %s is still running", ShortID(id)),
				fmt.Sprintf("run `warden hands finish --root %s` to stop it and close the books", root))
		case o.Running:
			drift(fmt.Sprintf("reconciliation required: init failed but container %s is running and its generation was never recorded, so warden will not stop it", ShortID(id)),
				inspectIt+", `"+cli+" stop` it yourself, then "+finish)
		default:
			drift(fmt.Sprintf("init failed; container %s is %s", ShortID(id), o.State), "read "+root+"/"+EvidenceDir+"/"+FailureFile+", then "+finish)
		}
	case PhaseFinished:
		if id != "" && o.Running && o.LabelOK {
			drift(fmt.Sprintf("phase finished but container %s is running again", ShortID(id)), inspectIt+" and `"+cli+" stop` it yourself")
		}
	}
	return s, nil
}

func shortIDs(ids []string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = ShortID(id)
	}
	return out
}
