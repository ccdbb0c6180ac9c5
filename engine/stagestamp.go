package engine

import (
	"os"
	"path/filepath"
	"time"

	"github.com/wardenhq/warden/engine/jail"
	"github.com/wardenhq/warden/storage"
)

// A landlock run has no pid namespace and, in a container, no cgroup:
// if its stage outlived its engine (a parent-death signal that never
// came), nothing of the kernel's would find it again. So the engine
// stamps each stage (jail.StageStamp) in runs/<id>.stage, beside the
// run's dir: the hook may write its own dir, never the one above it.
// The next engine ends a stage it finds alive under its stamp.

// stageGrace is how long a stage found alive at open has to kill its
// tree before it is killed itself.
const stageGrace = 2 * time.Second

func (e *Engine) stampPath(run string) string {
	return filepath.Join(e.DataDir(), "runs", run+".stage")
}

// stampStage records the stage of run. Failing to is not the run's
// failure: the stage's parent-death signal still holds; the stream says
// what is missing.
func (e *Engine) stampStage(r *activeRun, pid int) {
	s, err := jail.StampOf(pid)
	if err == nil {
		err = storage.WriteFileAtomic(e.stampPath(r.rec.ID), []byte(s.String()), 0o600)
	}
	if err != nil {
		r.streamLine(storage.LevelWarn, "warden: the landlock stage's stamp was not written ("+err.Error()+"): should this engine die before the stage, the next one could not end it")
	}
}

// endStage ends the stage a dead run's stamp names, if it still runs,
// and removes the stamp. It says what it did ("" for nothing).
func (e *Engine) endStage(run string) string {
	p := e.stampPath(run)
	b, err := os.ReadFile(p)
	if err != nil {
		return ""
	}
	defer os.Remove(p)
	s, err := jail.ParseStageStamp(b)
	if err != nil {
		return "its stage stamp was unreadable (" + err.Error() + "): removed, no process touched"
	}
	return s.End(stageGrace)
}
