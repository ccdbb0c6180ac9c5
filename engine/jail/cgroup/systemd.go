package cgroup

// The D-Bus route to a delegated cgroup: where warden's own cgroup v2
// group cannot be delegated (an ordinary user's login session sits in
// session-N.scope, owned by root), warden asks systemd for a transient
// scope with Delegate=yes that holds its own PID, exactly as
// `systemd-run --user --scope -p Delegate=yes` does. An ordinary user asks
// the user's systemd (the scope lands under user@UID.service/app.slice);
// root asks the system's (the scope lands under system.slice).
//
// Moving the PID moves the whole process: on cgroup v2, systemd writes it
// to the scope's cgroup.procs, which moves every thread of the thread
// group (threads can only be split across groups in threaded mode, which
// nobody asks for here). systemd_test.go checks every /proc/self/task/*.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	sd "github.com/coreos/go-systemd/v22/dbus"
	godbus "github.com/godbus/dbus/v5"
)

// sdScopeTimeout bounds the whole exchange when the caller's context has
// no deadline of its own: systemd answers in milliseconds, or not at all.
const sdScopeTimeout = 10 * time.Second

// systemdScope moves this process into a new transient scope with
// Delegate=yes and returns its cgroup v2 path as /proc/self/cgroup names
// it (the "0::" line, e.g. /user.slice/user-1000.slice/user@1000.service/
// app.slice/warden-4242.scope). Its error says what went wrong and what
// to do about it.
func systemdScope(ctx context.Context) (string, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, sdScopeTimeout)
		defer cancel()
	}
	pid := os.Getpid()
	name := fmt.Sprintf("warden-%d.scope", pid)

	// Already there (a second call in the same process, maybe after the
	// probe moved it into a leaf below the scope): nothing to ask.
	if own, err := sdOwnCgroup(); err == nil {
		if scope, ok := sdWithin(own, name); ok {
			return scope, nil
		}
	}

	conn, where, err := sdConnect(ctx, os.Geteuid())
	if err != nil {
		return "", err
	}
	defer conn.Close()

	props := []sd.Property{
		sd.PropDescription("warden engine (delegated cgroup for jailed runs)"),
		sd.PropPids(uint32(pid)),
		{Name: "Delegate", Value: godbus.MakeVariant(true)},
		// A scope that failed (or whose processes are gone) is garbage
		// collected at once, so the name is free again for the next pid.
		{Name: "CollectMode", Value: godbus.MakeVariant("inactive-or-failed")},
	}
	done := make(chan string, 1)
	if _, err := conn.StartTransientUnitContext(ctx, name, "fail", props, done); err != nil {
		return "", fmt.Errorf("cgroup: %s refused the scope %s: %v; "+
			"try `systemd-run %s--scope -p Delegate=yes true` to see why", where, name, err, sdUserFlag())
	}
	// JobRemoved says when the job is over. Should the signal not come
	// (a private socket without a subscription), the move itself is as
	// good an answer: poll for it too.
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		select {
		case result := <-done:
			if result != "done" {
				return "", fmt.Errorf("cgroup: %s started the scope %s with result %q, not \"done\"; "+
					"see `journalctl %s-u %s`", where, name, result, sdUserFlag(), name)
			}
			break wait
		case <-tick.C:
			if own, err := sdOwnCgroup(); err == nil && filepath.Base(own) == name {
				break wait
			}
		case <-ctx.Done():
			return "", fmt.Errorf("cgroup: %s did not finish starting the scope %s: %v", where, name, ctx.Err())
		}
	}

	// systemd has written the pid to the scope's cgroup.procs by the time
	// the job is done; read back where the kernel says we are.
	own, err := sdOwnCgroup()
	if err != nil {
		return "", err
	}
	if filepath.Base(own) != name {
		return "", fmt.Errorf("cgroup: %s started %s, but this process is still in %s "+
			"(is /proc/self/cgroup from another cgroup namespace?)", where, name, own)
	}
	return own, nil
}

// sdConnect dials the systemd that may give this user a scope: the
// user's own systemd over the session bus for an ordinary user, PID 1
// over the system bus for root. Where no bus daemon runs but systemd
// does, its private socket answers the same calls (as systemctl falls
// back to it). where names the instance for error messages.
func sdConnect(ctx context.Context, uid int) (conn *sd.Conn, where string, err error) {
	if uid == 0 {
		where = "the system's systemd"
		conn, err = sd.NewConnection(func() (*godbus.Conn, error) {
			return sdDial(ctx, sdSystemBusAddress(), 0, true)
		})
		if err == nil {
			return conn, where, nil
		}
		if _, statErr := os.Stat("/run/systemd/private"); statErr == nil {
			if c, err2 := sd.NewSystemdConnectionContext(ctx); err2 == nil {
				return c, where, nil
			}
		}
		return nil, where, fmt.Errorf("cgroup: no systemd on the system bus (%v); "+
			"on a host without systemd as PID 1, run warden where it can delegate a cgroup "+
			"(docs/systemd.md)", err)
	}

	where = "the user's systemd"
	addrs := sdUserBusAddresses(uid)
	var errs []string
	for _, a := range addrs {
		addr := a
		conn, err = sd.NewConnection(func() (*godbus.Conn, error) {
			return sdDial(ctx, addr.address, uid, addr.hello)
		})
		if err == nil {
			return conn, where, nil
		}
		errs = append(errs, fmt.Sprintf("%s: %v", addr.address, err))
	}
	runtime := sdRuntimeDir(uid)
	return nil, where, fmt.Errorf("cgroup: no systemd user session (%s): "+
		"log in through a session (ssh or a console login, so that pam_systemd starts user@%d.service), "+
		"or run `loginctl enable-linger %s` once, then check `systemctl --user status` with "+
		"XDG_RUNTIME_DIR=%s; the user bus needs the dbus-user-session package (or dbus-broker)",
		strings.Join(errs, "; "), uid, sdUserName(uid), runtime)
}

type sdAddress struct {
	address string
	hello   bool // a bus daemon wants Hello; systemd's private socket does not
}

// sdUserBusAddresses lists where the user's systemd may answer, best
// first: $DBUS_SESSION_BUS_ADDRESS, $XDG_RUNTIME_DIR/bus,
// /run/user/UID/bus, then the user systemd's private socket.
func sdUserBusAddresses(uid int) []sdAddress {
	var out []sdAddress
	seen := map[string]bool{}
	add := func(a string, hello bool) {
		if a != "" && !seen[a] {
			seen[a] = true
			out = append(out, sdAddress{a, hello})
		}
	}
	add(os.Getenv("DBUS_SESSION_BUS_ADDRESS"), true)
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		if sdIsSocket(filepath.Join(d, "bus")) {
			add("unix:path="+filepath.Join(d, "bus"), true)
		}
	}
	rd := "/run/user/" + strconv.Itoa(uid)
	if sdIsSocket(filepath.Join(rd, "bus")) {
		add("unix:path="+filepath.Join(rd, "bus"), true)
	}
	for _, d := range []string{os.Getenv("XDG_RUNTIME_DIR"), rd} {
		if d != "" && sdIsSocket(filepath.Join(d, "systemd", "private")) {
			add("unix:path="+filepath.Join(d, "systemd", "private"), false)
		}
	}
	if len(out) == 0 {
		// Say where we looked.
		add("unix:path="+filepath.Join(rd, "bus"), true)
	}
	return out
}

func sdSystemBusAddress() string {
	if a := os.Getenv("DBUS_SYSTEM_BUS_ADDRESS"); a != "" {
		return a
	}
	return "unix:path=/run/dbus/system_bus_socket"
}

// sdDial opens one authenticated connection. go-systemd's
// NewUserConnectionContext would fall back to dbus-launch autolaunch,
// which starts a bus of its own with no systemd on it; dialling the
// addresses above ourselves avoids that.
func sdDial(ctx context.Context, address string, uid int, hello bool) (*godbus.Conn, error) {
	c, err := godbus.Dial(address, godbus.WithContext(ctx))
	if err != nil {
		return nil, err
	}
	if err := c.Auth([]godbus.Auth{godbus.AuthExternal(strconv.Itoa(uid))}); err != nil {
		c.Close()
		return nil, err
	}
	if hello {
		if err := c.Hello(); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

func sdIsSocket(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode()&os.ModeSocket != 0
}

func sdRuntimeDir(uid int) string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return d
	}
	return "/run/user/" + strconv.Itoa(uid)
}

func sdUserName(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		return u.Username
	}
	return strconv.Itoa(uid)
}

func sdUserFlag() string {
	if os.Geteuid() == 0 {
		return ""
	}
	return "--user "
}

// sdWithin reports whether cgroup path p is the group named name or
// below it, and returns the path up to and including that group.
func sdWithin(p, name string) (string, bool) {
	parts := strings.Split(p, "/")
	for i, part := range parts {
		if part == name {
			return strings.Join(parts[:i+1], "/"), true
		}
	}
	return "", false
}

// sdOwnCgroup is this process's cgroup v2 path: the "0::" line of
// /proc/self/cgroup.
func sdOwnCgroup() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", fmt.Errorf("cgroup: %v", err)
	}
	return sdV2Line(string(b))
}

func sdV2Line(s string) (string, error) {
	for _, line := range strings.Split(s, "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p, nil
		}
	}
	return "", errors.New(`cgroup: /proc/self/cgroup has no "0::" line: this is not a cgroup v2 host`)
}
