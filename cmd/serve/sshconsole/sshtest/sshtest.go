// Package sshtest is an SSH operator's side of the SSH console, for
// tests: a key, a dial, and a PTY session that shows the console. The
// console's own tests (cmd/serve/sshconsole) serve it in-process;
// cmd/warden's end-to-end tests reach `warden serve --ssh`. Only tests
// import it.
package sshtest

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
	gossh "golang.org/x/crypto/ssh"
)

// Key is a fresh ed25519 key and its authorized_keys line.
func Key(t testing.TB) (gossh.Signer, string) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := gossh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s, strings.TrimSpace(string(gossh.MarshalAuthorizedKey(s.PublicKey())))
}

// Dial logs in to addr as signer, trusting only hostKey.
func Dial(addr string, hostKey gossh.PublicKey, signer gossh.Signer) (*gossh.Client, error) {
	return gossh.Dial("tcp", addr, &gossh.ClientConfig{
		User:            "warden",
		Auth:            []gossh.AuthMethod{gossh.PublicKeys(signer)},
		HostKeyCallback: gossh.FixedHostKey(hostKey),
		Timeout:         10 * time.Second,
	})
}

// Buffer collects output while a test reads it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Console is a PTY session showing the console.
type Console struct {
	Client *gossh.Client
	Sess   *gossh.Session
	in     io.WriteCloser
	// Screen is every byte the client was sent.
	Screen *Buffer
	// Done is closed when the session has ended; Err then says how
	// (nil: exit status 0).
	Done chan struct{}
	Err  error
	log  fmt.Stringer
}

// Open logs in with a PTY (40x140) and waits for the console; cleanup
// quits it. log is the server's, shown when a wait fails.
func Open(t testing.TB, addr string, hostKey gossh.PublicKey, signer gossh.Signer, log fmt.Stringer) *Console {
	t.Helper()
	c, err := Dial(addr, hostKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	con := &Console{Client: c, Sess: s, Screen: &Buffer{}, Done: make(chan struct{}), log: log}
	t.Cleanup(func() { con.Quit(); s.Close(); c.Close() })
	if err := s.RequestPty("xterm-256color", 40, 140, gossh.TerminalModes{gossh.ECHO: 0}); err != nil {
		t.Fatal(err)
	}
	s.Stdout, s.Stderr = con.Screen, con.Screen
	if con.in, err = s.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := s.Shell(); err != nil {
		t.Fatal(err)
	}
	// Like OpenSSH, the client hangs up once its session has ended.
	go func() { con.Err = s.Wait(); close(con.Done); c.Close() }()
	con.WaitFor(t, "Streams", 15*time.Second)
	return con
}

// Quit ends the console from its side before the connection goes (a
// client that just hangs up makes the server close the PTY under
// bubbletea's input reader: a race inside the libraries).
func (c *Console) Quit() {
	for _, k := range []string{"q", "\x03", "\x03"} {
		select {
		case <-c.Done:
			return
		default:
		}
		io.WriteString(c.in, k)
		select {
		case <-c.Done:
			return
		case <-time.After(3 * time.Second):
		}
	}
}

// Text is the screen so far, without its escape sequences.
func (c *Console) Text() string { return ansi.Strip(c.Screen.String()) }

// WaitFor waits until the screen shows want, or fails with its tail and
// the server's log.
func (c *Console) WaitFor(t testing.TB, want string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if strings.Contains(c.Text(), want) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	s := c.Text()
	if len(s) > 3000 {
		s = s[len(s)-3000:]
	}
	t.Fatalf("the screen never showed %q; tail:\n%q\nserver log:\n%s", want, s, c.log)
}

// Keys types k, one key at a time.
func (c *Console) Keys(t testing.TB, k string) {
	t.Helper()
	for _, r := range k {
		if _, err := io.WriteString(c.in, string(r)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(150 * time.Millisecond)
	}
}

// WaitUntil polls ok until it holds, or fails naming what.
func WaitUntil(t testing.TB, what string, timeout time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
