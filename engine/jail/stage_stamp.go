package jail

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// StageStamp names one landlock stage across pid reuse: its pid, its
// start time (clock ticks after boot, /proc/PID/stat's 22nd field) and
// the boot it ran in. The engine writes it beside the run's dir, out of
// the hook's reach, when the stage starts; an engine that opens the data
// dir after a crash ends a stage it finds alive under the same stamp,
// and never a process that merely got the pid since.
type StageStamp struct {
	PID   int
	Start uint64
	Boot  string
}

// StampOf stamps the live process pid.
func StampOf(pid int) (StageStamp, error) {
	start, err := procStart(pid)
	if err != nil {
		return StageStamp{}, err
	}
	boot, err := bootID()
	if err != nil {
		return StageStamp{}, err
	}
	return StageStamp{PID: pid, Start: start, Boot: boot}, nil
}

// String is the stamp's one-line file form: "PID START BOOT\n".
func (s StageStamp) String() string {
	return fmt.Sprintf("%d %d %s\n", s.PID, s.Start, s.Boot)
}

// ParseStageStamp reads String's form back, strictly: anything else is
// an error, and no process is touched for it.
func ParseStageStamp(b []byte) (StageStamp, error) {
	f := strings.Fields(string(b))
	if len(f) != 3 || !bytes.HasSuffix(b, []byte("\n")) || bytes.Count(b, []byte("\n")) != 1 {
		return StageStamp{}, errors.New("not a stage stamp (want \"PID START BOOT\")")
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil || pid <= 1 {
		return StageStamp{}, fmt.Errorf("stage stamp: bad pid %q", f[0])
	}
	start, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		return StageStamp{}, fmt.Errorf("stage stamp: bad start time %q", f[1])
	}
	return StageStamp{PID: pid, Start: start, Boot: f[2]}, nil
}

// Alive: the very process stamped still runs (same boot, same pid, same
// start time).
func (s StageStamp) Alive() bool {
	boot, err := bootID()
	if err != nil || boot != s.Boot {
		return false
	}
	start, err := procStart(s.PID)
	return err == nil && start == s.Start
}

// End ends the stamped stage if it still runs: EngineGone first, on
// which it kills its whole tree and exits, then SIGKILL past grace. It
// says what it did ("" when the stage was gone already).
func (s StageStamp) End(grace time.Duration) string {
	if !s.Alive() {
		return ""
	}
	_ = syscall.Kill(s.PID, EngineGone)
	for deadline := time.Now().Add(grace); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if !s.Alive() {
			return fmt.Sprintf("its landlock stage (pid %d) was still running: ended, with its tree", s.PID)
		}
	}
	if s.Alive() {
		_ = syscall.Kill(s.PID, syscall.SIGKILL)
	}
	return fmt.Sprintf("its landlock stage (pid %d) was still running and did not end on %v within %s: killed", s.PID, EngineGone, grace)
}

// procStart is /proc/PID/stat's starttime. The fields after the command
// name are read after its last ')': the name is the process's own to
// choose, spaces and parentheses included.
func procStart(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("unreadable /proc stat")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is the state (field 3); starttime is field 22.
	if len(f) < 20 {
		return 0, errors.New("short /proc stat")
	}
	if f[0] == "Z" || f[0] == "X" {
		return 0, errors.New("the process has exited")
	}
	return strconv.ParseUint(f[19], 10, 64)
}

func bootID() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}
