package engine

import (
	"fmt"
	"time"

	"warden/storage"
)

// Policy is a subject's policy (DESIGN section 7).
type Policy = storage.PolicyRecord

// ConflictError is a lost compare-and-swap on a policy revision.
type ConflictError = storage.ConflictError

// Policy reads a subject's policy. A subject without one gets the default:
// everything denied, revision 0, and Exists false.
func (e *Engine) Policy(subject string) (p Policy, exists bool, err error) {
	if !storage.ValidSubject(subject) {
		return p, false, fmt.Errorf("bad policy subject %q: want module:ID or hands:/ABS/ROOT", subject)
	}
	err = e.store.View(func(tx *storage.Tx) error {
		p, exists, err = tx.Policy(subject)
		return err
	})
	if err == nil && !exists {
		p = Policy{Subject: subject, Rules: []storage.Rule{}}
	}
	return p, exists, err
}

// SetPolicy replaces a subject's policy if its revision is still expected;
// otherwise it fails with a *ConflictError naming both revisions.
func (e *Engine) SetPolicy(actor Actor, p Policy, expected uint64) (Policy, error) {
	if !storage.ValidSubject(p.Subject) {
		return p, fmt.Errorf("bad policy subject %q: want module:ID or hands:/ABS/ROOT", p.Subject)
	}
	p.Updated, p.By = time.Now().UTC(), string(actor)
	var out Policy
	_, err := e.store.Update(func(tx *storage.Tx) error {
		var err error
		if out, err = tx.SwapPolicy(p, expected); err != nil {
			return err
		}
		_, err = tx.AppendReceipt(storage.Draft{Kind: "policy.set", Actor: string(actor), Subject: p.Subject,
			Summary: fmt.Sprintf("policy %s set to revision %d: workspace read=%v write=%v, execute=%v, network=%v, %d rules",
				p.Subject, out.Revision, p.Workspace.Read, p.Workspace.Write, p.Execute, p.Network, len(out.Rules)),
			Details: map[string]any{"revision": out.Revision, "network": p.Network, "execute": p.Execute, "workspace": p.Workspace, "rules": len(out.Rules)}})
		return err
	})
	return out, err
}

// networkGranted says whether a module's policy grants its hooks network.
func (e *Engine) networkGranted(module string) bool {
	p, _, err := e.Policy("module:" + module)
	return err == nil && p.Network
}
