package fleet

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/wardenhq/warden/storage"
)

// AnchorsFile is where an operator's verifies keep, per fleet and host,
// the newest checkpoint they found to match (in the operator's data dir,
// <data>/fleet/, 0600).
const AnchorsFile = "verified.json"

// Anchors are the checkpoints an operator's verifies found to match. They
// are the operator's own trust, kept on the operator's machine: nothing a
// host or the fleet's server says can move them. Losing the file only
// makes the next verify check from seq 1.
type Anchors struct {
	path string
	// Fleets maps a fleet URL to its hosts' anchors.
	Fleets map[string]map[string]Anchor `json:"fleets"`
}

// LoadAnchors reads path; a missing or unreadable file is an empty set
// (the next verify checks everything), not an error.
func LoadAnchors(path string) *Anchors {
	a := &Anchors{path: path}
	if b, err := os.ReadFile(path); err == nil {
		json.Unmarshal(b, a)
	}
	if a.Fleets == nil {
		a.Fleets = map[string]map[string]Anchor{}
	}
	return a
}

// For is the anchors of the fleet at url, by host.
func (a *Anchors) For(url string) map[string]Anchor { return a.Fleets[url] }

// Set records host's anchor in the fleet at url.
func (a *Anchors) Set(url, host string, an Anchor) {
	if a.Fleets[url] == nil {
		a.Fleets[url] = map[string]Anchor{}
	}
	a.Fleets[url][host] = an
}

// Save writes the file atomically, 0600.
func (a *Anchors) Save() error {
	if err := os.MkdirAll(filepath.Dir(a.path), 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(a, "", "  ")
	if err != nil {
		return err
	}
	if err := storage.WriteFileAtomic(a.path, b, 0o600); err != nil {
		return fmt.Errorf("saving the verified checkpoints to %s: %w", a.path, err)
	}
	return nil
}
