package jail

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The landlock backend has no pid namespace, and where cgroups cannot
// be had (an unprivileged container) no cgroup either: nothing of the
// kernel's holds a run's processes together. A hook that double-forks
// and calls setsid leaves its process group, which is all the executor
// kills, and would outlive its run.
//
// So the stage the executor starts is the run's reaper. It marks itself
// a child subreaper (PR_SET_CHILD_SUBREAPER), so every process the hook
// orphans is reparented to it rather than to init: the whole run stays
// one tree under the stage, whatever sessions and groups it makes. It
// then starts the hook (hookArg0: restrict, exec) in a process group of
// its own, and when the hook exits it kills everything left under it
// and exits with the hook's status. Spawner.Kill walks the same tree
// (descendants of the stage) before the executor's SIGKILL reaches the
// stage, for a run that is cut short.
//
// The engine dying ends the run the same way: the stage's parent-death
// signal is EngineGone, not SIGKILL, and on it the stage kills the
// hook's group, reaps, and kills whatever is left under it before it
// exits. (A SIGKILL would end the stage alone: the orphans reparented to
// it would go on to init and live.)
//
// The stage is not in the hook's Landlock domain: with Landlock's
// signal scoping (ABI 6) the hook cannot signal it. What it does not
// cover: the stage itself SIGKILLed (the hook dies by its own
// parent-death signal, but orphans already reparented to the stage go
// to init: only a cgroup holds those), and, below ABI 6, a hook of
// warden's own uid that kills the stage first.

// EngineGone is the stage's parent-death signal: the engine that
// started it is gone, and the run with it. The next engine to open the
// data dir sends it too, to a stage it finds alive (StageStamp).
const EngineGone = syscall.SIGUSR1

// reaperStage is the stage: argv as landlockStage's. It never returns.
func reaperStage(argv []string) {
	// The hook's parent-death signal is tied to the thread that forks it.
	runtime.LockOSThread()
	fail := func(err error) {
		fmt.Fprintf(os.Stderr, "warden: landlock jail: %v\n", err)
		os.Exit(126)
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fail(fmt.Errorf("PR_SET_CHILD_SUBREAPER: %w", err))
	}
	// SIGTERM (the executor's, to this process group) is passed on to the
	// hook's group: the hook stops in its own time, within its grace,
	// while the stage stays to reap. Caught, not ignored: an ignored
	// signal would stay ignored in the hook across exec.
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	// Before this Notify, EngineGone's default action ends the stage,
	// and no hook has started yet.
	gone := make(chan os.Signal, 1)
	signal.Notify(gone, EngineGone)

	args, err := parseStageArgs(argv)
	if err != nil {
		fail(err)
	}
	// The hook sends its seccomp listener back on this pair (fdNotify):
	// the stage is the supervisor of its metadata calls.
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		fail(fmt.Errorf("socketpair: %w", err))
	}
	ours, theirs := os.NewFile(uintptr(pair[0]), "notify"), os.NewFile(uintptr(pair[1]), "notify")

	// The ruleset and the dialer go on to the hook at the same fds.
	ruleset, dialer := os.NewFile(fdRuleset, "ruleset"), os.NewFile(FdDialer, "dialer")
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = append([]string{hookArg0}, argv...)
	cmd.Env = os.Environ()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.ExtraFiles = []*os.File{ruleset, dialer, theirs} // fdRuleset, FdDialer, fdNotify
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// With a terminal (warden run from one, whose pty is this session's
	// controlling terminal), the hook's group is made its foreground by
	// the child itself, before the exec: it reads the terminal without
	// SIGTTIN from its first instruction, and resizes reach it as SIGWINCH.
	if pgrp, err := unix.IoctlGetInt(0, unix.TIOCGPGRP); err == nil && pgrp == unix.Getpgrp() {
		cmd.SysProcAttr.Foreground, cmd.SysProcAttr.Ctty = true, 0
	}
	if err := cmd.Start(); err != nil {
		fail(fmt.Errorf("starting the hook: %w", err))
	}
	ruleset.Close()
	dialer.Close()
	theirs.Close()
	go func() {
		defer ours.Close()
		listener, err := receiveListener(ours)
		if err != nil {
			return // the hook failed before its exec, and says why
		}
		newSupervisor(listener, args.writable, args.uid, args.gid, args.keep).serve()
	}()
	hook := cmd.Process.Pid
	go func() {
		for sig := range term {
			_ = syscall.Kill(-hook, sig.(syscall.Signal))
		}
	}()
	// The engine is gone: no grace, nobody waits for the run. The hook's
	// group dies now; the wait below reaps the hook, then killChildren
	// takes the rest of the tree (setsid daemons included: they are ours).
	go func() {
		<-gone
		_ = syscall.Kill(-hook, syscall.SIGKILL)
		_ = syscall.Kill(hook, syscall.SIGKILL)
	}()

	// Reap until the hook itself is gone: orphans of the run that end
	// meanwhile are reaped here too (they are our children now).
	var status unix.WaitStatus
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			fail(fmt.Errorf("waiting for the hook: %w", err))
		}
		if pid == hook {
			status = ws
			break
		}
	}
	killChildren()
	if status.Signaled() {
		dieBy(syscall.Signal(status.Signal()))
	}
	os.Exit(status.ExitStatus())
}

// killChildren kills every child of this process until none is left.
// As a subreaper, a killed child's children become ours in turn, so the
// loop ends with the whole tree below us gone and reaped.
func killChildren() {
	for {
		for _, pid := range ownChildren() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		var ws unix.WaitStatus
		_, err := unix.Wait4(-1, &ws, 0, nil)
		if err == unix.ECHILD {
			return
		}
	}
}

// ownChildren lists this process's live children, of all its threads.
// Where the kernel has no /proc/PID/task/TID/children
// (CONFIG_PROC_CHILDREN off) it lists every descendant from /proc's stat
// files instead: an empty list there would leave killChildren waiting on
// a daemon that never ends, and the run hung.
func ownChildren() []int { return ownChildrenFrom(os.ReadFile) }

// ownChildrenFrom is ownChildren reading the children lists with read
// (a test's stands for a kernel without them).
func ownChildrenFrom(read func(string) ([]byte, error)) []int {
	tasks, _ := os.ReadDir("/proc/self/task")
	var out []int
	for _, t := range tasks {
		b, err := read("/proc/self/task/" + t.Name() + "/children")
		if err != nil {
			return descendants(os.Getpid())[1:]
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				out = append(out, pid)
			}
		}
	}
	return out
}

// dieBy ends this process by sig, so that the executor sees the hook's
// own end ("killed by SIGKILL"). The Go runtime keeps handlers of its own
// for some signals (SIGSEGV, SIGABRT, ...): the action is set back to
// the default with a raw rt_sigaction first (an all-zero struct
// sigaction is SIG_DFL on every architecture).
func dieBy(sig syscall.Signal) {
	signal.Reset(sig)
	var act [64]byte
	_, _, _ = unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&act[0])), 0, 8, 0, 0)
	// To this very thread: delivered before the call returns to us.
	_ = unix.Tgkill(os.Getpid(), unix.Gettid(), sig)
	os.Exit(128 + int(sig))
}
