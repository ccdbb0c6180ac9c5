package sshconsole

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"

	"github.com/charmbracelet/ssh"
	gossh "golang.org/x/crypto/ssh"

	"github.com/wardenhq/warden/engine"
)

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

// CheckOperatorsFile returns the problems of an operators file (for
// `warden doctor`): nil when every line is good.
func CheckOperatorsFile(path string) []string {
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
	e engine.Host

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

// Actor is the actor of a key: "ssh:SHA256:...".
func Actor(key gossh.PublicKey) engine.Actor {
	return engine.Actor("ssh:" + gossh.FingerprintSHA256(key))
}

// setRoles tells the engine the roles of a fresh read (o.mu held).
func (o *operatorsFile) setRoles(entries []operatorEntry) {
	if o.e == nil {
		return
	}
	now := map[engine.Actor]bool{}
	for _, en := range entries {
		a := Actor(en.key)
		if now[a] {
			continue // the first line of a key wins, as in lookup
		}
		now[a] = true
		o.e.SetRole(a, en.role)
	}
	for _, en := range o.entries {
		if a := Actor(en.key); !now[a] {
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

// name is the comment the operators file gives an actor's key ("" when
// the file does not name it), for the console to show next to the key's
// short fingerprint. It does not re-read the file: a session calls it on
// every draw of an actor.
func (o *operatorsFile) name(actor engine.Actor) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, en := range o.entries {
		if Actor(en.key) == actor {
			return en.name
		}
	}
	return ""
}
