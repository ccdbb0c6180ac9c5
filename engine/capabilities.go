package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/wardenhq/warden/engine/sdk/protocol"
)

// capFunc implements one capability method for a run.
type capFunc func(ctx context.Context, r *activeRun, args []json.RawMessage) (json.RawMessage, *protocol.Error)

// capabilityRegistry maps capability -> method -> implementation. Each
// engine has its own (Engine.capabilities, from defaultCapabilities): the
// broker's call frames are dispatched to it and the preflight checks
// `requires` against it. A capability appears in it only when it works.
type capabilityRegistry map[string]map[string]capFunc

// defaultCapabilities is what every engine offers (docs/protocol.md,
// "Capabilities v1").
func defaultCapabilities() capabilityRegistry {
	return capabilityRegistry{
		"operator": {"confirm": operatorConfirm},
		"hands":    {"exec": handsExec, "read": handsRead, "write": handsWrite},
	}
}

// names lists the capabilities, sorted, for messages.
func (c capabilityRegistry) names() string { return namesOrNone(slices.Sorted(maps.Keys(c))) }

// methods lists one capability's methods, sorted.
func (c capabilityRegistry) methods(name string) []string { return slices.Sorted(maps.Keys(c[name])) }

// Call dispatches a capability call.
func (r *activeRun) Call(ctx context.Context, c *protocol.Call) (json.RawMessage, *protocol.Error) {
	reg := r.e.capabilities
	methods, ok := reg[c.Capability]
	if !ok {
		return nil, &protocol.Error{Code: protocol.CodeUnknownCapability, Message: fmt.Sprintf("no capability %q (available: %s)", c.Capability, reg.names())}
	}
	fn, ok := methods[c.Method]
	if !ok {
		return nil, &protocol.Error{Code: protocol.CodeUnknownCapability, Message: fmt.Sprintf("capability %q has no method %q (it has: %s)", c.Capability, c.Method, namesOrNone(reg.methods(c.Capability)))}
	}
	return fn(ctx, r, c.Args)
}

// operatorConfirm asks the operator a yes/no question. The call waits for
// an answer with the idle clock paused; with nobody to ask it is "no" at
// once, and the stream says why.
func operatorConfirm(ctx context.Context, r *activeRun, args []json.RawMessage) (json.RawMessage, *protocol.Error) {
	msg, ok := stringArgs(args, 1)
	if !ok || msg[0] == "" {
		return nil, &protocol.Error{Code: protocol.CodeBadFrame, Message: `operator.confirm: want ["message"]`}
	}
	ok, err := r.e.confirm(ctx, r, msg[0])
	if err != nil && ctx.Err() == nil && isStorageFailure(err) {
		return nil, r.storageFailed("operator.confirm", err)
	}
	if err != nil {
		return nil, &protocol.Error{Code: protocol.CodeRunEnded, Message: "operator.confirm: " + err.Error()}
	}
	if ok {
		return json.RawMessage("true"), nil
	}
	return json.RawMessage("false"), nil
}
