// Package fleet is a warden fleet over NATS JetStream (docs/operating.md,
// "Many hosts: the fleet"): its protocol (subjects, envelopes, signed
// checkpoints), the connection and credentials, the operator's Client and
// the View it folds events into. The host's side, which publishes an
// engine's receipts and answers decisions for it, is a door of its own:
// cmd/serve/fleethost, so that this package needs no engine.
//
// The host stays the authority: its store and receipt chain are the
// truth, and the fleet gets copies. A host publishes, under
// warden.host.<name>.evt.>, every permission request of every kind (the
// storage record as it is, so kinds added later flow through unchanged)
// and its decision, run start and end summaries, and checkpoints of its
// receipt chain signed with its ed25519 fleet key. It answers decisions
// on warden.host.<name>.decide.<role>.<operator> and verification on
// warden.host.<name>.verify.
//
// Identity is carried by NATS subject permissions, never by a payload:
// the fleet's server lets an operator publish only to
// warden.host.*.decide.operator.<its name> and a viewer only to
// warden.host.*.decide.viewer.<its name>, so the subject a decision
// arrives on says who sent it and in which role.
package fleet

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/wardenhq/warden/storage"
)

// Names of the fleet's JetStream stream and KV buckets.
const (
	// StreamName holds every host's events (warden.host.*.evt.>).
	StreamName = "WARDEN"
	// HostsBucket holds each host's latest heartbeat (key: host name),
	// expiring after HeartbeatTTL.
	HostsBucket = "warden_hosts"
	// KeysBucket pins each host's fleet public key at first join (key:
	// host name); a host only ever creates its key, never replaces it.
	KeysBucket = "warden_keys"
)

// Timing.
const (
	// HeartbeatEvery is how often a host writes its heartbeat.
	HeartbeatEvery = 5 * time.Second
	// HeartbeatTTL is how long a heartbeat lives in the bucket.
	HeartbeatTTL = 60 * time.Second
	// DownAfter is how old a heartbeat may be before its host shows down.
	DownAfter = 3 * HeartbeatEvery
	// CheckpointEvery and CheckpointReceipts: a host checkpoints its
	// chain at every 100th receipt (seq 100, 200, ...), and every 10 s
	// when it has new ones.
	CheckpointEvery    = 10 * time.Second
	CheckpointReceipts = 100
	// DecideTimeout bounds an operator's wait for a host's answer.
	DecideTimeout = 5 * time.Second
	// VerifyTimeout bounds the wait for a host's hashes.
	VerifyTimeout = 10 * time.Second
)

// Roles a decision subject names.
const (
	RoleOperator = "operator"
	RoleViewer   = "viewer"
)

// ValidName reports whether s may be a host or operator name: one NATS
// subject token of letters, digits, '-' and '_', at most 64 long.
func ValidName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// CheckName is ValidName as an error that says which name is bad and
// what a good one looks like (what says whose name it is).
func CheckName(what, s string) error {
	if !ValidName(s) {
		return fmt.Errorf("bad %s name %q: use 1-64 letters, digits, '-' or '_'", what, s)
	}
	return nil
}

// Subjects. HostPrefix is every subject about one host; a host
// subscribes under it for the decisions and verifies sent to it.
func HostPrefix(host string) string         { return "warden.host." + host }
func EventSubject(host, kind string) string { return HostPrefix(host) + ".evt." + kind }
func DecideSubject(host, role, op string) string {
	return HostPrefix(host) + ".decide." + role + "." + op
}
func VerifySubject(host string) string { return HostPrefix(host) + ".verify" }

// Event kinds (the last token of an event subject).
const (
	KindRequest    = "req"
	KindRun        = "run"
	KindCheckpoint = "cp"
)

// Envelope is one event a host publishes. Seq is the receipt that caused
// it (for a checkpoint, the receipt it covers): the latest Seq of a
// request or run is its current state.
type Envelope struct {
	Host       string                 `json:"host"`
	Seq        uint64                 `json:"seq"`
	At         time.Time              `json:"at"`
	Request    *storage.RequestRecord `json:"request,omitempty"`
	Run        *RunSummary            `json:"run,omitempty"`
	Checkpoint *SignedCheckpoint      `json:"checkpoint,omitempty"`
}

// RunSummary is what the fleet sees of a run.
type RunSummary struct {
	ID      string     `json:"id"`
	Module  string     `json:"module"`
	Hook    string     `json:"hook"`
	Actor   string     `json:"actor"`
	Status  string     `json:"status"`
	Started time.Time  `json:"started"`
	Ended   *time.Time `json:"ended,omitempty"`
	Error   string     `json:"error,omitempty"`
}

// Checkpoint witnesses a host's chain: its receipt Seq had hash Hash.
// Field order is the canonical (sorted) key order: the signature is over
// its JSON encoding.
type Checkpoint struct {
	At   time.Time `json:"at"`
	Hash string    `json:"hash"`
	Host string    `json:"host"`
	Seq  uint64    `json:"seq"`
}

// SignedCheckpoint is a checkpoint with its ed25519 signature (base64).
type SignedCheckpoint struct {
	Checkpoint
	Sig string `json:"sig"`
}

func (c Checkpoint) signed() []byte {
	b, _ := json.Marshal(c) // cannot fail: plain fields
	return b
}

// Sign signs c with key.
func Sign(c Checkpoint, key ed25519.PrivateKey) SignedCheckpoint {
	return SignedCheckpoint{Checkpoint: c, Sig: base64.StdEncoding.EncodeToString(ed25519.Sign(key, c.signed()))}
}

// Verify checks the signature against pub.
func (s SignedCheckpoint) Verify(pub ed25519.PublicKey) bool {
	sig, err := base64.StdEncoding.DecodeString(s.Sig)
	return err == nil && len(pub) == ed25519.PublicKeySize && ed25519.Verify(pub, s.Checkpoint.signed(), sig)
}

// Heartbeat is a host's entry in the hosts bucket.
type Heartbeat struct {
	Host       string      `json:"host"`
	Version    string      `json:"version"`
	At         time.Time   `json:"at"`
	Running    int         `json:"running"`
	Pending    int         `json:"pending"`
	Head       uint64      `json:"head"`
	Checkpoint *Checkpoint `json:"checkpoint,omitempty"`
	Backlog    uint64      `json:"backlog"`
}

// Decision is an operator's decision, sent on a decision subject. Who
// sent it is the subject's, not the payload's.
type Decision struct {
	Request uint64 `json:"request"`
	Verdict string `json:"verdict"` // storage.ApproveOnce, ApproveAlways or Deny
	Reason  string `json:"reason,omitempty"`
}

// Reply codes of a decision.
const (
	CodeOK             = "ok"
	CodeAlreadyDecided = "already_decided"
	CodeForbidden      = "forbidden"
	CodeNotFound       = "not_found"
	CodeRefused        = "refused"
	CodeBadRequest     = "bad_request"
	CodeInternal       = "internal"
	maxDecisionBytes   = 4 << 10
	// A verify request a host answers is at most MaxVerifyRequestLen
	// bytes asking for at most MaxVerifySeqs hashes.
	MaxVerifySeqs       = 1 << 16
	MaxVerifyRequestLen = 1 << 20
)

// DecisionReply is a host's answer to a decision.
type DecisionReply struct {
	Code    string                 `json:"code"`
	Message string                 `json:"message,omitempty"`
	Request *storage.RequestRecord `json:"request,omitempty"`
}

// VerifyRequest asks a host for its chain's hashes at Seqs. With From,
// the host recomputes from the receipt after From.Seq on, chaining from
// From.Hash, instead of from its first receipt (a host that does not know
// From answers from its first: the same hashes, more slowly).
type VerifyRequest struct {
	Seqs []uint64 `json:"seqs"`
	From *Anchor  `json:"from,omitempty"`
}

// Anchor is a checkpoint a verify already found to match: its signature
// checked against the pinned key and the host's chain recomputed to its
// hash. A later verify starts there, and so checks only what was added
// since; `warden fleet verify --full` starts from the first receipt.
type Anchor struct {
	Seq  uint64    `json:"seq"`
	Hash string    `json:"hash"`
	At   time.Time `json:"at"` // when the checkpoint was made
}

// VerifyReply is a host's chain hashes, recomputed from the receipts'
// content (not read from their stored hash fields), at the asked seqs;
// a seq past the host's head is missing from Hashes.
type VerifyReply struct {
	Host   string            `json:"host"`
	Head   uint64            `json:"head"`
	Hashes map[uint64]string `json:"hashes"`
	Error  string            `json:"error,omitempty"`
}

// DecodeDecision parses a decision payload strictly.
func DecodeDecision(b []byte) (Decision, error) {
	var d Decision
	if len(b) > maxDecisionBytes {
		return d, fmt.Errorf("decision is %d bytes, more than %d", len(b), maxDecisionBytes)
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return d, fmt.Errorf("decision is not JSON of {request, verdict, reason}: %v", err)
	}
	if d.Request == 0 {
		return d, errors.New("decision names no request")
	}
	switch d.Verdict {
	case storage.ApproveOnce, storage.ApproveAlways, storage.Deny:
	default:
		return d, fmt.Errorf("bad verdict %q: want approve-once, approve-always or deny", d.Verdict)
	}
	return d, nil
}
