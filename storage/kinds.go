package storage

// Receipt kinds: every Kind the engine writes, named once. A kind is
// "<family>.<what>"; ReceiptFilter.Kind takes an exact kind or a family
// prefix ending in "." (KindFamilyHook, ...). docs/operating.md lists
// what each family records.
const (
	KindHookStart = "hook.start" // a run started (details: inputs' names, jail, absent mounts)
	KindHookEnd   = "hook.end"   // a run ended (details: verdict, exit, limit, error)

	KindModuleAdd    = "module.add"
	KindModuleRemove = "module.remove"

	KindSecretSet    = "secret.set"    // by an operator; names only, never values
	KindSecretDelete = "secret.delete" // by an operator
	KindSecretWrite  = "secret.write"  // by a hook's store op
	KindConfigSet    = "config.set"
	KindConfigDelete = "config.delete"
	KindConfigWrite  = "config.write"

	KindPolicySet      = "policy.set"
	KindPolicyRule     = "policy.rule" // approve-always added an exact rule
	KindRequestOpen    = "request.open"
	KindRequestClaim   = "request.claim" // an approve-once retry was consumed
	KindRequestRefused = "request.refused"
	KindRequestDecide  = "request.decide"

	KindTokenIssue   = "token.issue"
	KindTokenRevoke  = "token.revoke"
	KindTokenRefused = "token.refused" // a hook connection's token was not VALID (its class)
	KindTrustInit    = "trust.init"
	KindTrustRotate  = "trust.rotate"

	KindAccessRefused  = "access.refused"  // a viewer tried a change
	KindControlRefused = "control.refused" // a control-socket peer was refused
	KindStreamError    = "stream.error"    // stream lines could not be stored

	KindMCPConnect    = "mcp.connect"    // an MCP client's session began (warden mcp serve)
	KindMCPDisconnect = "mcp.disconnect" // and ended
	KindMCPGate       = "mcp.gate"       // a tool call let through or refused, and why
	KindMCPHands      = "mcp.hands"      // a hands tool call's outcome

	KindNetworkConnect = "network.connect" // one egress-proxy connection, at its close (allowed or refused, by what, bytes)
)

// Kind families, for filters and views.
const (
	KindFamilyHook    = "hook."
	KindFamilyModule  = "module."
	KindFamilyHands   = "hands." // + the phase written: hands.prepared ... hands.finished
	KindFamilyPolicy  = "policy."
	KindFamilyRequest = "request."
	KindFamilyMCP     = "mcp."
	KindFamilyNetwork = "network."
)

// KindFamilies are the families of every kind above, each ending in ".",
// for a view that must tell a kind from other text. A new family is added
// here with its kinds.
func KindFamilies() []string {
	return []string{KindFamilyHook, KindFamilyModule, KindFamilyHands, KindFamilyPolicy, KindFamilyRequest,
		KindFamilyMCP, KindFamilyNetwork, "secret.", "config.", "token.", "trust.", "access.", "control.", "stream."}
}
