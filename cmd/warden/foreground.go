package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/engine/perms"
	"github.com/wardenhq/warden/engine/termsafe"
)

// foreground reports whether f is a terminal whose foreground process
// group is this process's. A process of a background job (`warden hook
// run … &`) that reads its terminal, or changes its modes, is stopped by
// the kernel (SIGTTIN, SIGTTOU) until the shell brings it back with fg.
func foreground(f *os.File) bool {
	pgrp, err := unix.IoctlGetInt(int(f.Fd()), unix.TIOCGPGRP)
	return err == nil && pgrp == unix.Getpgrp()
}

// backgroundConfirm answers operator.confirm for a run started in the
// background of a terminal: it never reads the terminal. It says, on w,
// what the hook asks and where the request waits (the console, `warden
// perms approve ID`), and leaves the decision to them; the request's
// expiry answers no.
func backgroundConfirm(e engine.Facade, w io.Writer, run *atomic.Value) func(context.Context, string) (bool, error) {
	return func(ctx context.Context, msg string) (bool, error) {
		id := "ID"
		if rs, err := e.Requests(engine.RequestFilter{}); err == nil {
			want, _ := run.Load().(string)
			for _, r := range rs {
				var c struct{ Message string }
				json.Unmarshal(r.Content, &c)
				if r.Decision != nil || (want != "" && r.Requester.Run != want) {
					continue
				}
				// A confirm asks its own message; the engine's own questions
				// (network.connect, other permissions) name their request.
				if r.Operation == perms.OpConfirm && c.Message == msg || r.Operation != perms.OpConfirm && strings.Contains(msg, fmt.Sprintf("(request %d)", r.ID)) {
					id = fmt.Sprint(r.ID)
				}
			}
		}
		var b strings.Builder
		fmt.Fprintf(&b, "\n? the hook asks (request %s):\n", id)
		for _, l := range strings.Split(msg, "\n") {
			b.WriteString("  " + termsafe.String(l) + "\n")
		}
		fmt.Fprintf(&b, "this run is in the background of its terminal, so it asks nothing here: the request waits in the console (2 Requests) and for `warden perms approve %s` or `warden perms deny %s --reason WHY` from any terminal\n", id, id)
		io.WriteString(w, b.String())
		<-ctx.Done()
		return false, ctx.Err()
	}
}

// waitingNotice says on w, once per request, that a run with no terminal
// to ask at waits for an operator elsewhere, and where: without it a
// script's `warden hook run … </dev/null` (stderr even with --json) sat
// silent until the request expired. A request the engine denies at once
// (no operator attached at all) says so in the run's stream instead, so
// a request is named here only if it still waits a moment later.
func waitingNotice(e engine.Facade, w io.Writer) func(engine.Request) {
	var mu sync.Mutex
	said := map[uint64]bool{}
	where := "in the console"
	if pid := attachedPID(e); pid != 0 {
		where = fmt.Sprintf("in the console (the data dir is held by pid %d)", pid)
	}
	return func(r engine.Request) {
		mu.Lock()
		first := !said[r.ID]
		said[r.ID] = true
		mu.Unlock()
		if !first {
			return
		}
		go func() {
			time.Sleep(200 * time.Millisecond)
			if got, err := e.Request(r.ID); err != nil || got.Decision != nil {
				return
			}
			fmt.Fprintf(w, "request %d (%s) waits for an operator: answer it %s, or with `warden perms approve %d` or `warden perms deny %d --reason WHY`; it expires at %s\n",
				r.ID, termsafe.String(r.Operation), where, r.ID, r.ID, r.Expires.Local().Format("15:04:05"))
		}()
	}
}
