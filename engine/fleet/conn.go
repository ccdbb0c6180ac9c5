package fleet

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

// Creds are a fleet member's NATS credentials, read from a file that is
// one of:
//
//   - a NATS user credentials file (a JWT and an nkey seed, as `nsc`
//     writes; the name is the file's "name" hint or "--name");
//   - an nkey seed (a line starting "SU"), for a server config with
//     `nkey:` users;
//   - "user:password" on one line (only over TLS, or on loopback).
//
// The file must not be readable by others: it holds a secret.
type Creds struct {
	File string
	// User is the NATS user name for user:password credentials; it is
	// also the member's fleet name when none is given.
	User     string
	password string
	seed     []byte
	jwt      bool
	// hint is the user's name in a creds file's JWT (its "name"), the
	// member's fleet name when none is given.
	hint string
	// CA is a PEM file of the CA that signed the server's certificate
	// (a private CA); setting it makes the connection TLS.
	CA string
	// Domain is the JetStream domain that holds the fleet's stream and
	// buckets (a leaf-node setup whose servers run JetStream of their
	// own: the hub's `jetstream { domain: hub }`); "" for none. Like CA,
	// a connection setting that travels with the credentials.
	Domain string
}

// NewJetStream is the JetStream API of nc, in the fleet's domain.
func (c Creds) NewJetStream(nc *nats.Conn) (jetstream.JetStream, error) {
	if c.Domain == "" {
		return jetstream.New(nc)
	}
	return jetstream.NewWithDomain(nc, c.Domain)
}

// JSAPI is the JetStream API's subject prefix in the fleet's domain
// ($JS.API, or $JS.<domain>.API): what raw API requests are sent on, and
// what a member's permissions name.
func (c Creds) JSAPI() string {
	if c.Domain == "" {
		return "$JS.API"
	}
	return "$JS." + c.Domain + ".API"
}

// maxCredsSize bounds a creds file.
const maxCredsSize = 16 << 10

// LoadCreds reads a creds file.
func LoadCreds(path string) (Creds, error) {
	c := Creds{File: path}
	fi, err := os.Stat(path)
	if err != nil {
		return c, fmt.Errorf("fleet credentials: %v (give a NATS creds file, an nkey seed file or a user:password file with --fleet-creds)", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return c, fmt.Errorf("fleet credentials %s are readable by others (mode %04o): they hold a secret; run `chmod 600 %s`", path, fi.Mode().Perm(), path)
	}
	if fi.Size() > maxCredsSize {
		return c, fmt.Errorf("fleet credentials %s: %d bytes is too large for a credentials file", path, fi.Size())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return c, fmt.Errorf("fleet credentials: %v", err)
	}
	text := strings.TrimSpace(string(b))
	switch {
	case strings.Contains(text, "BEGIN NATS USER JWT"):
		c.jwt = true
		if err := c.checkUserJWT(b); err != nil {
			return c, err
		}
	case strings.HasPrefix(text, "SU") && !strings.ContainsAny(text, " :\n"):
		c.seed = []byte(text)
	default:
		line, _, _ := strings.Cut(text, "\n")
		user, pass, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || user == "" || pass == "" {
			return c, fmt.Errorf("fleet credentials %s: not a NATS creds file, an nkey seed (SU...) or a user:password line", path)
		}
		c.User, c.password = user, pass
	}
	return c, nil
}

func (c Creds) options(server string) ([]nats.Option, error) {
	if c.Domain != "" && !ValidName(c.Domain) {
		return nil, fmt.Errorf("bad JetStream domain %q: one NATS subject token of letters, digits, '-' and '_' (the `domain` of the fleet server's jetstream block)", c.Domain)
	}
	var tlsOpts []nats.Option
	if c.CA != "" {
		if _, err := os.Stat(c.CA); err != nil {
			return nil, fmt.Errorf("fleet CA: %v (give the PEM file of the CA that signed the server's certificate)", err)
		}
		tlsOpts = append(tlsOpts, nats.RootCAs(c.CA))
	}
	opts, err := c.authOptions(server)
	return append(opts, tlsOpts...), err
}

func (c Creds) authOptions(server string) ([]nats.Option, error) {
	switch {
	case c.jwt:
		return []nats.Option{nats.UserCredentials(c.File)}, nil
	case c.seed != nil:
		opt, err := nats.NkeyOptionFromSeed(c.File)
		if err != nil {
			return nil, fmt.Errorf("fleet credentials %s: %v", c.File, err)
		}
		return []nats.Option{opt}, nil
	case c.User != "":
		if c.CA != "" {
			return []nats.Option{nats.UserInfo(c.User, c.password)}, nil // TLS
		}
		if err := plainOK(server); err != nil {
			return nil, err
		}
		return []nats.Option{nats.UserInfo(c.User, c.password)}, nil
	}
	return nil, errors.New("no fleet credentials: give --fleet-creds FILE")
}

// plainOK refuses a password over plain text off loopback.
func plainOK(server string) error {
	for _, s := range strings.Split(server, ",") {
		u, err := url.Parse(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("fleet URL %q: %v", s, err)
		}
		if u.Scheme == "tls" || u.Scheme == "wss" {
			continue
		}
		host := u.Hostname()
		if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
			continue
		}
		return fmt.Errorf("fleet URL %s is not TLS: a user:password would cross the network in clear; use tls://%s, or nkey credentials", s, u.Host)
	}
	return nil
}

// CheckURL validates a fleet URL list (nats:// or tls://, comma-separated).
func CheckURL(server string) error {
	if server == "" {
		return errors.New("no fleet URL: give --fleet nats://HOST:4222")
	}
	for _, s := range strings.Split(server, ",") {
		u, err := url.Parse(strings.TrimSpace(s))
		if err != nil || u.Host == "" {
			return fmt.Errorf("bad fleet URL %q: want nats://HOST:4222 or tls://HOST:4222", s)
		}
		switch u.Scheme {
		case "nats", "tls", "ws", "wss":
		default:
			return fmt.Errorf("bad fleet URL %q: scheme %q, want nats or tls", s, u.Scheme)
		}
	}
	return nil
}

// Connect dials the fleet. name is the connection name the server shows.
// errs receives asynchronous errors (permission violations) when set.
func Connect(server string, creds Creds, name string, retry bool, errs func(error), extra ...nats.Option) (*nats.Conn, error) {
	if err := CheckURL(server); err != nil {
		return nil, err
	}
	opts, err := creds.options(server)
	if err != nil {
		return nil, err
	}
	opts = append(opts, nats.Name(name), nats.Timeout(5*time.Second), nats.PingInterval(5*time.Second), nats.MaxPingsOutstanding(2))
	if retry {
		// A host keeps trying for ever, from the first dial on: the
		// fleet being away never stops it.
		// Nor do refused credentials: nats.go gives up after the same
		// auth error twice, but an expired user JWT is renewed by
		// replacing the creds file, which every reconnect reads again.
		opts = append(opts, nats.MaxReconnects(-1), nats.ReconnectWait(500*time.Millisecond), nats.RetryOnFailedConnect(true),
			nats.ReconnectBufSize(-1), nats.IgnoreAuthErrorAbort())
	}
	if errs != nil {
		opts = append(opts, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs(err) }))
	}
	nc, err := nats.Connect(server, append(opts, extra...)...)
	if err != nil {
		return nil, explainConnect(server, creds, err)
	}
	return nc, nil
}

func explainConnect(server string, creds Creds, err error) error {
	switch {
	case creds.jwt && (errors.Is(err, nats.ErrAuthExpired) || strings.Contains(strings.ToLower(err.Error()), "expired")):
		return fmt.Errorf("the fleet at %s refused the credentials in %s as expired (%v); %s", server, creds.File, err, CredsAdvice)
	case creds.jwt && (errors.Is(err, nats.ErrAuthorization) || strings.Contains(strings.ToLower(err.Error()), "authorization")):
		return fmt.Errorf("the fleet at %s refused these credentials (%v): the user JWT in %s is not one this server trusts "+
			"(issued by another operator or account, or revoked); %s", server, err, creds.File, CredsAdvice)
	case errors.Is(err, nats.ErrAuthorization) || strings.Contains(strings.ToLower(err.Error()), "authorization"):
		return fmt.Errorf("the fleet at %s refused these credentials (%v): check --fleet-creds", server, err)
	case errors.Is(err, nats.ErrNoServers):
		return fmt.Errorf("no fleet server answers at %s (%v): is nats-server running with -js?", server, err)
	}
	return fmt.Errorf("fleet %s: %w", server, err)
}

// name guesses a member name from a creds file: the user of
// user:password credentials, or the name in a creds file's JWT.
func (c Creds) name() string {
	if c.User != "" {
		return c.User
	}
	return c.hint
}

// CredsAdvice is what to do about credentials that will not do.
const CredsAdvice = "ask the fleet's admin for a new creds file (with nsc: `nsc generate creds -a ACCOUNT -n USER`)"

// checkUserJWT reads a NATS creds file's user JWT and seed before they
// are used: a file that cannot log in (cut short, the seed of another
// user, expired, not yet valid) is refused here, saying which, rather
// than as the server's bare "authorization violation". Only the file's
// name and the JWT's public claims ever reach a message, never its seed.
// The JWT's signature is the server's to check (it knows the accounts).
func (c *Creds) checkUserJWT(file []byte) error {
	tok, err := nkeys.ParseDecoratedJWT(file)
	parts := strings.Split(tok, ".")
	if err != nil || len(parts) != 3 {
		return fmt.Errorf("fleet credentials %s: the user JWT in it is malformed; %s", c.File, CredsAdvice)
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	var claims struct {
		Subject   string `json:"sub"`
		Name      string `json:"name"`
		Expires   int64  `json:"exp"`
		NotBefore int64  `json:"nbf"`
		Nats      struct {
			Type string `json:"type"`
		} `json:"nats"`
	}
	if err != nil || json.Unmarshal(payload, &claims) != nil {
		return fmt.Errorf("fleet credentials %s: the user JWT in it is malformed; %s", c.File, CredsAdvice)
	}
	if claims.Nats.Type != "" && claims.Nats.Type != "user" {
		return fmt.Errorf("fleet credentials %s hold a JWT of a NATS %s, not of a user; %s", c.File, printable(claims.Nats.Type), CredsAdvice)
	}
	who := printable(claims.Name)
	if who == "" {
		who = printable(claims.Subject)
	}
	kp, err := nkeys.ParseDecoratedUserNKey(file)
	if err != nil {
		return fmt.Errorf("fleet credentials %s: the JWT of %s comes without its user's nkey seed (the file is cut short, or is a JWT alone); %s", c.File, who, CredsAdvice)
	}
	pub, err := kp.PublicKey()
	kp.Wipe()
	if err != nil || pub != claims.Subject {
		return fmt.Errorf("fleet credentials %s: the seed in it is not the key of the JWT's user %s (the file mixes two users); %s", c.File, who, CredsAdvice)
	}
	now := time.Now()
	if claims.Expires != 0 && now.Unix() >= claims.Expires {
		return fmt.Errorf("fleet credentials %s: the user JWT (user %s) expired at %s; %s", c.File, who, time.Unix(claims.Expires, 0).UTC().Format(time.RFC3339), CredsAdvice)
	}
	if claims.NotBefore != 0 && now.Unix() < claims.NotBefore {
		return fmt.Errorf("fleet credentials %s: the user JWT (user %s) is not valid before %s (check this host's clock)", c.File, who, time.Unix(claims.NotBefore, 0).UTC().Format(time.RFC3339))
	}
	if ValidName(claims.Name) {
		c.hint = claims.Name
	}
	return nil
}

// printable keeps a claim from a file to printable ASCII, at most 64 long:
// it goes into error messages shown on a terminal.
func printable(s string) string {
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= 64 {
			b.WriteString("…")
			break
		}
		if r < 0x20 || r > 0x7e {
			r = '?'
		}
		b.WriteRune(r)
	}
	return b.String()
}
