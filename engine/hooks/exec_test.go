package hooks

import (
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// execSink collects what a Process delivers.
type execSink struct {
	mu       sync.Mutex
	calls    int
	maxBatch int
	lines    []OutputLine
}

func (c *execSink) sink(b []OutputLine) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	c.maxBatch = max(c.maxBatch, len(b))
	c.lines = append(c.lines, b...)
}

// texts returns the lines of one stream, in order.
func (c *execSink) texts(stderr bool) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, l := range c.lines {
		if l.Stderr == stderr {
			out = append(out, l.Text)
		}
	}
	return out
}

// waitLine waits for the first stdout line and returns it.
func (c *execSink) waitLine(t *testing.T) string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if out := c.texts(false); len(out) > 0 {
			return out[0]
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no stdout line within 5s")
	return ""
}

// execSh starts /bin/sh -c script with the hook environment.
func execSh(t *testing.T, script string, lim Limits, c *execSink) *Process {
	t.Helper()
	s := Spawn{
		Argv: []string{"/bin/sh", "-c", script},
		Dir:  t.TempDir(),
		Env:  BuildEnv(os.Environ(), nil, ""),
	}
	p, err := Start(DirectSpawner{}, s, lim, c.sink)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	return p
}

// execGone reports whether pid, once a member of group pgid, no longer
// lives (gone, a zombie waiting for init, or the pid reused elsewhere).
func execGone(pid, pgid int) bool {
	if syscall.Kill(pid, 0) == syscall.ESRCH {
		return true
	}
	state, pgrp, ok := procStat(strconv.Itoa(pid))
	return !ok || state == 'Z' || state == 'X' || pgrp != pgid
}

func TestExecStreams(t *testing.T) {
	t.Parallel()
	c := &execSink{}
	p := execSh(t, `echo out1; echo err1 >&2; echo out2; printf 'err2\r\n' >&2; echo; printf '\377bad\n'; printf last`, Limits{}, c)
	ex := p.Wait()
	if ex.Code != 0 || ex.Signal != "" || ex.Limit != "" || ex.Err != nil {
		t.Fatalf("exit = %+v", ex)
	}
	if got := ex.Describe(); got != "exit code 0" {
		t.Errorf("Describe = %q", got)
	}
	wantOut := []string{"out1", "out2", "", "\uFFFDbad", "last"}
	wantErr := []string{"err1", "err2"}
	if got := c.texts(false); strings.Join(got, "|") != strings.Join(wantOut, "|") {
		t.Errorf("stdout = %q, want %q", got, wantOut)
	}
	if got := c.texts(true); strings.Join(got, "|") != strings.Join(wantErr, "|") {
		t.Errorf("stderr = %q, want %q", got, wantErr)
	}
	for _, l := range c.lines {
		if l.At.IsZero() {
			t.Errorf("line %q has no time", l.Text)
		}
	}
}

func TestExecBurstIsBatched(t *testing.T) {
	const n = 200000
	c := &execSink{}
	p := execSh(t, "seq 1 "+strconv.Itoa(n), Limits{Timeout: time.Minute}, c)
	if ex := p.Wait(); ex.Code != 0 || ex.Err != nil {
		t.Fatalf("exit = %+v", ex)
	}
	out := c.texts(false)
	if len(out) != n {
		t.Fatalf("got %d lines, want %d", len(out), n)
	}
	for i, s := range out {
		if s != strconv.Itoa(i+1) {
			t.Fatalf("line %d = %q", i, s)
		}
	}
	t.Logf("%d lines in %d sink calls, largest batch %d", n, c.calls, c.maxBatch)
	if c.calls >= 2000 {
		t.Errorf("sink called %d times for %d lines: not batched", c.calls, n)
	}
	if c.maxBatch > maxBatch {
		t.Errorf("batch of %d lines, max is %d", c.maxBatch, maxBatch)
	}
}

func TestExecLongLineIsCut(t *testing.T) {
	t.Parallel()
	c := &execSink{}
	p := execSh(t, `head -c 3145728 /dev/zero | tr '\000' a; echo; echo next`, Limits{}, c)
	if ex := p.Wait(); ex.Code != 0 || ex.Err != nil {
		t.Fatalf("exit = %+v", ex)
	}
	out := c.texts(false)
	if len(out) != 4 {
		t.Fatalf("got %d lines, want 3 pieces and a line", len(out))
	}
	for i, s := range out[:3] {
		if len(s) != maxLine || strings.Trim(s, "a") != "" {
			t.Errorf("piece %d: %d bytes", i, len(s))
		}
	}
	if out[3] != "next" {
		t.Errorf("last line = %q", out[3])
	}
}

// readAllLines runs a lineReader over s.
func readAllLines(r io.Reader) []string {
	lr := newLineReader(r)
	var out []string
	for {
		s, ok := lr.next()
		if !ok {
			return out
		}
		out = append(out, s)
	}
}

func TestLineReader(t *testing.T) {
	t.Parallel()
	t.Run("ends", func(t *testing.T) {
		got := readAllLines(strings.NewReader("x\r\n\r\n\ny\rz\nlast"))
		want := []string{"x", "", "", "y\rz", "last"}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("got %q, want %q", got, want)
		}
		if got := readAllLines(strings.NewReader("")); len(got) != 0 {
			t.Errorf("empty stream gave %q", got)
		}
	})
	t.Run("exactly maxLine", func(t *testing.T) {
		line := strings.Repeat("b", maxLine)
		got := readAllLines(strings.NewReader(line + "\n" + line))
		if len(got) != 2 || got[0] != line || got[1] != line {
			t.Errorf("got %d lines", len(got))
		}
	})
	t.Run("utf8 boundary", func(t *testing.T) {
		// 'a' then 2-byte runes: byte maxLine falls inside a rune.
		line := "a" + strings.Repeat("é", maxLine/2+10)
		got := readAllLines(strings.NewReader(line + "\nz\n"))
		if len(got) != 3 || got[2] != "z" {
			t.Fatalf("got %d lines", len(got))
		}
		if len(got[0]) != maxLine-1 {
			t.Errorf("first piece %d bytes, want %d", len(got[0]), maxLine-1)
		}
		for i, s := range got[:2] {
			if !utf8.ValidString(s) {
				t.Errorf("piece %d invalid UTF-8", i)
			}
		}
		if got[0]+got[1] != line {
			t.Error("pieces do not join back into the line")
		}
	})
	t.Run("invalid bytes stay within maxLine", func(t *testing.T) {
		got := readAllLines(strings.NewReader(strings.Repeat("\xff", maxLine) + "\n"))
		n := 0
		for i, s := range got {
			if len(s) > maxLine || !utf8.ValidString(s) {
				t.Errorf("piece %d: %d bytes, valid %v", i, len(s), utf8.ValidString(s))
			}
			n += strings.Count(s, "\uFFFD")
		}
		if n != maxLine {
			t.Errorf("%d replacement runes, want %d", n, maxLine)
		}
	})
}

func TestExecExitCode(t *testing.T) {
	t.Parallel()
	ex := execSh(t, "exit 3", Limits{}, &execSink{}).Wait()
	if ex.Code != 3 || ex.Signal != "" || ex.Limit != "" {
		t.Fatalf("exit = %+v", ex)
	}
	if got := ex.Describe(); got != "exit code 3" {
		t.Errorf("Describe = %q", got)
	}
}

func TestExecKilledBySignal(t *testing.T) {
	t.Parallel()
	ex := execSh(t, "kill -KILL $$", Limits{}, &execSink{}).Wait()
	if ex.Code != -1 || ex.Signal != "SIGKILL" || ex.Limit != "" {
		t.Fatalf("exit = %+v", ex)
	}
	if got := ex.Describe(); got != "killed by signal SIGKILL" {
		t.Errorf("Describe = %q", got)
	}
}

func TestExecIdleTimeout(t *testing.T) {
	t.Parallel()
	start := time.Now()
	ex := execSh(t, "sleep 30", Limits{IdleTimeout: 500 * time.Millisecond}, &execSink{}).Wait()
	if ex.Limit != LimitIdleTimeout || ex.LimitAfter != 500*time.Millisecond {
		t.Fatalf("exit = %+v", ex)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("killed after %s", d)
	}
	if got, want := ex.Describe(), "killed after its idle limit of 500ms with no activity"; got != want {
		t.Errorf("Describe = %q, want %q", got, want)
	}
}

func TestExecOutputIsActivity(t *testing.T) {
	t.Parallel()
	script := `i=0; while [ $i -lt 10 ]; do echo $i; sleep 0.2; i=$((i+1)); done`
	ex := execSh(t, script, Limits{IdleTimeout: 600 * time.Millisecond}, &execSink{}).Wait()
	if ex.Code != 0 || ex.Limit != "" {
		t.Fatalf("exit = %+v (%s)", ex, ex.Describe())
	}
}

func TestExecPauseIdle(t *testing.T) {
	t.Parallel()
	start := time.Now()
	p := execSh(t, "sleep 30", Limits{IdleTimeout: 400 * time.Millisecond}, &execSink{})
	resume1 := p.PauseIdle()
	resume2 := p.PauseIdle() // nested: an operator call inside another

	waited := make(chan Exit, 1)
	go func() { waited <- p.Wait() }()
	select {
	case ex := <-waited:
		t.Fatalf("ended while paused: %+v", ex)
	case <-time.After(750 * time.Millisecond):
	}
	resume1()
	resume1() // idempotent: must not end the other pause
	select {
	case ex := <-waited:
		t.Fatalf("ended while still paused once: %+v", ex)
	case <-time.After(750 * time.Millisecond):
	}
	resumed := time.Now()
	resume2()
	var ex Exit
	select {
	case ex = <-waited:
	case <-time.After(5 * time.Second):
		t.Fatal("idle clock did not apply again after resume")
	}
	if ex.Limit != LimitIdleTimeout {
		t.Fatalf("exit = %+v", ex)
	}
	// The clock restarted from full at resume: a timer never fires early.
	if d := time.Since(resumed); d < 400*time.Millisecond {
		t.Errorf("killed %s after resume, before its idle limit", d)
	}
	if d := time.Since(start); d < 1500*time.Millisecond {
		t.Errorf("killed after %s", d)
	}
}

func TestExecTimeout(t *testing.T) {
	t.Parallel()
	p := execSh(t, "sleep 30", Limits{Timeout: time.Second}, &execSink{})
	// Activity does not hold the overall clock off.
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
				p.Touch()
			}
		}
	}()
	ex := p.Wait()
	close(stop)
	if ex.Limit != LimitTimeout || ex.LimitAfter != time.Second {
		t.Fatalf("exit = %+v", ex)
	}
	if got, want := ex.Describe(), "exceeded its overall timeout of 1s"; got != want {
		t.Errorf("Describe = %q, want %q", got, want)
	}
}

func TestExecCancelKillsGroup(t *testing.T) {
	t.Parallel()
	c := &execSink{}
	p := execSh(t, `sleep 300 & echo $!; sleep 300`, Limits{}, c)
	pid, err := strconv.Atoi(c.waitLine(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, pgrp, ok := procStat(strconv.Itoa(pid)); !ok || pgrp != p.Pid() {
		t.Fatalf("grandchild %d: group %d, want %d", pid, pgrp, p.Pid())
	}
	p.Cancel("operator pressed stop")
	p.Cancel("second cancel is ignored")
	ex := p.Wait()
	if ex.Limit != LimitCancelled || ex.Reason != "operator pressed stop" {
		t.Fatalf("exit = %+v", ex)
	}
	if got, want := ex.Describe(), "cancelled: operator pressed stop"; got != want {
		t.Errorf("Describe = %q, want %q", got, want)
	}
	if !execGone(pid, p.Pid()) {
		t.Errorf("grandchild %d still alive after Wait", pid)
	}
}

func TestExecStragglerKilledAtExit(t *testing.T) {
	t.Parallel()
	c := &execSink{}
	start := time.Now()
	// The background sleep keeps stdout open: only killing the group at
	// the leader's exit lets Wait see EOF before its cap.
	p := execSh(t, `sleep 300 & echo $!; exit 0`, Limits{}, c)
	ex := p.Wait()
	if ex.Code != 0 || ex.Limit != "" || ex.Err != nil {
		t.Fatalf("exit = %+v", ex)
	}
	if d := time.Since(start); d >= outputCap {
		t.Errorf("Wait took %s: straggler held the pipes", d)
	}
	pid, err := strconv.Atoi(c.waitLine(t))
	if err != nil {
		t.Fatal(err)
	}
	if !execGone(pid, p.Pid()) {
		t.Errorf("straggler %d still alive after Wait", pid)
	}
}

func TestExecTermIgnoredGetsKill(t *testing.T) {
	t.Parallel()
	c := &execSink{}
	// An ignored signal stays ignored across exec: sleep ignores TERM too.
	p := execSh(t, `trap '' TERM; echo ready; sleep 30`, Limits{KillGrace: 300 * time.Millisecond}, c)
	c.waitLine(t)
	cancelled := time.Now()
	p.Cancel("stop")
	ex := p.Wait()
	if ex.Signal != "SIGKILL" || ex.Code != -1 || ex.Limit != LimitCancelled {
		t.Fatalf("exit = %+v", ex)
	}
	if d := time.Since(cancelled); d < 300*time.Millisecond || d > 5*time.Second {
		t.Errorf("killed %s after Cancel, want after the 300ms grace", d)
	}
}

func TestExecOutputCapWhenPipesEscape(t *testing.T) {
	t.Parallel()
	c := &execSink{}
	start := time.Now()
	// setsid leaves the process group, so the group kill cannot reach it,
	// and it holds stdout open.
	p := execSh(t, `setsid sh -c 'echo $$; exec sleep 300' & sleep 0.2; exit 0`, Limits{}, c)
	ex := p.Wait()
	pid, err := strconv.Atoi(c.waitLine(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if ex.Code != 0 || ex.Err == nil || !strings.Contains(ex.Err.Error(), "output cut off") {
		t.Fatalf("exit = %+v", ex)
	}
	if d := time.Since(start); d < outputCap || d > outputCap+5*time.Second {
		t.Errorf("Wait took %s, want about %s", d, outputCap)
	}
}

func TestExecStartErrors(t *testing.T) {
	t.Parallel()
	if _, err := Start(DirectSpawner{}, Spawn{}, Limits{}, nil); err == nil {
		t.Error("empty argv started")
	}
	if _, err := Start(DirectSpawner{}, Spawn{Argv: []string{"/nonexistent/hook"}}, Limits{}, nil); err == nil {
		t.Error("missing program started")
	}
}

func TestExitDescribe(t *testing.T) {
	t.Parallel()
	cases := []struct {
		ex   Exit
		want string
	}{
		{Exit{Code: -1, Signal: "SIGKILL", Limit: LimitIdleTimeout, LimitAfter: 30 * time.Second}, "killed after its idle limit of 30s with no activity"},
		{Exit{Code: -1, Signal: "SIGTERM", Limit: LimitTimeout, LimitAfter: 2 * time.Minute}, "exceeded its overall timeout of 2m0s"},
		{Exit{Code: 0, Limit: LimitCancelled}, "cancelled"},
		{Exit{Code: 3}, "exit code 3"},
		{Exit{Code: -1, Signal: "SIGSEGV"}, "killed by signal SIGSEGV"},
		{Exit{Code: 0, Err: io.ErrUnexpectedEOF}, "exit code 0 (unexpected EOF)"},
	}
	for _, c := range cases {
		if got := c.ex.Describe(); got != c.want {
			t.Errorf("%+v: Describe = %q, want %q", c.ex, got, c.want)
		}
	}
}

// A descriptor warden inherited without close-on-exec (from a shell, a
// supervisor) must not reach a hook, jailed or not: Start marks it.
func TestStartMarksInheritedFdsCloseOnExec(t *testing.T) {
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd := int(f.Fd())
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, 0); err != nil {
		t.Fatal(err)
	}
	p, err := Start(DirectSpawner{}, Spawn{Argv: []string{"/bin/sh", "-c", "ls /proc/self/fd"}}, Limits{Timeout: 10 * time.Second, IdleTimeout: 10 * time.Second}, func([]OutputLine) {})
	if err != nil {
		t.Fatal(err)
	}
	p.Wait()
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	if err != nil {
		t.Fatal(err)
	}
	if flags&unix.FD_CLOEXEC == 0 {
		t.Errorf("inherited fd %d is still inheritable after Start", fd)
	}
}

// procStat reads the state and process group of /proc/<pid>/stat.
func procStat(pid string) (state byte, pgrp int, ok bool) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, 0, false
	}
	return parseStat(b)
}
