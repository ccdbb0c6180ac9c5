package engine

import (
	"errors"
	"fmt"
	"strings"

	"github.com/wardenhq/warden/engine/perms"
	"github.com/wardenhq/warden/storage"
)

// Role is what an actor may do (docs/operating.md): an operator may change
// things; a viewer may watch but the engine refuses it every change.
type Role string

// Roles.
const (
	RoleOperator Role = "operator"
	RoleViewer   Role = "viewer"
)

// ErrForbidden matches every *ForbiddenError (errors.Is).
var ErrForbidden = errors.New("forbidden")

// ForbiddenError is a change refused because of the actor's role. The
// refusal is receipted ("access.refused") before it is returned.
type ForbiddenError struct {
	Actor Actor
	Role  Role
	What  string
}

func (f *ForbiddenError) Error() string {
	return fmt.Sprintf("%s %s may watch but not %s: ask an operator", f.Role, f.Actor, f.What)
}

// Is makes errors.Is(err, ErrForbidden) true.
func (f *ForbiddenError) Is(target error) bool { return target == ErrForbidden }

// SetRole registers the role of a non-local actor (an SSH key's
// "ssh:<fingerprint>"), in memory: whoever authenticates the actor (the
// SSH server reading its operators file) says what it is, again on every
// reload. An unknown role, or an actor never registered, is a viewer.
// Local actors ("local:<user>") are always operators: only the data dir's
// owner (or root) reaches the engine locally.
func (e *Engine) SetRole(actor Actor, role Role) {
	e.rolesMu.Lock()
	defer e.rolesMu.Unlock()
	if e.roles == nil {
		e.roles = map[Actor]Role{}
	}
	e.roles[actor] = role
}

// ForgetRole drops a registered role (the key left the operators file):
// the actor is a viewer again.
func (e *Engine) ForgetRole(actor Actor) {
	e.rolesMu.Lock()
	defer e.rolesMu.Unlock()
	delete(e.roles, actor)
}

// Role resolves an actor's role; anything unknown is a viewer (fail
// closed).
func (e *Engine) Role(actor Actor) Role {
	if strings.HasPrefix(string(actor), "local:") && len(actor) > len("local:") {
		return RoleOperator
	}
	e.rolesMu.RLock()
	r := e.roles[actor]
	e.rolesMu.RUnlock()
	if r == RoleOperator {
		return RoleOperator
	}
	return RoleViewer
}

// authorize is the first thing every mutating facade method does: an
// operator passes; anyone else gets a *ForbiddenError and the refusal is
// receipted (kind "access.refused", the actor, subject what).
//
// The engine's own decisions (perms.EngineActor denying an expired
// request, the inline terminal prompt of a run the operator started) do
// not come through the facade: they call e.decide directly.
func (e *Engine) authorize(actor Actor, what string) error {
	role := e.Role(actor)
	if role == RoleOperator {
		return nil
	}
	if actor == "" {
		actor = "unknown"
	}
	f := &ForbiddenError{Actor: actor, Role: role, What: what}
	if _, err := e.store.AppendReceipt(storage.Draft{Kind: storage.KindAccessRefused, Actor: string(actor), Subject: what,
		Summary: f.Error(), Details: map[string]any{"role": string(role), "what": what}}); err != nil {
		return fmt.Errorf("%w (and recording the refusal failed: %v)", f, err)
	}
	return f
}

// internalActor is who the engine records its own decisions as.
const internalActor = Actor(perms.EngineActor)
