package sshconsole

import (
	"io"
	"strings"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/ssh"
	"github.com/charmbracelet/wish"
	"github.com/charmbracelet/wish/bubbletea"
	gossh "golang.org/x/crypto/ssh"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/engine/termsafe"
	"github.com/wardenhq/warden/themes"
	"github.com/wardenhq/warden/tui"
)

// Values a session's context carries from one middleware to the next.
type contextKey struct{ name string }

var (
	ctxRole    = &contextKey{"role"}
	ctxConsole = &contextKey{"console"}
	ctxSession = &contextKey{"session"}
)

// authorizeKey is the public key handler: only keys in the operators file
// (as it is now) get in. It records the key it accepted, for checkKey.
func (s *Server) authorizeKey(sctx ssh.Context, key ssh.PublicKey) bool {
	fp := gossh.FingerprintSHA256(key)
	if _, ok := s.ops.lookup(key); !ok {
		s.logf("refused key %s from %s", fp, sctx.RemoteAddr())
		return false
	}
	p := sctx.Permissions().Permissions
	if p.Extensions == nil {
		p.Extensions = map[string]string{}
	}
	p.Extensions[keyExt] = fp
	return true
}

// trackSessions registers every session, so that Shutdown can end them
// and wait for them; once the server is closing it refuses new ones.
func (s *Server) trackSessions(next ssh.Handler) ssh.Handler {
	return func(sess ssh.Session) {
		ss, ok := s.begin()
		if !ok {
			wish.Fatalln(sess, "warden: "+ShutdownLine)
			return
		}
		defer s.end(ss)
		sess.Context().SetValue(ctxSession, ss)
		next(sess)
	}
}

// checkKey checks the session's key again against the one accepted at
// auth (CVE-2024-45337: the last key the auth handler saw need not be the
// one that authenticated) and against the operators file as it is now,
// and gives the session its role.
func (s *Server) checkKey(next ssh.Handler) ssh.Handler {
	return func(sess ssh.Session) {
		pk := sess.PublicKey()
		if pk == nil {
			wish.Fatalln(sess, "warden: public key authentication required")
			return
		}
		fp := gossh.FingerprintSHA256(pk)
		if rec := sess.Context().Permissions().Extensions[keyExt]; rec != fp {
			s.logf("refused session: key %s is not the key accepted at auth (%q)", fp, rec)
			wish.Fatalln(sess, "warden: key mismatch, refused")
			return
		}
		role, ok := s.ops.lookup(pk)
		if !ok {
			s.logf("refused session: key %s is no longer in %s", fp, s.ops.path)
			wish.Fatalln(sess, "warden: key not authorized")
			return
		}
		sess.Context().SetValue(ctxRole, role)
		next(sess)
	}
}

// limitSessions refuses a session beyond Config.MaxSessions.
func (s *Server) limitSessions(next ssh.Handler) ssh.Handler {
	return func(sess ssh.Session) {
		n := s.active.Add(1)
		defer s.active.Add(-1)
		if n > int64(s.cfg.MaxSessions) {
			s.logf("refused session from %s: %d sessions already open", sess.RemoteAddr(), s.cfg.MaxSessions)
			wish.Fatalf(sess, "warden: too many sessions (at most %d); try again later\n", s.cfg.MaxSessions)
			return
		}
		next(sess)
	}
}

// statusWithoutPTY answers a session without a PTY with a one-screen
// status and exit 0 (it comes before activeterm, which would refuse the
// session).
func (s *Server) statusWithoutPTY(next ssh.Handler) ssh.Handler {
	return func(sess ssh.Session) {
		if s.runVerb(sess) {
			return // `ssh host VERB`: with or without a PTY
		}
		if _, _, ok := sess.Pty(); ok {
			next(sess)
			return
		}
		io.WriteString(sess, termsafe.Text(statusScreen(s.e, s.cfg.Version)))
		sess.Exit(0)
	}
}

// releaseConsole lets go of the console once its program has ended (and
// restored the terminal); if Shutdown ended it, it says so on the
// restored screen. Then it waits for the PTY's output to reach the
// client: the server copies it in the background and closes the channel
// as soon as the handler returns.
func (s *Server) releaseConsole(next ssh.Handler) ssh.Handler {
	return func(sess ssh.Session) {
		if m, ok := sess.Context().Value(ctxConsole).(*tui.App); ok {
			m.Close()
		}
		if ss, ok := sess.Context().Value(ctxSession).(*session); ok && s.stopped(ss) {
			io.WriteString(ptyOutput(sess), ShutdownLine+"\r\n")
		}
		drainPTY(sess, drainTimeout)
		next(sess)
	}
}

// consoleProgram makes a session's console program (as wish's default
// handler does) and records it, so that Shutdown can make it quit. The
// session's key names the actor; its role, from the operators file, is
// the engine's to enforce.
func (s *Server) consoleProgram(sess ssh.Session) *tea.Program {
	role, _ := sess.Context().Value(ctxRole).(engine.Role)
	actor := Actor(sess.PublicKey())
	s.e.SetRole(actor, role)
	noColor := themes.NoColorWanted() // serve's NO_COLOR, or the session's below
	for _, kv := range sess.Environ() {
		if v, ok := strings.CutPrefix(kv, "NO_COLOR="); ok && v != "" {
			noColor = true
		}
	}
	getenv := sessionEnv(sess)
	_, copyNote := tui.ForTerminal("", getenv)
	// Every style is drawn with the session's own renderer, so colours
	// follow the client's terminal, not serve's.
	renderer := bubbletea.MakeRenderer(sess)
	th, _ := themes.Make(s.themes.get(actor), noColor, renderer)
	m := tui.New(s.e, tui.Options{
		Theme:    th,
		Actor:    actor,
		Bell:     func() { io.WriteString(sess, "\a") },
		NoAttach: role != engine.RoleOperator,
		Viewer:   role != engine.RoleOperator,
		Role:     roleName(role),
		// The header and every actor show the key's comment from the
		// operators file next to its short fingerprint.
		ActorName: s.ops.name,
		// :theme builds for this session's terminal, and is remembered
		// for the key.
		MakeTheme: func(name string) (themes.Theme, error) { return themes.Make(name, noColor, renderer) },
		OnTheme: func(name string) {
			if err := s.themes.set(actor, name); err != nil {
				s.logf("remembering the theme of %s: %v", actor, err)
			}
		},
		// The clipboard is the client's: OSC 52 goes down the session,
		// wrapped for the tmux or screen the client says it runs in.
		Copy: func(seq string) {
			seq, _ = tui.ForTerminal(seq, getenv)
			io.WriteString(ptyOutput(sess), seq)
		},
		CopyNote: copyNote,
		NoPager:  true,
	})
	sess.Context().SetValue(ctxConsole, m)
	s.logf("console for %s (%s) from %s", actor, roleName(role), sess.RemoteAddr())
	// WithoutSignalHandler: the process's SIGINT and SIGTERM are serve's
	// (which ends the sessions itself). A program's own handler would also
	// catch them: it would keep a second SIGTERM from killing serve, and
	// its Quit, sent while Shutdown's is handled first, blocks for good
	// and with it the program's end.
	// BoundSize: a viewer's window-change is theirs to say, and bounded
	// before any part of the program sees it.
	opts := []tea.ProgramOption{tea.WithAltScreen(), tea.WithMouseCellMotion(), tea.WithoutSignalHandler(), tea.WithFilter(tui.BoundSize)}
	p := tea.NewProgram(m, append(opts, bubbletea.MakeOptions(sess)...)...)
	if pty, _, ok := sess.Pty(); ok && !sess.EmulatedPty() && pty.Slave != nil {
		go followPtySize(sess.Context(), pty.Slave, p)
	}
	if ss, ok := sess.Context().Value(ctxSession).(*session); ok {
		s.setProgram(ss, p)
	}
	return p
}

// sessionEnv looks a variable up in what the client sent: its pty's TERM
// and the variables it passed (SendEnv), never serve's own environment.
func sessionEnv(sess ssh.Session) func(string) string {
	env := map[string]string{}
	for _, kv := range sess.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	if pty, _, ok := sess.Pty(); ok {
		env["TERM"] = pty.Term
	}
	return func(k string) string { return env[k] }
}
