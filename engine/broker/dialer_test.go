package broker_test

import (
	"errors"
	"io"
	"os"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/wardenhq/warden/engine/sdk/hookkit"
	"github.com/wardenhq/warden/engine/sdk/protocol"
)

// dialerRun is run(t) with the hook's environment pointing at a dialer
// instead of the socket, as a landlock jail's is.
func dialerRun(t *testing.T) (int, *engine) {
	t.Helper()
	b, e := run(t)
	d, err := b.Dialer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	t.Setenv("WARDEN_SOCKET", "")
	t.Setenv("WARDEN_DIALER", strconv.Itoa(int(d.Fd())))
	return int(d.Fd()), e
}

// A hook that may not make a Unix socket still talks to its broker: the
// SDK sends one end of a socketpair over the dialer, and the broker
// serves it as any connection, one after another and side by side.
func TestDialerServesConnections(t *testing.T) {
	_, e := dialerRun(t)
	a, b := connect(t), connect(t)
	if a.Context().Run != "run-1" {
		t.Fatalf("context over the dialer: %+v", a.Context())
	}
	if err := a.Log("info", "one"); err != nil {
		t.Fatal(err)
	}
	if err := b.Log("info", "two"); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(a.Close(), b.Close()); err != nil {
		t.Fatal(err)
	}
	// The helper's one-shot `hook log MSG` takes the same way.
	if err := hookkit.SendLog("info", "three"); err != nil {
		t.Fatal(err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	slices.Sort(e.logs)
	if want := []string{"info: one", "info: three", "info: two"}; !slices.Equal(e.logs, want) {
		t.Fatalf("logs %q, want %q", e.logs, want)
	}
}

// What a hook sends the dialer is hostile: a message with no fd, a pipe,
// a datagram socket, two sockets at once. Each is closed and dropped,
// and the dialer goes on serving; a wrong token is refused as on the
// socket.
func TestDialerDropsWhatIsNotAConnection(t *testing.T) {
	fd, _ := dialerRun(t)
	send := func(fds ...int) {
		t.Helper()
		var oob []byte
		if len(fds) > 0 {
			oob = syscall.UnixRights(fds...)
		}
		if err := syscall.Sendmsg(fd, []byte{0}, oob, nil, 0); err != nil {
			t.Fatal(err)
		}
	}
	send()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	send(int(pw.Fd()))
	pw.Close()
	dg, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_DGRAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	send(dg[1])
	syscall.Close(dg[1])
	s1, _ := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	s2, _ := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	send(s1[1], s2[1])
	for _, x := range []int{s1[1], s2[1]} {
		syscall.Close(x)
	}

	// The broker kept none of them: the pipe's last writer is gone, and
	// the datagram and stream peers see their other end closed.
	pr.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := pr.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("the pipe sent to the dialer: %v, want EOF (the broker closed its copy)", err)
	}
	for _, x := range []int{s1[0], s2[0]} {
		syscall.SetsockoptTimeval(x, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &syscall.Timeval{Sec: 5})
		if n, err := syscall.Read(x, make([]byte, 1)); n != 0 || err != nil {
			t.Errorf("a stream end sent two at a time: read %d %v, want EOF", n, err)
		}
		syscall.Close(x)
	}
	syscall.Close(dg[0])

	c := connect(t)
	if err := c.Log("info", "still served"); err != nil {
		t.Fatal(err)
	}
	_, err = hookkit.DialFD(fd, "cap_wrong")
	var he *hookkit.Error
	if !errors.As(err, &he) || he.Code != protocol.CodeUnauthorized {
		t.Fatalf("a wrong token over the dialer: %v, want unauthorized", err)
	}
}

// Once the run's broker is closed the dialer answers nothing more.
func TestDialerClosesWithTheBroker(t *testing.T) {
	b, _ := run(t)
	d, err := b.Dialer()
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	b.Close()
	if _, err := hookkit.DialFD(int(d.Fd()), token); err == nil {
		t.Fatal("dialed a closed broker")
	}
	if _, err := b.Dialer(); err == nil {
		t.Fatal("a new dialer from a closed broker")
	}
}
