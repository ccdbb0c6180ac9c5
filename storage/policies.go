package storage

import (
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"
)

// Workspace access of a policy.
type Workspace struct {
	Read  bool `json:"read"`
	Write bool `json:"write"`
}

// Rule is an exact operation allowed by approve-always.
type Rule struct {
	Operation string `json:"operation"`
	Digest    string `json:"digest"`
	Summary   string `json:"summary,omitempty"`
}

// PolicyRecord is the policy of one subject ("module:<id>",
// "hands:<root>" or "mcp:<client>"), docs/operating.md. Every change is a
// compare-and-swap on
// Revision.
type PolicyRecord struct {
	Subject   string    `json:"subject"`
	Revision  uint64    `json:"revision"`
	Workspace Workspace `json:"workspace"`
	Execute   bool      `json:"execute"`
	Network   bool      `json:"network"`
	Rules     []Rule    `json:"rules"`
	Updated   time.Time `json:"updated"`
	By        string    `json:"by"`

	// NetworkAllow lists the destinations (api.github.com:443,
	// *.pythonhosted.org:443, pypi.org, ip:203.0.113.7:443) a hook whose
	// network is a list may reach through its egress proxy; the engine
	// checks the grammar, storage only keeps it.
	NetworkAllow []string `json:"networkAllow,omitempty"`
}

// Subjects: a module, a hands root, or an MCP client (its clientInfo.name
// folded to [a-z0-9._-], see engine.MCPSubject).
var subjectPattern = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(module:[a-z0-9][a-z0-9-]{0,62}|hands:/[^\x00-\x1f\x7f,]*|mcp:[a-z0-9][a-z0-9._-]{0,62}|profile:[a-z][a-z0-9_-]{0,62})$`)
})

// ValidSubject reports whether s names a policy subject.
func ValidSubject(s string) bool { return len(s) <= 4096 && subjectPattern().MatchString(s) }

func (r *PolicyRecord) validate() error {
	if !ValidSubject(r.Subject) {
		return fmt.Errorf("bad subject %q", r.Subject)
	}
	if r.Updated.IsZero() || r.By == "" {
		return errors.New("missing updated or by")
	}
	for i, rule := range r.Rules {
		if rule.Operation == "" || !hexHash.MatchString(rule.Digest) {
			return fmt.Errorf("rule %d malformed", i)
		}
	}
	return nil
}

// ConflictError is a lost compare-and-swap.
type ConflictError struct {
	Subject          string
	Expected, Actual uint64
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("policy %s changed: you expected revision %d but it is at revision %d; review it (`warden perms policy show %s`) and try again", e.Subject, e.Expected, e.Actual, e.Subject)
}

// Policy reads a subject's policy; ok is false when none was ever set.
func (tx *Tx) Policy(subject string) (p PolicyRecord, ok bool, err error) {
	err = getRecord(tx, bucketPolicies, []byte(subject), subject, &p)
	if errors.Is(err, ErrNotFound) {
		return p, false, nil
	}
	return p, err == nil, err
}

// SwapPolicy stores p if the stored revision is still expected (0 and no
// policy count as the same); p gets revision expected+1.
func (tx *Tx) SwapPolicy(p PolicyRecord, expected uint64) (PolicyRecord, error) {
	cur, ok, err := tx.Policy(p.Subject)
	if err != nil {
		return p, err
	}
	actual := uint64(0)
	if ok {
		actual = cur.Revision
	}
	if actual != expected {
		return p, &ConflictError{Subject: p.Subject, Expected: expected, Actual: actual}
	}
	if ok {
		p.Revision = expected + 1
	} else {
		p.Revision = 0 // the first policy is revision 0 (docs/operating.md: the initial policy)
	}
	if p.Rules == nil {
		p.Rules = []Rule{}
	}
	return p, putRecord(tx, bucketPolicies, []byte(p.Subject), &p)
}
