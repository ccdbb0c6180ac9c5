package tui

import (
	"fmt"
	"strings"

	"github.com/wardenhq/warden/engine"
)

// HandsStatusText is a hands root's live status and drift as text, one
// fact a line, every recorded or engine-reported string escaped: what
// `warden hands status` prints and what s shows in the console's Hands
// tab (one printer, so both read the same).
func HandsStatusText(s engine.HandsStatusReport) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("root       %s\nphase      %s\n", safe(s.Root), safe(string(s.Phase)))
	if s.InProgress {
		p("           (init or finish is running now)\n")
	}
	p("engine     %s %s (%s)\n", safe(s.EngineKind), safe(s.Engine), safe(s.EngineSocket))
	if s.Storage != "" {
		p("storage    %s\n", safe(s.Storage))
	}
	if s.Inodes != "" {
		p("inodes     %s\n", safe(s.Inodes))
	}
	c := s.Container
	switch {
	case s.ContainerID == "":
		p("container  none recorded\n")
	default:
		gen := "generation matches"
		if !c.GenerationMatches {
			gen = "generation differs (recorded " + orNone(s.Generation) + ")"
		}
		label := "owner label ok"
		if !c.LabelOK {
			label = "owner label MISSING"
		}
		p("container  %s %s, started %s; %s; %s\n", safe(engine.HandsShortID(s.ContainerID)), safe(c.State), safe(orNone(c.StartedAt)), safe(gen), label)
	}
	for _, id := range s.Unrecorded {
		p("unrecorded %s carries this root's label\n", safe(engine.HandsShortID(id)))
	}
	if s.Failure != nil {
		p("failure    stopped=%v reconciliationRequired=%v\n", s.Failure.Stopped, s.Failure.ReconciliationRequired)
	}
	if len(s.Drift) == 0 {
		p("drift      none\n")
		return b.String()
	}
	p("drift:\n")
	for _, d := range s.Drift {
		p("  - %s\n    fix: %s\n", safe(d.Problem), safe(d.Fix))
	}
	return b.String()
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// imageLabel is a root's image for a row: the name it was set up with and
// the short digest that pins it ("busybox:latest @1a2b3c4d5e6f"), or the
// digest alone in records older than names.
func imageLabel(r engine.HandsRecord) string {
	digest := strings.TrimPrefix(r.Image, "sha256:")
	if len(digest) > 12 {
		digest = digest[:12]
	}
	switch {
	case r.ImageName != "" && digest != "":
		return safe(r.ImageName) + " @" + digest
	case r.ImageName != "":
		return safe(r.ImageName)
	case digest != "":
		return "@" + digest
	}
	return "no image yet"
}
