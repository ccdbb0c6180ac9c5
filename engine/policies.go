package engine

import (
	"time"

	"github.com/wardenhq/warden/engine/perms"
	"github.com/wardenhq/warden/storage"
)

// Policy is a subject's policy (docs/operating.md).
type Policy = storage.PolicyRecord

// ConflictError is a lost compare-and-swap on a policy revision.
type ConflictError = storage.ConflictError

// Policy reads a subject's policy. A subject without one gets the default:
// everything denied, revision 0, and Exists false.
func (e *Engine) Policy(subject string) (p Policy, exists bool, err error) {
	err = e.store.View(func(tx *storage.Tx) error {
		p, exists, err = perms.Policy(tx, subject)
		return err
	})
	return p, exists, err
}

// SetPolicy replaces a subject's policy if its revision is still expected;
// otherwise it fails with a *ConflictError naming both revisions. The
// change is receipted.
func (e *Engine) SetPolicy(actor Actor, p Policy, expected uint64) (Policy, error) {
	if err := e.authorize(actor, "set the policy of "+p.Subject); err != nil {
		return Policy{}, err
	}
	return e.setPolicy(actor, p, expected)
}

// setPolicy is SetPolicy for callers already authorized (HandsInit and
// HandsFinish).
func (e *Engine) setPolicy(actor Actor, p Policy, expected uint64) (Policy, error) {
	var out Policy
	_, err := e.store.Update(func(tx *storage.Tx) error {
		var err error
		out, err = perms.SetPolicy(tx, string(actor), p, expected, time.Now())
		return err
	})
	return out, err
}

// networkGranted says whether a module's policy grants all its hooks
// network (a hook may also hold an approve-always rule of its own, which
// StartRun honours; see networkFor).
func (e *Engine) networkGranted(module string) bool {
	p, _, err := e.Policy("module:" + module)
	return err == nil && p.Network
}
