package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/wardenhq/warden/engine/hands"
	"github.com/wardenhq/warden/storage"
)

// HandsRecord is a known hands root.
type HandsRecord = storage.HandsRecord

// handsSubject is the policy subject of a hands root.
func handsSubject(root string) string { return "hands:" + root }

// HandsInit sets up a hands root (docs/operating.md) owned by actor. Every
// phase is also a receipt ("hands.<phase>") and updates the known-root
// record; between running and ready the root gets its initial policy:
// workspace read and write as --access says, no execute, no network.
func (e *Engine) HandsInit(ctx context.Context, actor Actor, opts hands.InitOptions) (hands.InitResult, error) {
	if err := e.authorize(actor, "set up hands root "+opts.Root); err != nil {
		return hands.InitResult{}, err
	}
	opts.Owner = string(actor)
	root, access := opts.Root, opts.Access
	image := opts.Image
	if strings.IndexFunc(image, unicode.IsControl) >= 0 || len(image) > 512 {
		image = "" // recorded by id only; hands.Init refuses such a name anyway
	}
	opts.OnPhase = func(r hands.SetupReceipt) error { return e.recordHandsPhase(actor, root, access, image, r) }
	opts.BeforeReady = func(hands.SetupReceipt) error {
		files := access == hands.AccessFiles
		_, err := e.swapHandsPolicy(actor, root, Policy{Subject: handsSubject(root),
			Workspace: storage.Workspace{Read: files, Write: files}, Rules: []storage.Rule{}})
		return err
	}
	return hands.Init(ctx, opts)
}

// HandsFinish stops the root's recorded container (only when the runtime,
// owner label and generation match), writes phase finished and revokes
// every grant of the root's policy. Finishing twice says "already
// finished", after making sure no grant survived a first finish that
// could not revoke.
func (e *Engine) HandsFinish(ctx context.Context, actor Actor, root string, progress func(step, detail string)) (hands.FinishResult, error) {
	if err := e.authorize(actor, "finish hands root "+root); err != nil {
		return hands.FinishResult{}, err
	}
	res, err := hands.Finish(ctx, root, progress, func(r hands.SetupReceipt) error {
		if err := e.recordHandsPhase(actor, root, "", "", r); err != nil {
			return err
		}
		_, err := e.revokeHands(actor, root, true)
		return err
	})
	if errors.Is(err, hands.ErrAlreadyFinished) {
		if _, rerr := e.revokeHands(actor, root, false); rerr != nil {
			return res, fmt.Errorf("%w (and revoking its grants failed: %v; run `warden perms policy show %s`)", err, rerr, handsSubject(root))
		}
	}
	return res, err
}

// HandsStatus compares the root's receipt with what its container runtime shows.
func (e *Engine) HandsStatus(ctx context.Context, root string) (hands.StatusReport, error) {
	return hands.Status(ctx, root)
}

// HandsList lists the roots this data dir knows, by path.
func (e *Engine) HandsList() (rs []HandsRecord, err error) {
	err = e.store.View(func(tx *storage.Tx) error {
		rs, err = tx.HandsRoots()
		return err
	})
	return rs, err
}

// recordHandsPhase writes the known-root record and a receipt for one
// phase in one transaction. access is empty when finishing: the record
// (or hands.json) says what it was.
func (e *Engine) recordHandsPhase(actor Actor, root, access, imageName string, r hands.SetupReceipt) error {
	now := time.Now().UTC()
	_, err := e.store.Update(func(tx *storage.Tx) error {
		rec, err := tx.Hands(root)
		fresh := errors.Is(err, storage.ErrNotFound) || r.Phase == hands.PhasePrepared
		if err != nil && !errors.Is(err, storage.ErrNotFound) {
			return err
		}
		if fresh {
			// A new root at a known path replaces the old record; the
			// receipts keep the old one's history.
			rec = HandsRecord{Root: root, Created: now, Access: access}
		}
		if rec.Access == "" {
			rec.Access = hands.AccessNone
			if info, err := hands.ReadInfo(root); err == nil {
				rec.Access = info.Access
			}
		}
		rec.Owner, rec.EngineSocket, rec.Engine, rec.DaemonID = r.Owner, r.EngineSocket, r.Engine, r.DaemonID
		rec.Image, rec.ContainerID, rec.Generation, rec.Phase, rec.Updated = r.Image, r.ContainerID, r.Generation, string(r.Phase), now
		if imageName != "" {
			rec.ImageName = imageName // the name init was given; finish keeps it
		}
		if err := tx.PutHands(rec); err != nil {
			return err
		}
		_, err = tx.AppendReceipt(storage.Draft{Kind: storage.KindFamilyHands + string(r.Phase), Actor: string(actor), Subject: handsSubject(root),
			Summary: handsSummary(root, r),
			Details: map[string]any{"root": root, "phase": r.Phase, "containerId": r.ContainerID, "image": r.Image,
				"daemonId": r.DaemonID, "engine": r.Engine, "inodes": r.Inodes, "engineSocket": r.EngineSocket, "generation": r.Generation, "access": rec.Access}})
		return err
	})
	return err
}

func handsSummary(root string, r hands.SetupReceipt) string {
	short := hands.ShortID(r.ContainerID)
	switch r.Phase {
	case hands.PhasePrepared:
		return fmt.Sprintf("hands %s prepared on the %s engine at %s (daemon %s)", root, r.Engine, r.EngineSocket, r.DaemonID)
	case hands.PhaseCreating:
		if r.ContainerID == "" {
			return fmt.Sprintf("hands %s: creating a container from %s", root, r.Image)
		}
		return fmt.Sprintf("hands %s: container %s created from %s", root, short, r.Image)
	case hands.PhaseRunning:
		return fmt.Sprintf("hands %s: container %s running (generation %s)", root, short, r.Generation)
	case hands.PhaseReady:
		return fmt.Sprintf("hands %s ready: container %s", root, short)
	case hands.PhaseFailed:
		return fmt.Sprintf("hands %s: initialization failed (container %s); evidence under %s/evidence", root, short, root)
	default:
		return fmt.Sprintf("hands %s finished: container %s", root, short)
	}
}

// swapHandsPolicy sets a root's policy by compare-and-swap on its current
// revision. A fresh root has none (revision 0 expected, revision 0
// written); a policy already there belongs to an earlier root at the same
// path, which is gone (a root must be new), so it is replaced, not merged.
func (e *Engine) swapHandsPolicy(actor Actor, root string, p Policy) (Policy, error) {
	cur, exists, err := e.Policy(handsSubject(root))
	if err != nil {
		return p, err
	}
	expected := uint64(0)
	if exists {
		expected = cur.Revision
	}
	return e.setPolicy(actor, p, expected)
}

// revokeHands takes every grant of a root's policy: no workspace, no
// execute, no network, no rules. always=false skips a policy that already
// grants nothing.
func (e *Engine) revokeHands(actor Actor, root string, always bool) (Policy, error) {
	cur, _, err := e.Policy(handsSubject(root))
	if err != nil {
		return cur, err
	}
	if !always && !cur.Workspace.Read && !cur.Workspace.Write && !cur.Execute && !cur.Network && len(cur.Rules) == 0 {
		return cur, nil
	}
	return e.swapHandsPolicy(actor, root, Policy{Subject: handsSubject(root), Rules: []storage.Rule{}})
}
