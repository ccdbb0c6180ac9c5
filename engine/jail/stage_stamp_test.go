package jail

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestStageStampNamesOneProcess: a stamp holds only its own process: the
// same pid with another start time, or another boot, is not it; a stamp
// read back is the one written; a torn or foreign file is refused.
func TestStageStampNamesOneProcess(t *testing.T) {
	p := exec.Command("sleep", "60")
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Wait() }()
	t.Cleanup(func() { p.Process.Kill() })
	s, err := StampOf(p.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseStageStamp([]byte(s.String()))
	if err != nil || back != s {
		t.Fatalf("stamp %+v read back as %+v, %v", s, back, err)
	}
	if !s.Alive() {
		t.Fatalf("stamp %+v of a running sleep is not alive", s)
	}
	for _, other := range []StageStamp{{s.PID, s.Start + 1, s.Boot}, {s.PID, s.Start, "another-boot"}} {
		if other.Alive() {
			t.Errorf("stamp %+v is taken for the running %+v", other, s)
		}
		if what := other.End(time.Second); what != "" {
			t.Errorf("End of %+v: %q, and it must not touch pid %d", other, what, s.PID)
		}
	}
	select {
	case err := <-done:
		t.Fatalf("the sleep ended (%v): a stale stamp hit it", err)
	default:
	}
	// sleep does not catch EngineGone: it dies of it, within the grace.
	if what := s.End(5 * time.Second); !strings.Contains(what, "ended") {
		t.Errorf("End: %q", what)
	}
	<-done
	if s.Alive() {
		t.Errorf("stamp %+v still alive after End", s)
	}
	for _, bad := range []string{"", "12 34\n", "12 34 b\nx", "1 34 b\n", "x 34 b\n", "12 -3 b\n", "12 34 b c\n", "12 34 b"} {
		if _, err := ParseStageStamp([]byte(bad)); err == nil {
			t.Errorf("ParseStageStamp(%q) took it", bad)
		}
	}
}
