package hooks

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"
	"unsafe"

	"golang.org/x/sys/unix"
)

// maxLine is the longest output line delivered in one piece. It matches
// storage.MaxLineBytes (not imported: the executor must not depend on the
// store); a longer line is cut into pieces of at most this many bytes.
const maxLine = 1 << 20

// maxBatch bounds how many lines one sink call carries, so that a chatty
// hook cannot make one batch (and its memory) grow without limit.
const maxBatch = 4096

// readBufSize is the size of each stream's bufio.Reader. Bigger than a pipe
// write burst so that a burst is usually seen whole and batched.
const readBufSize = 64 << 10

// outputCap is how long Wait keeps reading after the process has exited.
// Its whole process group is killed at that point, so the pipes normally
// close at once; only something that escaped the group (setsid) can hold
// them open, and it must not hold the run open with them.
const outputCap = 3 * time.Second

// groupGoneCap bounds how long Wait waits for killed group members to
// actually be gone (SIGKILL delivery is asynchronous).
const groupGoneCap = 2 * time.Second

// limitWatchEvery is how often a Tree's limits are looked at.
const limitWatchEvery = 100 * time.Millisecond

// DefaultKillGrace is the time between SIGTERM and SIGKILL (docs/architecture.md).
const DefaultKillGrace = 2 * time.Second

// Spawn is what to start.
type Spawn struct {
	Argv []string
	Dir  string
	Env  []string
	// ExtraFiles become fds 3, 4, ... in the child. They stay the caller's:
	// Start does not close them (the caller closes its copies after Start).
	ExtraFiles []*os.File
	// PTY, when set, is the child's stdin, stdout, stderr and
	// controlling terminal (in a session of its own) instead of
	// /dev/null and two pipes; its output is one stream.
	PTY *PTY
}

// Spawner is the seam the jail fills: it turns a Spawn into a command (for
// the jail, a bwrap command line wrapping s.Argv). Start owns the returned
// command's Stdout, Stderr and process-group settings.
type Spawner interface {
	Command(s Spawn) (*exec.Cmd, error)
}

// Releaser is a Spawner that holds files or a cgroup for the start: its
// owner calls Release once the command has started, or once it is clear
// the command never will.
type Releaser interface {
	Release()
}

// Tree is the seam a jail with a process tree of its own fills: a Spawner
// that also implements it starts the command itself (inside the run's
// cgroup), has SIGTERM reach the hook's own processes rather than the jail
// around them (so the hook gets its grace), and is asked which resource
// limit the run ran into.
type Tree interface {
	// Start starts cmd, whose pipes and attributes are set.
	Start(cmd *exec.Cmd) error
	// Terminate sends SIGTERM to the hook's processes, leaving the jail's
	// own standing: the hook stops in its own time, within the grace.
	Terminate()
	// Kill sends SIGKILL to every process of the run.
	Kill()
	// Exceeded names the resource limit the run ran into (LimitMemory,
	// LimitPids, LimitTmp or LimitRunDir) with the text for the operator,
	// or returns "".
	Exceeded() (limit, reason string)
	// Close kills what is left of the run and releases the tree. It is
	// called once, after the exit; an error means something survived.
	Close() error
}

// Holder is a Tree that may hold every process of the run (a cgroup the
// run's processes are born in and cannot leave). When HoldsAll is true,
// its Close returns only once none of them is left, so the executor does
// not look for stragglers of the process group itself: that look is a
// walk of every process on the host (see groupHasLive), after every run.
type Holder interface {
	HoldsAll() bool
}

// DirectSpawner runs the Spawn as is, with no jail (jail mode "off").
type DirectSpawner struct{}

// Command implements Spawner.
func (DirectSpawner) Command(s Spawn) (*exec.Cmd, error) {
	if len(s.Argv) == 0 || s.Argv[0] == "" {
		return nil, errors.New("hooks: empty argv")
	}
	cmd := exec.Command(s.Argv[0], s.Argv[1:]...)
	cmd.Dir = s.Dir
	// A nil Env would mean "inherit everything": never for a hook.
	cmd.Env = s.Env
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	cmd.ExtraFiles = s.ExtraFiles
	return cmd, nil
}

// Limits for one run. Zero Timeout or IdleTimeout means no such limit.
type Limits struct {
	Timeout     time.Duration // whole run; never paused
	IdleTimeout time.Duration // no Touch and no output line for this long
	KillGrace   time.Duration // SIGTERM to SIGKILL; DefaultKillGrace if zero
}

// OutputLine is one line of the child's stdout or stderr, without its line
// end; valid UTF-8, at most maxLine bytes.
type OutputLine struct {
	At     time.Time
	Stderr bool
	Text   string
}

// Limit values of Exit.Limit.
const (
	LimitTimeout     = "timeout"
	LimitIdleTimeout = "idle_timeout"
	LimitCancelled   = "cancelled"
	// Resource limits a Tree enforces.
	LimitMemory = "memory"
	LimitPids   = "pids"
	LimitTmp    = "tmp"
	LimitRunDir = "run_dir"
)

// IsResourceLimit reports whether limit is one of the resource limits.
func IsResourceLimit(limit string) bool {
	switch limit {
	case LimitMemory, LimitPids, LimitTmp, LimitRunDir:
		return true
	}
	return false
}

// Exit is how a hook process ended.
type Exit struct {
	Code       int    // exit status; -1 if killed by a signal
	Signal     string // "SIGKILL" etc. when killed by a signal
	Limit      string // "", LimitTimeout, LimitIdleTimeout or LimitCancelled
	LimitAfter time.Duration
	// Reason is the human text of the limit, or Cancel's argument.
	Reason string
	// Err is a problem of the executor, not of the hook: waiting failed, or
	// output was cut off because something outside the process group kept
	// the pipes open. Output may be incomplete when Err is set.
	Err error
}

// Describe says how the process ended, for an operator.
func (e Exit) Describe() string {
	var s string
	switch {
	case IsResourceLimit(e.Limit):
		s = e.Reason
	case e.Limit == LimitIdleTimeout:
		s = fmt.Sprintf("killed after its idle limit of %s with no activity", e.LimitAfter)
	case e.Limit == LimitTimeout:
		s = fmt.Sprintf("exceeded its overall timeout of %s", e.LimitAfter)
	case e.Limit == LimitCancelled && e.Reason != "":
		s = "cancelled: " + e.Reason
	case e.Limit == LimitCancelled:
		s = "cancelled"
	case e.Signal != "":
		s = "killed by signal " + e.Signal
	default:
		s = "exit code " + strconv.Itoa(e.Code)
	}
	if e.Err != nil {
		s += " (" + e.Err.Error() + ")"
	}
	return s
}

// Process is a started hook process. Its methods are safe for concurrent
// use.
type Process struct {
	cmd   *exec.Cmd
	tree  Tree // nil without a jail
	pid   int  // also the process group id: the child is the group leader
	lim   Limits
	start time.Time

	// lastActive is the time of the last activity, as a duration since
	// start (monotonic). An atomic store, so that marking each output line
	// as activity costs next to nothing; the clock goroutine re-reads it
	// when its timer fires instead of being woken on every line.
	lastActive atomic.Int64
	wake       chan struct{} // the last PauseIdle resumed: re-arm the idle timer

	mu         sync.Mutex
	pauses     int
	limit      string
	limitAfter time.Duration
	reason     string
	exited     bool // the leader has exited (a zombie until reaped)
	// reaped is set just before the leader is reaped. Until then its zombie
	// pins the pid, so kill(-pid) can only reach our group; after, the pid
	// may be reused and no signal may be sent to it any more.
	reaped bool

	exitedCh chan struct{} // closed when the leader has exited
	outDone  sync.WaitGroup
	outR     [2]*os.File // stdout, stderr read ends
	done     chan struct{}
	exit     Exit
}

// Start starts s through sp, watched by lim. sink receives the output in
// batches (see readStream); it must not block for long, as a blocked sink
// stops reading and so eventually stalls the child on a full pipe.
func Start(sp Spawner, s Spawn, lim Limits, sink func([]OutputLine)) (*Process, error) {
	if lim.KillGrace <= 0 {
		lim.KillGrace = DefaultKillGrace
	}
	if sink == nil {
		sink = func([]OutputLine) {}
	}
	cmd, err := sp.Command(s)
	if err != nil {
		return nil, err
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	if s.PTY != nil {
		// A session of its own whose controlling terminal is the pty:
		// its job control, and its SIGWINCH, are the pty's.
		cmd.SysProcAttr.Setsid, cmd.SysProcAttr.Setctty, cmd.SysProcAttr.Ctty = true, true, 0
	}
	// Its own process group, so that a signal reaches everything the hook
	// forked. A spawner asking for a new session already gets a new group
	// (and setpgid would then fail with EPERM).
	if !cmd.SysProcAttr.Setsid {
		cmd.SysProcAttr.Setpgid = true
		cmd.SysProcAttr.Pgid = 0
	}
	// If the engine dies, so does the hook. (Linux ties this to the thread
	// that forked; the Go runtime does not end threads behind our back.)
	if cmd.SysProcAttr.Pdeathsig == 0 {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}

	// Our own pipes rather than StdoutPipe: exec.Cmd.Wait closes those as
	// soon as the process exits, which could drop output still in the pipe.
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	cmd.Stdin = nil // /dev/null
	cmd.Stdout = outW
	cmd.Stderr = errW
	if s.PTY != nil {
		cmd.Stdin, cmd.Stdout, cmd.Stderr = s.PTY.Slave, s.PTY.Slave, s.PTY.Slave
	}
	closeInheritedOnExec()
	tree, _ := sp.(Tree)
	start := cmd.Start
	if tree != nil {
		start = func() error { return tree.Start(cmd) }
	}
	if err := start(); err != nil {
		outR.Close()
		outW.Close()
		errR.Close()
		errW.Close()
		return nil, err
	}
	// The child has its copies; ours would keep the pipes from ever
	// reaching EOF.
	outW.Close()
	errW.Close()
	if s.PTY != nil {
		// The same for the terminal: the master reads EIO once every
		// process of the run has let go of it. The pipes end at once.
		s.PTY.Slave.Close()
		outR.Close()
		outR = s.PTY.Master
	}

	p := &Process{
		cmd:      cmd,
		tree:     tree,
		pid:      cmd.Process.Pid,
		lim:      lim,
		start:    time.Now(),
		wake:     make(chan struct{}, 1),
		exitedCh: make(chan struct{}),
		outR:     [2]*os.File{outR, errR},
		done:     make(chan struct{}),
	}
	p.outDone.Add(2)
	if s.PTY != nil {
		go p.readFrom(outR, tee{s.PTY}, false, sink)
	} else {
		go p.readStream(outR, false, sink)
	}
	go p.readStream(errR, true, sink)
	go p.clock()
	go p.reap()
	return p, nil
}

// Pid is the process id of the hook process (with a jail, of bwrap). It is
// also its process group id.
func (p *Process) Pid() int { return p.pid }

// Touch records activity (a protocol frame): it resets the idle clock.
func (p *Process) Touch() { p.lastActive.Store(int64(time.Since(p.start))) }

// PauseIdle stops the idle clock while a call waits on the operator, who may
// take longer than any idle limit; the overall timeout keeps running.
// Pauses nest (a count); the returned resume is idempotent. When the last
// pause ends, the idle clock restarts from full.
func (p *Process) PauseIdle() (resume func()) {
	p.mu.Lock()
	p.pauses++
	p.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.pauses--
			if p.pauses == 0 {
				p.Touch()
				select {
				case p.wake <- struct{}{}:
				default: // a wake-up is already pending
				}
			}
		})
	}
}

// Cancel ends the process: SIGTERM to its process group, SIGKILL after
// KillGrace. The first cancellation (or limit) wins; later ones, and any
// after the process has exited, do nothing.
func (p *Process) Cancel(reason string) {
	p.cancel(LimitCancelled, time.Since(p.start), reason)
}

func (p *Process) cancel(limit string, after time.Duration, reason string) {
	p.mu.Lock()
	if p.exited || p.limit != "" {
		p.mu.Unlock()
		return
	}
	p.limit, p.limitAfter, p.reason = limit, after, reason
	if p.tree != nil {
		// Not the jail's process group: SIGTERM there would end bwrap,
		// whose pid namespace would take the hook down at once.
		p.tree.Terminate()
	} else {
		p.signalGroupLocked(syscall.SIGTERM)
	}
	p.mu.Unlock()

	go func() {
		t := time.NewTimer(p.lim.KillGrace)
		defer t.Stop()
		select {
		case <-t.C:
			p.mu.Lock()
			// The tree first: a jail whose leader is the run's reaper
			// (landlock) finds the run's processes under it only while
			// the leader lives.
			if p.tree != nil && !p.reaped {
				p.tree.Kill()
			}
			p.signalGroupLocked(syscall.SIGKILL)
			p.mu.Unlock()
		case <-p.exitedCh:
			// reap kills whatever of the group is left.
		}
	}()
}

// signalGroupLocked signals the whole process group, unless the leader has
// been reaped (see Process.reaped). ESRCH (nothing left) is fine.
func (p *Process) signalGroupLocked(sig syscall.Signal) {
	if !p.reaped {
		_ = syscall.Kill(-p.pid, sig)
	}
}

// Wait waits for the process to exit and for all its output to have been
// delivered to the sink, and for nothing of its process group to be left.
// It may be called any number of times.
func (p *Process) Wait() Exit {
	<-p.done
	return p.exit
}

// clock is the single timer goroutine: the overall timeout and the idle
// clock.
func (p *Process) clock() {
	var overall <-chan time.Time
	if p.lim.Timeout > 0 {
		t := time.NewTimer(p.lim.Timeout)
		defer t.Stop()
		overall = t.C
	}
	// A run's resource limits are watched while it runs: the kernel
	// stops the hook (an OOM kill, a refused fork, a full tmpfs), and the
	// run then ends naming the limit rather than going on crippled.
	var watch <-chan time.Time
	if p.tree != nil {
		t := time.NewTicker(limitWatchEvery)
		defer t.Stop()
		watch = t.C
	}
	var idle *time.Timer
	var idleC <-chan time.Time
	if p.lim.IdleTimeout > 0 {
		idle = time.NewTimer(p.lim.IdleTimeout)
		defer idle.Stop()
		idleC = idle.C
	}
	for {
		select {
		case <-p.exitedCh:
			return
		case <-watch:
			if limit, reason := p.tree.Exceeded(); limit != "" {
				p.cancel(limit, time.Since(p.start), reason)
				return
			}
		case <-overall:
			p.cancel(LimitTimeout, p.lim.Timeout,
				fmt.Sprintf("ran longer than its overall timeout of %s", p.lim.Timeout))
			return
		case <-idleC:
			p.mu.Lock()
			paused := p.pauses > 0
			p.mu.Unlock()
			if paused {
				idleC = nil // until the last resume wakes us
				continue
			}
			quiet := time.Since(p.start) - time.Duration(p.lastActive.Load())
			if left := p.lim.IdleTimeout - quiet; left > 0 {
				idle.Reset(left)
				continue
			}
			p.cancel(LimitIdleTimeout, p.lim.IdleTimeout,
				fmt.Sprintf("no activity for %s", p.lim.IdleTimeout))
			return
		case <-p.wake:
			if idle != nil {
				// Go 1.23+ timers: Reset leaves no stale tick behind.
				idle.Reset(p.lim.IdleTimeout)
				idleC = idle.C
			}
		}
	}
}

// reap waits for the leader to exit, kills what is left of its group,
// reaps it and waits for the output.
func (p *Process) reap() {
	// Wait for the exit without reaping: the zombie keeps the pid (and so
	// the group id) ours while we kill the rest of the group.
	werr := waitExitedNoReap(p.pid)
	p.mu.Lock()
	p.exited = true
	close(p.exitedCh)
	// Whatever the hook left behind in its group (a background job, a
	// daemon) goes now: the run is over, and stragglers would hold the
	// output pipes open. SIGKILL at once: the hook itself is gone, there is
	// no one left to shut them down in order.
	p.signalGroupLocked(syscall.SIGKILL)
	p.reaped = true
	if p.tree != nil {
		p.tree.Kill()
		// An OOM kill can end the run between two looks of the clock.
		if limit, reason := p.tree.Exceeded(); limit != "" && p.limit == "" {
			p.limit, p.limitAfter, p.reason = limit, time.Since(p.start), reason
		}
	}
	p.mu.Unlock()

	err := p.cmd.Wait()
	var ex Exit
	if st := p.cmd.ProcessState; st != nil {
		ex.Code = st.ExitCode()
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			ex.Code = -1
			ex.Signal = signalName(ws.Signal())
		}
	} else {
		ex.Code = -1
	}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		ex.Err = err
	} else if werr != nil {
		ex.Err = fmt.Errorf("waiting for exit: %w", werr)
	}

	outputs := make(chan struct{})
	go func() { p.outDone.Wait(); close(outputs) }()
	t := time.NewTimer(outputCap)
	select {
	case <-outputs:
	case <-t.C:
		// Closing the read ends makes the blocked reads return; the
		// readers then deliver what they hold and finish.
		p.outR[0].Close()
		p.outR[1].Close()
		<-outputs
		if ex.Err == nil {
			ex.Err = fmt.Errorf("output cut off: pipes still open %s after exit (a process outside the hook's group holds them)", outputCap)
		}
	}
	t.Stop()

	if h, ok := p.tree.(Holder); !ok || !h.HoldsAll() {
		waitGroupGone(p.pid, groupGoneCap)
	}
	if p.tree != nil {
		if err := p.tree.Close(); err != nil && ex.Err == nil {
			ex.Err = err
		}
	}

	p.mu.Lock()
	ex.Limit, ex.LimitAfter, ex.Reason = p.limit, p.limitAfter, p.reason
	p.mu.Unlock()
	p.exit = ex
	close(p.done)
}

// waitExitedNoReap blocks until pid has exited, leaving it a zombie
// (waitid with WNOWAIT; not in package syscall, hence the raw call).
func waitExitedNoReap(pid int) error {
	const pPID = 1     // idtype P_PID
	var info [128]byte // siginfo_t
	for {
		_, _, e := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid),
			uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		switch e {
		case 0:
			return nil
		case syscall.EINTR:
			continue
		default:
			return e
		}
	}
}

// waitGroupGone waits, at most limit, until no live process is left in
// process group pgid. Zombies count as gone: once killed, a grandchild is
// reparented to init (or a subreaper), which may be slow to reap it, or
// never reap it in a container without a real init.
func waitGroupGone(pgid int, limit time.Duration) {
	deadline := time.Now().Add(limit)
	pause := 500 * time.Microsecond
	for {
		if syscall.Kill(-pgid, 0) == syscall.ESRCH || !groupHasLive(pgid) {
			return
		}
		if time.Now().After(deadline) {
			return
		}
		// A killed straggler is usually gone within a millisecond or two:
		// look again soon, then less often.
		time.Sleep(pause)
		pause = min(2*pause, 5*time.Millisecond)
	}
}

// readStream delivers one stream's lines to sink in batches: lines are
// gathered while more input is already buffered (up to maxBatch), and the
// batch is handed over when the reader would have to wait. So a quiet hook
// gets its lines delivered at once and a burst costs a few calls, never one
// per line. sink is called by at most one goroutine at a time per stream;
// stdout and stderr have a goroutine each, so their batches may interleave
// (and sink must be safe for that). The batch slice is the sink's to keep.
func (p *Process) readStream(f *os.File, stderr bool, sink func([]OutputLine)) {
	p.readFrom(f, f, stderr, sink)
}

// readFrom is readStream over r, which reads f (closed at the end).
func (p *Process) readFrom(f *os.File, r io.Reader, stderr bool, sink func([]OutputLine)) {
	defer p.outDone.Done()
	defer f.Close()
	lr := newLineReader(r)
	var batch []OutputLine
	var now time.Time
	size := 16 // a batch's capacity: the last batch's length, so a flood's batches do not grow by copying
	for {
		reads := lr.src.reads
		text, ok := lr.next()
		if !ok {
			break
		}
		// A line cut whole from input already buffered arrived with the
		// one before it: only a line that needed a read gets a new time.
		if lr.src.reads != reads || now.IsZero() {
			now = time.Now()
			// Every line is activity: an atomic store, no wake-up.
			p.lastActive.Store(int64(now.Sub(p.start)))
		}
		if batch == nil {
			batch = make([]OutputLine, 0, size)
		}
		batch = append(batch, OutputLine{At: now, Stderr: stderr, Text: text})
		if len(batch) >= maxBatch || !lr.more() {
			size = min(max(len(batch), 16), maxBatch)
			sink(batch)
			batch = nil
		}
	}
	if len(batch) > 0 {
		sink(batch)
	}
}

// lineReader splits a stream into lines with bounded memory: a line longer
// than maxLine is cut into pieces of at most maxLine bytes on a UTF-8
// boundary; invalid UTF-8 becomes U+FFFD; "\n" and a trailing "\r" are
// stripped; a last line without "\n" is still returned at EOF.
type lineReader struct {
	r        *bufio.Reader
	src      countingReader
	buf      []byte // the current line, as read so far
	complete bool   // buf holds the whole line (its "\n" seen, or EOF)
	eof      bool
}

// countingReader counts the reads of the stream, so that a caller can
// tell a line that needed new input from one that was already buffered.
type countingReader struct {
	r     io.Reader
	reads uint64
}

func (c *countingReader) Read(p []byte) (int, error) {
	c.reads++
	return c.r.Read(p)
}

func newLineReader(r io.Reader) *lineReader {
	lr := &lineReader{src: countingReader{r: r}}
	lr.r = bufio.NewReaderSize(&lr.src, readBufSize)
	return lr
}

// more reports whether a line can be returned without reading the stream.
func (lr *lineReader) more() bool {
	return lr.r.Buffered() > 0 || (lr.complete && len(lr.buf) > 0) || len(lr.buf) >= maxLine+utf8.UTFMax
}

// next returns the next line or piece of a line; false at the end of the
// stream (EOF or a read error: either way nothing more will come).
func (lr *lineReader) next() (string, bool) {
	for {
		if lr.complete {
			text, n := sanitize(lr.buf, maxLine, true)
			if n == len(lr.buf) {
				lr.buf, lr.complete = lr.buf[:0], false
			} else {
				lr.buf = lr.buf[:copy(lr.buf, lr.buf[n:])]
			}
			return text, true
		}
		// Cut only once more than a piece's worth (plus one whole rune) is
		// in: the piece is then certainly full, and never followed by an
		// empty piece when the "\n" arrives.
		if len(lr.buf) >= maxLine+utf8.UTFMax {
			text, n := sanitize(lr.buf, maxLine, false)
			lr.buf = lr.buf[:copy(lr.buf, lr.buf[n:])]
			return text, true
		}
		if lr.eof {
			if len(lr.buf) > 0 {
				lr.complete = true
				continue
			}
			return "", false
		}
		frag, err := lr.r.ReadSlice('\n')
		if err == nil && len(lr.buf) == 0 {
			// The common case: a whole line in the read buffer. Take
			// it from there, without copying it into buf first.
			line := frag[:len(frag)-1]
			if n := len(line); n > 0 && line[n-1] == '\r' {
				line = line[:n-1]
			}
			if len(line) <= maxLine && utf8.Valid(line) {
				return string(line), true
			}
		}
		lr.buf = append(lr.buf, frag...)
		switch {
		case err == nil:
			lr.buf = lr.buf[:len(lr.buf)-1]
			if n := len(lr.buf); n > 0 && lr.buf[n-1] == '\r' {
				lr.buf = lr.buf[:n-1]
			}
			lr.complete = true // even when empty: an empty line is a line
		case err == bufio.ErrBufferFull:
		default:
			lr.eof = true
		}
	}
}

// sanitize turns the start of b into valid UTF-8 text of at most limit bytes,
// each invalid byte becoming U+FFFD (which is 3 bytes, so the count is of
// output bytes). It returns the text and how many bytes of b it used. With
// final false, b may end inside a rune, which is then left for later.
func sanitize(b []byte, limit int, final bool) (string, int) {
	if len(b) <= limit && utf8.Valid(b) {
		return string(b), len(b)
	}
	var sb strings.Builder
	sb.Grow(min(len(b), limit))
	i := 0
	for i < len(b) {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size <= 1 {
			if !final && !utf8.FullRune(b[i:]) {
				break
			}
			if sb.Len()+utf8.RuneLen(utf8.RuneError) > limit {
				break
			}
			sb.WriteRune(utf8.RuneError)
			i++
			continue
		}
		if sb.Len()+size > limit {
			break
		}
		sb.Write(b[i : i+size])
		i += size
	}
	return sb.String(), i
}

// signalName names a signal the way operators know it ("SIGKILL").
func signalName(s syscall.Signal) string {
	if n, ok := signalNames[s]; ok {
		return n
	}
	return "signal " + strconv.Itoa(int(s))
}

var signalNames = map[syscall.Signal]string{
	syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT",
	syscall.SIGILL: "SIGILL", syscall.SIGTRAP: "SIGTRAP", syscall.SIGABRT: "SIGABRT",
	syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE", syscall.SIGKILL: "SIGKILL",
	syscall.SIGUSR1: "SIGUSR1", syscall.SIGSEGV: "SIGSEGV", syscall.SIGUSR2: "SIGUSR2",
	syscall.SIGPIPE: "SIGPIPE", syscall.SIGALRM: "SIGALRM", syscall.SIGTERM: "SIGTERM",
	syscall.SIGSTKFLT: "SIGSTKFLT", syscall.SIGCHLD: "SIGCHLD", syscall.SIGCONT: "SIGCONT",
	syscall.SIGSTOP: "SIGSTOP", syscall.SIGTSTP: "SIGTSTP", syscall.SIGTTIN: "SIGTTIN",
	syscall.SIGTTOU: "SIGTTOU", syscall.SIGURG: "SIGURG", syscall.SIGXCPU: "SIGXCPU",
	syscall.SIGXFSZ: "SIGXFSZ", syscall.SIGVTALRM: "SIGVTALRM", syscall.SIGPROF: "SIGPROF",
	syscall.SIGWINCH: "SIGWINCH", syscall.SIGIO: "SIGIO", syscall.SIGPWR: "SIGPWR",
	syscall.SIGSYS: "SIGSYS",
}

// closeInheritedOnExec marks every descriptor above stderr close-on-exec.
// Go opens its own files so; any left without it were inherited by warden
// from whatever started it (a shell's, a supervisor's), and bwrap passes
// every open descriptor on to the hook: without this they reach into the
// jail (a pipe or file of the operator's session, open for writing).
// The files given to bwrap are unaffected: exec.Cmd dup2()s ExtraFiles
// into the child without the flag.
func closeInheritedOnExec() {
	if unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC) == nil {
		return
	}
	// Before Linux 5.11: one by one.
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
}
