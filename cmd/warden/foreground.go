package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"

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
