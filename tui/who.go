package tui

import (
	"strings"

	"github.com/wardenhq/warden/engine"
)

// actorLabel is how the console names an actor: a local user as is
// ("local:root"); an SSH key by its comment (when the operators file
// names it) next to a fingerprint shortened from the middle, so that
// both ends, which tell keys apart, stay visible.
func (s *shared) actorLabel(actor string) string {
	fp, ok := strings.CutPrefix(actor, "ssh:")
	if !ok {
		return safe(actor)
	}
	short := "ssh:" + shortFingerprint(fp)
	if s.opts.ActorName != nil {
		if name := s.opts.ActorName(engine.Actor(actor)); name != "" {
			return safe(name) + " (" + safe(short) + ")"
		}
	}
	return safe(short)
}

// shortFingerprint keeps "SHA256:" with the first 6 and last 4 characters
// of the hash.
func shortFingerprint(fp string) string {
	algo, hash, ok := strings.Cut(fp, ":")
	if !ok || len(hash) <= 12 {
		return fp
	}
	return algo + ":" + hash[:6] + "…" + hash[len(hash)-4:]
}

// who is the header's "who you are": the key's name (else the actor's
// label), and its role when it is not the local operator's.
func (s *shared) who() string {
	w := s.actorLabel(string(s.opts.Actor))
	if s.opts.ActorName != nil {
		if name := s.opts.ActorName(s.opts.Actor); name != "" {
			w = safe(name)
		}
	}
	if s.opts.Role != "" {
		w += " · " + safe(s.opts.Role)
	}
	return w
}

// actorShort is an actor for a narrow column: the key's name when the
// operators file gives one, else the label (a short fingerprint).
func (s *shared) actorShort(actor string) string {
	if s.opts.ActorName != nil && strings.HasPrefix(actor, "ssh:") {
		if name := s.opts.ActorName(engine.Actor(actor)); name != "" {
			return safe(name)
		}
	}
	return s.actorLabel(actor)
}
