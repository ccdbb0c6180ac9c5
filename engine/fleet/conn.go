package fleet

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
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
	// CA is a PEM file of the CA that signed the server's certificate
	// (a private CA); setting it makes the connection TLS.
	CA string
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

// connect dials the fleet. name is the connection name the server shows.
// errs receives asynchronous errors (permission violations) when set.
func connect(server string, creds Creds, name string, retry bool, errs func(error), extra ...nats.Option) (*nats.Conn, error) {
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
		opts = append(opts, nats.MaxReconnects(-1), nats.ReconnectWait(500*time.Millisecond), nats.RetryOnFailedConnect(true),
			nats.ReconnectBufSize(-1))
	}
	if errs != nil {
		opts = append(opts, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs(err) }))
	}
	nc, err := nats.Connect(server, append(opts, extra...)...)
	if err != nil {
		return nil, explainConnect(server, err)
	}
	return nc, nil
}

func explainConnect(server string, err error) error {
	switch {
	case errors.Is(err, nats.ErrAuthorization) || strings.Contains(strings.ToLower(err.Error()), "authorization"):
		return fmt.Errorf("the fleet at %s refused these credentials (%v): check --fleet-creds", server, err)
	case errors.Is(err, nats.ErrNoServers):
		return fmt.Errorf("no fleet server answers at %s (%v): is nats-server running with -js?", server, err)
	}
	return fmt.Errorf("fleet %s: %w", server, err)
}

// credsName guesses a member name from a creds file: the user of
// user:password credentials.
func (c Creds) name() string { return c.User }
