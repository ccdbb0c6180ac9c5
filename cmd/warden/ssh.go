package main

// The console over SSH (wish): `warden serve --ssh ADDR --operators FILE`
// serves one console program per session, all on the one engine.

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/ssh"
	"github.com/charmbracelet/wish"
	"github.com/charmbracelet/wish/activeterm"
	"github.com/charmbracelet/wish/bubbletea"
	"github.com/charmbracelet/wish/logging"
	wrecover "github.com/charmbracelet/wish/recover"
	"github.com/muesli/termenv"
	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"

	"warden/engine"
	"warden/themes"
	"warden/tui"
)

const (
	sshDefaultPort        = "2222"
	sshDefaultIdle        = 15 * time.Minute
	sshDefaultMaxSessions = 8
	sshHostKeyName        = "ssh_host_ed25519"
	// sshKeyExt is where the auth callback records the key it accepted.
	sshKeyExt = "warden-key-fp"
	// sshShutdownLine is what a console's terminal shows, once restored,
	// when serve's shutdown ended it.
	sshShutdownLine = "warden is shutting down"
	// sshDrainTimeout bounds the wait for a PTY's last output to be sent.
	sshDrainTimeout = time.Second
)

// sshConfig configures the SSH server.
type sshConfig struct {
	Addr        string // host:port; no host means 127.0.0.1
	Operators   string // the operators file
	IdleTimeout time.Duration
	MaxSessions int
	Log         io.Writer // default os.Stderr
}

// sshServer is a running SSH console server.
type sshServer struct {
	srv  *ssh.Server
	ln   net.Listener
	done chan struct{}
	once sync.Once
	logf func(format string, a ...any)

	mu       sync.Mutex
	closing  bool                     // Shutdown or Close began: new sessions are refused
	sessions map[*sshSession]struct{} // the sessions whose handler runs
	ended    chan struct{}            // signalled (cap 1) whenever a session ends
}

// sshSession is one live session, from the first middleware on.
type sshSession struct {
	prog     *tea.Program // its console, once made (s.mu)
	stopping bool         // Shutdown asked its console to quit (s.mu)
}

// Addr is the address the server listens on.
func (s *sshServer) Addr() string { return s.ln.Addr().String() }

// Close stops listening and drops every connection at once: the clients'
// terminals are left as they are. Shutdown is the clean way.
func (s *sshServer) Close() error {
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
func (s *sshServer) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	live := make([]*sshSession, 0, len(s.sessions))
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
func (s *sshServer) begin() (*sshSession, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return nil, false
	}
	ss := &sshSession{}
	s.sessions[ss] = struct{}{}
	return ss, true
}

// end forgets a session whose handler has returned.
func (s *sshServer) end(ss *sshSession) {
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
func (s *sshServer) setProgram(ss *sshSession, p *tea.Program) {
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
func (s *sshServer) stop(ss *sshSession) {
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
func (s *sshServer) stopped(ss *sshSession) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return ss.stopping
}

// sshListenAddr makes an address loopback-only unless it names a host.
func sshListenAddr(addr string) string {
	if addr == "" {
		return net.JoinHostPort("127.0.0.1", sshDefaultPort)
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

type sessionKey struct{ name string }

var (
	ctxRole    = &sessionKey{"role"}
	ctxModel   = &sessionKey{"model"}
	ctxSession = &sessionKey{"session"}
)

// startSSH serves the console over SSH until ctx ends or Close is called.
func startSSH(ctx context.Context, e *engine.Engine, cfg sshConfig) (*sshServer, error) {
	if cfg.Operators == "" {
		return nil, errors.New("ssh needs an operators file (--operators FILE)")
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = sshDefaultIdle
	}
	if cfg.MaxSessions == 0 {
		cfg.MaxSessions = sshDefaultMaxSessions
	}
	if cfg.Log == nil {
		cfg.Log = os.Stderr
	}
	logger := log.New(cfg.Log, "warden ssh: ", log.LstdFlags)
	if _, err := os.Stat(cfg.Operators); err != nil {
		return nil, fmt.Errorf("operators file: %w", err)
	}
	ops := &operatorsFile{path: cfg.Operators, logf: logger.Printf, e: e}
	ops.refresh()
	hostPEM, err := sshHostKey(e.DataDir())
	if err != nil {
		return nil, err
	}
	var active atomic.Int64
	s := &sshServer{
		done:     make(chan struct{}),
		logf:     logger.Printf,
		sessions: map[*sshSession]struct{}{},
		ended:    make(chan struct{}, 1),
	}

	// track registers every session, so that Shutdown can end them and
	// wait for them; once the server is closing it refuses new ones.
	track := func(next ssh.Handler) ssh.Handler {
		return func(sess ssh.Session) {
			ss, ok := s.begin()
			if !ok {
				wish.Fatalln(sess, "warden: "+sshShutdownLine)
				return
			}
			defer s.end(ss)
			sess.Context().SetValue(ctxSession, ss)
			next(sess)
		}
	}

	authKey := func(sctx ssh.Context, key ssh.PublicKey) bool {
		fp := gossh.FingerprintSHA256(key)
		if _, ok := ops.lookup(key); !ok {
			logger.Printf("refused key %s from %s", fp, sctx.RemoteAddr())
			return false
		}
		p := sctx.Permissions().Permissions
		if p.Extensions == nil {
			p.Extensions = map[string]string{}
		}
		p.Extensions[sshKeyExt] = fp
		return true
	}

	// keyCheck checks the session's key again against the one accepted at
	// auth (CVE-2024-45337: the last key the callback saw need not be the
	// one that authenticated) and against the file as it is now.
	keyCheck := func(next ssh.Handler) ssh.Handler {
		return func(s ssh.Session) {
			pk := s.PublicKey()
			if pk == nil {
				wish.Fatalln(s, "warden: public key authentication required")
				return
			}
			fp := gossh.FingerprintSHA256(pk)
			if rec := s.Context().Permissions().Extensions[sshKeyExt]; rec != fp {
				logger.Printf("refused session: key %s is not the key accepted at auth (%q)", fp, rec)
				wish.Fatalln(s, "warden: key mismatch, refused")
				return
			}
			role, ok := ops.lookup(pk)
			if !ok {
				logger.Printf("refused session: key %s is no longer in %s", fp, ops.path)
				wish.Fatalln(s, "warden: key not authorized")
				return
			}
			s.Context().SetValue(ctxRole, role)
			next(s)
		}
	}
	limit := func(next ssh.Handler) ssh.Handler {
		return func(s ssh.Session) {
			n := active.Add(1)
			defer active.Add(-1)
			if n > int64(cfg.MaxSessions) {
				logger.Printf("refused session from %s: %d sessions already open", s.RemoteAddr(), cfg.MaxSessions)
				wish.Fatalf(s, "warden: too many sessions (at most %d); try again later\n", cfg.MaxSessions)
				return
			}
			next(s)
		}
	}
	// noPTY prints a one-screen status and exits 0 (before activeterm,
	// which would refuse the session).
	noPTY := func(next ssh.Handler) ssh.Handler {
		return func(s ssh.Session) {
			if _, _, ok := s.Pty(); ok {
				next(s)
				return
			}
			io.WriteString(s, sshStatus(e))
			s.Exit(0)
		}
	}
	// closeModel lets go of the console once its program has ended (and
	// restored the terminal); if Shutdown ended it, it says so on the
	// restored screen. Then it waits for the PTY's output to reach the
	// client: the server copies it in the background and closes the
	// channel as soon as the handler returns.
	closeModel := func(next ssh.Handler) ssh.Handler {
		return func(sess ssh.Session) {
			if m, ok := sess.Context().Value(ctxModel).(*tui.App); ok {
				m.Close()
			}
			if ss, ok := sess.Context().Value(ctxSession).(*sshSession); ok && s.stopped(ss) {
				io.WriteString(ptyOutput(sess), sshShutdownLine+"\r\n")
			}
			drainPTY(sess, sshDrainTimeout)
			next(sess)
		}
	}
	program := func(s ssh.Session) (tea.Model, []tea.ProgramOption) {
		role, _ := s.Context().Value(ctxRole).(engine.Role)
		actor := sshActor(s.PublicKey())
		e.SetRole(actor, role)
		th, _ := themes.ByName("")
		for _, kv := range s.Environ() {
			if v, ok := strings.CutPrefix(kv, "NO_COLOR="); ok && v != "" {
				th = themes.NoColor()
			}
		}
		th = themeWithRenderer(th, bubbletea.MakeRenderer(s))
		m := tui.New(e, tui.Options{
			Theme:    th,
			Actor:    actor,
			Bell:     func() { io.WriteString(s, "\a") },
			NoAttach: role != engine.RoleOperator,
		})
		s.Context().SetValue(ctxModel, m)
		logger.Printf("console for %s (%s) from %s", actor, roleName(role), s.RemoteAddr())
		// WithoutSignalHandler: the process's SIGINT and SIGTERM are serve's
		// (which ends the sessions itself). A program's own handler would
		// also catch them: it would keep a second SIGTERM from killing
		// serve, and its Quit, sent while Shutdown's is handled first,
		// blocks for good and with it the program's end.
		return m, []tea.ProgramOption{tea.WithAltScreen(), tea.WithMouseCellMotion(), tea.WithoutSignalHandler()}
	}
	// programs makes each session's console program (as wish's default
	// handler does) and records it, so that Shutdown can make it quit.
	programs := func(sess ssh.Session) *tea.Program {
		m, opts := program(sess)
		p := tea.NewProgram(m, append(opts, bubbletea.MakeOptions(sess)...)...)
		if ss, ok := sess.Context().Value(ctxSession).(*sshSession); ok {
			s.setProgram(ss, p)
		}
		return p
	}

	srv, err := wish.NewServer(
		wish.WithHostKeyPEM(hostPEM),
		wish.WithPublicKeyAuth(authKey),
		wish.WithIdleTimeout(cfg.IdleTimeout),
		// A real PTY: with an emulated one, wish's background-colour query
		// blocks until the client types (a client that does not answer
		// OSC 11 would see nothing); on a PTY it times out after 2s.
		ssh.AllocatePty(),
		wish.WithMiddleware(wrecover.MiddlewareWithLogger(logger,
			closeModel,
			// As bubbletea.Middleware, which uses termenv.Ascii too.
			bubbletea.MiddlewareWithProgramHandler(programs, termenv.Ascii),
			activeterm.Middleware(),
			noPTY,
			limit,
			keyCheck,
			logging.MiddlewareWithLogger(logger),
		), track),
	)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", sshListenAddr(cfg.Addr))
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
	return s, nil
}

// ptyOutput is where a session's terminal output goes: the PTY when the
// server allocated one (so that it follows what the console wrote there),
// else the channel.
func ptyOutput(sess ssh.Session) io.Writer {
	if pty, _, ok := sess.Pty(); ok && !sess.EmulatedPty() && pty.Slave != nil {
		return pty.Slave
	}
	return sess
}

// drainPTY waits, at most timeout, until the server has read everything
// written to the session's PTY, then a moment more for the last read to
// be written to the channel. A client that is gone reads nothing more:
// then it returns at once.
func drainPTY(sess ssh.Session, timeout time.Duration) {
	pty, _, ok := sess.Pty()
	if !ok || sess.EmulatedPty() || pty.Master == nil {
		return
	}
	// SyscallConn, not Fd: Fd would switch the master, which the server
	// is reading, to blocking mode.
	rc, err := pty.Master.SyscallConn()
	if err != nil {
		return
	}
	gone := sess.Context().Done()
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); {
		n := 0
		if cerr := rc.Control(func(fd uintptr) { n, err = unix.IoctlGetInt(int(fd), unix.TIOCINQ) }); cerr != nil || err != nil || n == 0 {
			break
		}
		select {
		case <-gone:
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
	select {
	case <-gone:
	case <-time.After(20 * time.Millisecond):
	}
}

// themeWithRenderer binds every style of a theme to a session's renderer,
// so colours follow the client's terminal.
func themeWithRenderer(th themes.Theme, r *lipgloss.Renderer) themes.Theme {
	v := reflect.ValueOf(&th).Elem()
	st := reflect.TypeOf(lipgloss.Style{})
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		if f.Type() == st && f.CanSet() {
			f.Set(reflect.ValueOf(f.Interface().(lipgloss.Style).Renderer(r)))
		}
	}
	return th
}

// sshStatus is the one-screen status of a session without a terminal.
func sshStatus(e *engine.Engine) string {
	var b strings.Builder
	fmt.Fprintf(&b, "warden %s on %s\n\n", version, e.DataDir())
	reqs, err := e.Requests(engine.RequestFilter{})
	if err != nil {
		fmt.Fprintf(&b, "pending requests: error: %v\n", err)
	} else {
		fmt.Fprintf(&b, "Pending requests: %d\n", len(reqs))
		for _, r := range reqs {
			fmt.Fprintf(&b, "  #%-4d %-24s %s/%s run %s\n", r.ID, r.Operation, r.Requester.Module, r.Requester.Hook, r.Requester.Run)
		}
	}
	runs, err := e.Runs(200)
	if err != nil {
		fmt.Fprintf(&b, "\nrunning hooks: error: %v\n", err)
		return b.String()
	}
	var running []engine.RunRecord
	for _, r := range runs {
		if r.Status == engine.RunRunning {
			running = append(running, r)
		}
	}
	fmt.Fprintf(&b, "\nRunning hooks: %d\n", len(running))
	for _, r := range running {
		fmt.Fprintf(&b, "  %s/%s run %s by %s since %s\n", r.Module, r.Hook, r.ID, r.Actor, r.Started.Format(time.RFC3339))
	}
	return b.String()
}

func roleName(r engine.Role) string {
	if r == engine.RoleOperator {
		return "operator"
	}
	return "viewer"
}

// sshHostKey returns the host key PEM at <data>/ssh_host_ed25519, creating
// it once (exclusively). A key file that is not a regular file of ours,
// mode 0600, with one link, is refused.
func sshHostKey(dataDir string) ([]byte, error) {
	path := filepath.Join(dataDir, sshHostKeyName)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	switch {
	case err == nil:
		_, priv, gerr := ed25519.GenerateKey(rand.Reader)
		if gerr != nil {
			f.Close()
			os.Remove(path)
			return nil, gerr
		}
		blk, merr := gossh.MarshalPrivateKey(priv, "warden ssh host key")
		if merr != nil {
			f.Close()
			os.Remove(path)
			return nil, merr
		}
		data := pem.EncodeToMemory(blk)
		if _, werr := f.Write(data); werr != nil {
			f.Close()
			os.Remove(path)
			return nil, fmt.Errorf("host key: %w", werr)
		}
		if cerr := f.Close(); cerr != nil {
			os.Remove(path)
			return nil, fmt.Errorf("host key: %w", cerr)
		}
	case errors.Is(err, os.ErrExist):
	default:
		return nil, fmt.Errorf("host key: %w", err)
	}
	f, err = os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("host key %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("host key %s: %w", path, err)
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("host key %s is not a regular file; refusing it", path)
	case fi.Mode().Perm() != 0o600:
		return nil, fmt.Errorf("host key %s has mode %04o, want 0600; refusing it", path, fi.Mode().Perm())
	case st == nil || int(st.Uid) != os.Geteuid():
		return nil, fmt.Errorf("host key %s is not owned by uid %d; refusing it", path, os.Geteuid())
	case st.Nlink != 1:
		return nil, fmt.Errorf("host key %s has %d links, want 1; refusing it", path, st.Nlink)
	}
	data, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return nil, fmt.Errorf("host key %s: %w", path, err)
	}
	if _, err := gossh.ParsePrivateKey(data); err != nil {
		return nil, fmt.Errorf("host key %s: %w", path, err)
	}
	return data, nil
}

// operatorEntry is one key of the operators file.
type operatorEntry struct {
	key  gossh.PublicKey
	role engine.Role
	name string
	line int
}

// parseOperators reads an operators file: authorized_keys lines prefixed
// by a role (`operator ssh-ed25519 AAAA... name` or `viewer ...`). Blank
// lines and # comments are skipped; a malformed line is reported with its
// number and skipped.
func parseOperators(r io.Reader, path string) (entries []operatorEntry, problems []string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		bad := func(format string, a ...any) {
			problems = append(problems, fmt.Sprintf("operators file %s: line %d: %s (skipped)", path, n, fmt.Sprintf(format, a...)))
		}
		word, rest := line, ""
		if i := strings.IndexAny(line, " \t"); i >= 0 {
			word, rest = line[:i], strings.TrimSpace(line[i+1:])
		}
		var role engine.Role
		switch word {
		case "operator":
			role = engine.RoleOperator
		case "viewer":
			role = engine.RoleViewer
		default:
			bad("want a role (operator or viewer) first, got %q", word)
			continue
		}
		key, comment, opts, tail, err := gossh.ParseAuthorizedKey([]byte(rest))
		switch {
		case err != nil:
			bad("%v", err)
			continue
		case len(opts) > 0:
			bad("key options (%s) are not supported", strings.Join(opts, ","))
			continue
		case len(strings.TrimSpace(string(tail))) > 0:
			bad("more than one key on the line")
			continue
		}
		entries = append(entries, operatorEntry{key: key, role: role, name: comment, line: n})
	}
	if err := sc.Err(); err != nil {
		problems = append(problems, fmt.Sprintf("operators file %s: line %d: %v", path, n+1, err))
	}
	return entries, problems
}

// checkOperatorsFile returns the problems of an operators file (for
// `warden doctor`): nil when every line is good.
func checkOperatorsFile(path string) []string {
	f, err := os.Open(path)
	if err != nil {
		return []string{fmt.Sprintf("operators file: %v", err)}
	}
	defer f.Close()
	_, problems := parseOperators(f, path)
	return problems
}

// operatorsFile is the operators file, re-read when it changes (its size,
// mtime or inode, looked at on each auth attempt).
type operatorsFile struct {
	path string
	logf func(format string, a ...any)
	// e learns each key's role on every (re-)read; a key gone from the
	// file is forgotten (a viewer again).
	e *engine.Engine

	mu      sync.Mutex
	stamp   [4]int64
	loaded  bool
	entries []operatorEntry
}

func (o *operatorsFile) refresh() {
	o.mu.Lock()
	defer o.mu.Unlock()
	fi, err := os.Stat(o.path)
	if err != nil {
		if o.loaded || o.entries != nil {
			o.logf("operators file: %v; refusing every key until it is back", err)
		}
		o.setRoles(nil)
		o.entries, o.loaded, o.stamp = nil, false, [4]int64{}
		return
	}
	stamp := [4]int64{fi.Size(), fi.ModTime().UnixNano(), 0, 0}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		stamp[2], stamp[3] = int64(st.Ino), st.Ctim.Nsec+st.Ctim.Sec*1e9
	}
	if o.loaded && stamp == o.stamp {
		return
	}
	f, err := os.Open(o.path)
	if err != nil {
		o.logf("operators file: %v", err)
		o.setRoles(nil)
		o.entries, o.loaded = nil, false
		return
	}
	defer f.Close()
	entries, problems := parseOperators(f, o.path)
	for _, p := range problems {
		o.logf("%s", p)
	}
	if o.loaded {
		o.logf("operators file %s re-read: %d keys", o.path, len(entries))
	}
	o.setRoles(entries)
	o.entries, o.loaded, o.stamp = entries, true, stamp
}

// sshActor is the actor of a key: "ssh:SHA256:...".
func sshActor(key gossh.PublicKey) engine.Actor {
	return engine.Actor("ssh:" + gossh.FingerprintSHA256(key))
}

// setRoles tells the engine the roles of a fresh read (o.mu held).
func (o *operatorsFile) setRoles(entries []operatorEntry) {
	if o.e == nil {
		return
	}
	now := map[engine.Actor]bool{}
	for _, en := range entries {
		a := sshActor(en.key)
		if now[a] {
			continue // the first line of a key wins, as in lookup
		}
		now[a] = true
		o.e.SetRole(a, en.role)
	}
	for _, en := range o.entries {
		if a := sshActor(en.key); !now[a] {
			o.e.ForgetRole(a)
		}
	}
}

// lookup finds a key's role in the file as it is now.
func (o *operatorsFile) lookup(key gossh.PublicKey) (engine.Role, bool) {
	o.refresh()
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, en := range o.entries {
		if ssh.KeysEqual(key, en.key) {
			return en.role, true
		}
	}
	var zero engine.Role
	return zero, false
}
