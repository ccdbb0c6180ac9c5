// Package sshconsole serves the console over SSH (wish): `warden serve
// --ssh ADDR --operators FILE` runs one console program per session, all
// on the one engine (docs/operating.md, "SSH").
//
// The package is laid out the way charmbracelet/soft-serve lays out its
// SSH server: this file builds the server from named middlewares
// (middleware.go); lifecycle.go starts and ends it; hostkey.go and
// operators.go hold the host key and the operators file that says who
// may log in, and as what.
package sshconsole

import (
	"context"
	"errors"
	"fmt"
	"github.com/wardenhq/warden/engine/termsafe"
	"io"
	"log"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/ssh"
	"github.com/charmbracelet/wish"
	"github.com/charmbracelet/wish/activeterm"
	"github.com/charmbracelet/wish/bubbletea"
	"github.com/charmbracelet/wish/logging"
	wrecover "github.com/charmbracelet/wish/recover"
	"github.com/muesli/termenv"

	"github.com/wardenhq/warden/engine"
)

const (
	defaultPort        = "2222"
	defaultIdle        = 15 * time.Minute
	defaultMaxSessions = 8
	// HostKeyFile is the host key's name in the data dir.
	HostKeyFile = "ssh_host_ed25519"
	// keyExt is where the auth handler records the key it accepted.
	keyExt = "warden-key-fp"
	// ShutdownLine is what a console's terminal shows, once restored,
	// when Shutdown ended it.
	ShutdownLine = "warden is shutting down"
	// drainTimeout bounds the wait for a PTY's last output to be sent.
	drainTimeout = time.Second
)

// Config configures the SSH server.
type Config struct {
	Addr        string // host:port; no host means 127.0.0.1
	Operators   string // the operators file
	IdleTimeout time.Duration
	MaxSessions int
	Log         io.Writer // default os.Stderr
	Version     string    // shown on the status screen of a session without a PTY
}

// Server is a running SSH console server.
type Server struct {
	e    engine.Host
	cfg  Config
	ops  *operatorsFile
	srv  *ssh.Server
	ln   net.Listener
	done chan struct{}
	once sync.Once
	logf func(format string, a ...any)
	// themes is each key's :theme choice.
	themes *keyThemes

	mu       sync.Mutex
	closing  bool                  // Shutdown or Close began: new sessions are refused
	sessions map[*session]struct{} // the sessions whose handler runs
	ended    chan struct{}         // signalled (cap 1) whenever a session ends

	active atomic.Int64 // sessions past the session limit's check
}

// session is one live session, from the first middleware on.
type session struct {
	prog     *tea.Program // its console, once made (s.mu)
	stopping bool         // Shutdown asked its console to quit (s.mu)
}

// Start serves the console over SSH until ctx ends or the server is shut
// down or closed.
func Start(ctx context.Context, e engine.Host, cfg Config) (*Server, error) {
	if cfg.Operators == "" {
		return nil, errors.New("ssh needs an operators file (--operators FILE)")
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = defaultIdle
	}
	if cfg.MaxSessions == 0 {
		cfg.MaxSessions = defaultMaxSessions
	}
	if cfg.Log == nil {
		cfg.Log = os.Stderr
	}
	logger := log.New(safeLog{cfg.Log}, "warden ssh: ", log.LstdFlags)
	if _, err := os.Stat(cfg.Operators); err != nil {
		return nil, fmt.Errorf("operators file: %w", err)
	}
	ops := &operatorsFile{path: cfg.Operators, logf: logger.Printf, e: e}
	ops.refresh()
	hostPEM, err := HostKey(e.DataDir())
	if err != nil {
		return nil, err
	}
	s := &Server{
		e:        e,
		cfg:      cfg,
		ops:      ops,
		done:     make(chan struct{}),
		logf:     logger.Printf,
		themes:   &keyThemes{path: filepath.Join(e.DataDir(), ThemesFile)},
		sessions: map[*session]struct{}{},
		ended:    make(chan struct{}, 1),
	}
	srv, err := wish.NewServer(
		wish.WithHostKeyPEM(hostPEM),
		wish.WithPublicKeyAuth(s.authorizeKey),
		wish.WithIdleTimeout(cfg.IdleTimeout),
		// A real PTY: with an emulated one, wish's background-colour query
		// blocks until the client types (a client that does not answer
		// OSC 11 would see nothing); on a PTY it times out after 2s.
		ssh.AllocatePty(),
		// Middlewares run last to first: a session is tracked, its key
		// checked, the session limit applied, a session without a PTY
		// answered with the status screen; then the console runs, and
		// is released once it has ended.
		wish.WithMiddleware(wrecover.MiddlewareWithLogger(logger,
			s.releaseConsole,
			// As bubbletea.Middleware, which uses termenv.Ascii too.
			bubbletea.MiddlewareWithProgramHandler(s.consoleProgram, termenv.Ascii),
			activeterm.Middleware(),
			s.statusWithoutPTY,
			s.limitSessions,
			s.checkKey,
			logging.MiddlewareWithLogger(logger),
		), s.trackSessions),
	)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", ListenAddr(cfg.Addr))
	if err != nil {
		return nil, err
	}
	s.srv, s.ln = srv, ln
	go func() {
		defer close(s.done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, ssh.ErrServerClosed) {
			logger.Printf("serve: %v", err)
		}
	}()
	go func() {
		select {
		case <-ctx.Done():
			s.Close()
		case <-s.done:
		}
	}()
	logger.Printf("listening on %s (operators file %s)", s.Addr(), cfg.Operators)
	if fp, err := HostKeyFingerprint(hostPEM); err == nil {
		// What a client's first connection asks the operator to accept.
		logger.Printf("host key %s (%s): check it when ssh asks on a first connection", fp, filepath.Join(e.DataDir(), HostKeyFile))
	}
	return s, nil
}

// safeLog writes each log entry escaped on one line (log.Logger writes
// one entry per Write). The session log quotes what an SSH client chose:
// its user name, version string and TERM.
type safeLog struct{ w io.Writer }

func (l safeLog) Write(p []byte) (int, error) {
	s := strings.TrimSuffix(string(p), "\n")
	if _, err := io.WriteString(l.w, termsafe.String(s)+"\n"); err != nil {
		return 0, err
	}
	return len(p), nil
}
