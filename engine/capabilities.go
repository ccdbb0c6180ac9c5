package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"warden/engine/protocol"
)

// capFunc implements one capability method for a run.
type capFunc func(ctx context.Context, r *activeRun, args []json.RawMessage) (json.RawMessage, *protocol.Error)

// capabilities is the registry the broker's call frames are dispatched to
// and the preflight checks `requires` against. A capability appears here
// only when it works.
var capabilities = map[string]map[string]capFunc{
	"operator": {"confirm": operatorConfirm},
}

func capabilityNames() string { return joinNames(sortedKeys(capabilities)) }

func capabilityMethods(c string) []string {
	ms := sortedKeys(capabilities[c])
	sort.Strings(ms)
	return ms
}

// Call dispatches a capability call.
func (r *activeRun) Call(ctx context.Context, c *protocol.Call) (json.RawMessage, *protocol.Error) {
	methods, ok := capabilities[c.Capability]
	if !ok {
		return nil, &protocol.Error{Code: protocol.CodeUnknownCapability, Message: fmt.Sprintf("no capability %q (available: %s)", c.Capability, capabilityNames())}
	}
	fn, ok := methods[c.Method]
	if !ok {
		return nil, &protocol.Error{Code: protocol.CodeUnknownCapability, Message: fmt.Sprintf("capability %q has no method %q (it has: %s)", c.Capability, c.Method, joinNames(capabilityMethods(c.Capability)))}
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
