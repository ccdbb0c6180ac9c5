package sshconsole

import (
	"context"
	"errors"
	"net"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/ssh"
)

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops listening and drops every connection at once: the clients'
// terminals are left as they are. Shutdown is the clean way.
func (s *Server) Close() error {
	var err error
	s.once.Do(func() {
		s.mu.Lock()
		s.closing = true
		s.mu.Unlock()
		err = s.srv.Close()
		<-s.done
		if errors.Is(err, ssh.ErrServerClosed) {
			err = nil
		}
	})
	return err
}

// Shutdown ends the server cleanly: it stops accepting connections and
// refuses new sessions, asks every console to quit (which restores the
// client's terminal: alternate screen and mouse reporting off), tells the
// client why, and waits for the sessions to end with exit status 0 and
// for the clients to hang up. When ctx ends first, it closes what is left
// (Close). Either way the server is closed when it returns.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	live := make([]*session, 0, len(s.sessions))
	for ss := range s.sessions {
		live = append(live, ss)
	}
	s.mu.Unlock()
	// With a context already done, ssh.Server.Shutdown closes the listener
	// and returns without waiting.
	now, cancel := context.WithCancel(context.Background())
	cancel()
	s.srv.Shutdown(now)
	for _, ss := range live {
		s.stop(ss)
	}
	if len(live) > 0 {
		s.logf("shutting down: asked %d console(s) to quit", len(live))
	}
	for {
		s.mu.Lock()
		n := len(s.sessions)
		s.mu.Unlock()
		if n == 0 {
			break
		}
		select {
		case <-s.ended:
			continue
		case <-ctx.Done():
			s.logf("shutting down: %d session(s) still open; dropping them", n)
			return s.Close()
		}
	}
	// A client hangs up once its session has ended (OpenSSH does at
	// once); closing the connection under it could cut off the end of
	// what it was sent. Give the clients a moment.
	grace, cancelGrace := context.WithTimeout(ctx, time.Second)
	s.srv.Shutdown(grace)
	cancelGrace()
	return s.Close()
}

// begin registers a new session; false once the server is closing.
func (s *Server) begin() (*session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return nil, false
	}
	ss := &session{}
	s.sessions[ss] = struct{}{}
	return ss, true
}

// end forgets a session whose handler has returned.
func (s *Server) end(ss *session) {
	s.mu.Lock()
	delete(s.sessions, ss)
	p := ss.prog
	s.mu.Unlock()
	if p != nil {
		p.Kill() // frees a Quit still waiting for a program that never ran
	}
	select {
	case s.ended <- struct{}{}:
	default:
	}
}

// setProgram records a session's console; if the server is already
// shutting down, the console quits as soon as it runs.
func (s *Server) setProgram(ss *session, p *tea.Program) {
	s.mu.Lock()
	ss.prog = p
	closing := s.closing
	s.mu.Unlock()
	if closing {
		s.stop(ss)
	}
}

// stop asks a session's console to quit (it restores the terminal as on
// q). A session with no console yet gets it from setProgram.
func (s *Server) stop(ss *session) {
	s.mu.Lock()
	ss.stopping = true
	p := ss.prog
	s.mu.Unlock()
	if p != nil {
		// Quit waits for the program's event loop (or its end).
		go p.Quit()
	}
}

// stopped says whether Shutdown asked the session's console to quit.
func (s *Server) stopped(ss *session) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return ss.stopping
}

// ListenAddr makes an address loopback-only unless it names a host.
func ListenAddr(addr string) string {
	if addr == "" {
		return net.JoinHostPort("127.0.0.1", defaultPort)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		// A bare port ("2222").
		host, port = "", strings.TrimPrefix(addr, ":")
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
