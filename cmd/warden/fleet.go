package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/goccy/go-yaml/ast"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/wardenhq/warden/cmd/serve/fleethost"
	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/engine/fleet"
)

// fleetFlags are how a fleet member connects (every `warden fleet` verb).
type fleetFlags struct {
	url, creds, ca, domain, name, role string
}

func (f *fleetFlags) bind(c *cobra.Command) {
	c.PersistentFlags().StringVar(&f.url, "fleet", "", "the fleet's NATS URL, nats://HOST:4222 or tls://HOST:4222 (default $WARDEN_FLEET)")
	c.PersistentFlags().StringVar(&f.creds, "fleet-creds", "", "your fleet credentials: a NATS creds file, an nkey seed or user:password (default $WARDEN_FLEET_CREDS)")
	c.PersistentFlags().StringVar(&f.ca, "fleet-ca", "", "PEM file of a private CA that signed the fleet server's certificate (default $WARDEN_FLEET_CA)")
	c.PersistentFlags().StringVar(&f.domain, "fleet-domain", "", "the JetStream domain of the fleet's stream, for leaf nodes with JetStream of their own (default $WARDEN_FLEET_DOMAIN)")
	c.PersistentFlags().StringVar(&f.name, "name", "", "your fleet name (default: the user of user:password credentials, or the name in a NATS creds file)")
	c.PersistentFlags().StringVar(&f.role, "role", fleet.RoleOperator, "the role your credentials carry: operator (decides) or viewer (watches)")
}

func (f *fleetFlags) dial() (*fleet.Client, error) {
	if f.url == "" {
		f.url = os.Getenv("WARDEN_FLEET")
	}
	if f.creds == "" {
		f.creds = os.Getenv("WARDEN_FLEET_CREDS")
	}
	if f.url == "" {
		return nil, usageError{errors.New("no fleet: give --fleet nats://HOST:4222 (or set WARDEN_FLEET)")}
	}
	if f.creds == "" {
		return nil, usageError{errors.New("no fleet credentials: give --fleet-creds FILE (or set WARDEN_FLEET_CREDS)")}
	}
	if f.ca == "" {
		f.ca = os.Getenv("WARDEN_FLEET_CA")
	}
	creds, err := fleet.LoadCreds(f.creds)
	if err != nil {
		return nil, err
	}
	creds.CA = f.ca
	if f.domain == "" {
		f.domain = os.Getenv("WARDEN_FLEET_DOMAIN")
	}
	if f.domain != "" && !fleet.ValidName(f.domain) {
		return nil, usageError{fmt.Errorf("--fleet-domain %q: one NATS subject token of letters, digits, '-' and '_'", f.domain)}
	}
	creds.Domain = f.domain
	return fleet.Dial(f.url, creds, f.name, f.role)
}

func (a *app) fleetCommand() *cobra.Command {
	var ff fleetFlags
	c := &cobra.Command{
		Use:   "fleet",
		Short: "Many hosts: one request queue, host status and witnessed audit over NATS JetStream",
		Long: `fleet connects to the fleet's NATS server with your credentials. Hosts
join with ` + "`warden serve --fleet URL --fleet-creds FILE --fleet-host NAME`" + `; each keeps
its own store and receipt chain, and publishes its requests, runs and signed
checkpoints of its chain to the fleet.

An operator's decision goes to the host, whose engine applies it with its
usual checks and records it as fleet:<operator>. Who you are and your role
are what your credentials allow the server to carry, not what you claim:
a viewer's decision reaches the host and is refused and recorded there.

With no verb it opens the fleet console: 1 Hosts, 2 Requests (one queue
across hosts, answered with y, n and a as locally), 3 Runs. --fleet,
--fleet-creds and --fleet-ca default to $WARDEN_FLEET, $WARDEN_FLEET_CREDS
and $WARDEN_FLEET_CA.`,
		Example: `  warden fleet                              # the console
  warden fleet init                         # once, with admin credentials
  warden fleet hosts
  warden fleet requests
  warden fleet approve hostb 3
  warden fleet deny hostb 4 --reason "not on a Friday"
  warden fleet verify`,
	}
	ff.bind(c)
	with := func(fn func(context.Context, *fleet.Client) error) error {
		cl, err := ff.dial()
		if err != nil {
			return err
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return fn(ctx, cl)
	}
	// withView is with, over the fleet's last 24 h (every checkpoint
	// with allCheckpoints, else each host's newest).
	withView := func(allCheckpoints bool, fn func(context.Context, *fleet.Client, *fleet.View) error) error {
		return with(func(ctx context.Context, cl *fleet.Client) error {
			v, err := cl.Load(ctx, allCheckpoints)
			if err != nil {
				return err
			}
			return fn(ctx, cl, v)
		})
	}

	var maxBytes int64
	var replicas int
	initCmd := &cobra.Command{
		Use:   "init",
		Short: "Create the fleet's stream and buckets (admin credentials)",
		Args:  args(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error {
			return with(func(ctx context.Context, cl *fleet.Client) error {
				if err := cl.Init(ctx, fleet.InitOptions{MaxBytes: maxBytes, Replicas: replicas}); err != nil {
					return err
				}
				if a.json {
					return a.emitJSON(map[string]any{"stream": fleet.StreamName, "buckets": []string{fleet.HostsBucket, fleet.KeysBucket}})
				}
				a.printf("fleet ready: stream %s, buckets %s and %s\n", fleet.StreamName, fleet.HostsBucket, fleet.KeysBucket)
				return nil
			})
		},
	}

	initCmd.Flags().IntVar(&replicas, "replicas", 1, "copies of the stream and buckets: 1 on one server, 3 on a cluster of 3")
	initCmd.Flags().Int64Var(&maxBytes, "max-bytes", fleet.StreamMaxBytes, "the stream's size limit in bytes (oldest events go first; see the README's \"Many hosts\")")

	hosts := &cobra.Command{
		Use:   "hosts",
		Short: "Every host: up or down, last heartbeat, running hooks, pending requests, last checkpoint",
		Args:  args(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error {
			return withView(false, func(ctx context.Context, cl *fleet.Client, v *fleet.View) error {
				hs, err := cl.Hosts(ctx, v)
				if err != nil {
					return err
				}
				return a.fleetListing(map[string]any{"hosts": nonNil(hs)}, len(hs),
					"no host has joined yet (on a host: `warden serve --fleet URL --fleet-creds FILE --fleet-host NAME`)",
					"HOST\tSTATE\tHEARTBEAT\tRUNNING\tPENDING\tCHECKPOINT", func(i int) string {
						h := hs[i]
						state, beat, running, cp := "down", "never", "-", "-"
						if h.Up {
							state = "up"
						}
						if hb := h.Heartbeat; hb != nil {
							beat = ago(hb.At) + " (v" + safe(hb.Version) + ")"
							running = strconv.Itoa(hb.Running)
						}
						if h.LastCheckpoint != nil {
							cp = fmt.Sprintf("seq %d, %s", h.LastCheckpoint.Seq, ago(h.LastCheckpoint.At))
						}
						return fmt.Sprintf("%s\t%s\t%s\t%s\t%d\t%s", safe(h.Host), state, beat, running, h.Pending, cp)
					})
			})
		},
	}

	var all bool
	requests := &cobra.Command{
		Use:   "requests",
		Short: "One queue across hosts: pending requests first (oldest first)",
		Args:  args(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error {
			return withView(false, func(_ context.Context, _ *fleet.Client, v *fleet.View) error {
				now := time.Now()
				rs := v.Requests(all, now)
				return a.fleetListing(map[string]any{"requests": nonNil(rs), "duplicates": v.Duplicates()}, len(rs),
					"no pending request in the fleet (--all shows the decided ones)", "HOST\tID\tSTATE\tFROM\tASKS", func(i int) string {
						r := rs[i]
						return fmt.Sprintf("%s\t%d\t%s\t%s\t%s", safe(r.Host), r.Request.ID, safe(requestState(r, now)),
							safe(r.Request.Requester.Module+"/"+r.Request.Requester.Hook), safe(engine.RequestSummary(r.Request)))
					})
			})
		},
	}
	requests.Flags().BoolVar(&all, "all", false, "also list decided requests")

	runs := &cobra.Command{
		Use:   "runs",
		Short: "Run summaries across hosts, newest first",
		Args:  args(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error {
			return withView(false, func(_ context.Context, _ *fleet.Client, v *fleet.View) error {
				rs := v.Runs(100)
				return a.fleetListing(map[string]any{"runs": nonNil(rs)}, len(rs), "no runs in the fleet yet", "HOST\tRUN\tHOOK\tSTATUS\tSTARTED", func(i int) string {
					r := rs[i]
					return fmt.Sprintf("%s\t%s\t%s\t%s\t%s", safe(r.Host), safe(r.Run.ID), safe(r.Run.Module+"/"+r.Run.Hook), safe(r.Run.Status), ago(r.Run.Started))
				})
			})
		},
	}

	decide := func(verdict string) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, argv []string) error {
			id, err := strconv.ParseUint(argv[1], 10, 64)
			if err != nil || id == 0 {
				return usageError{fmt.Errorf("request id %q: want a positive number (see `warden fleet requests`)", argv[1])}
			}
			reason, _ := cmd.Flags().GetString("reason")
			if verdict == engine.ApproveOnce {
				if always, _ := cmd.Flags().GetBool("always"); always {
					verdict = engine.ApproveAlways
				}
			}
			return with(func(ctx context.Context, cl *fleet.Client) error {
				r, err := cl.Decide(ctx, argv[0], fleet.Decision{Request: id, Verdict: verdict, Reason: reason})
				if err != nil {
					return err
				}
				if a.json {
					if err := a.emitJSON(r); err != nil {
						return err
					}
					if r.Code != fleet.CodeOK {
						return &exitError{code: 1}
					}
					return nil
				}
				if r.Code != fleet.CodeOK {
					return errors.New(r.Message)
				}
				a.printf("%s\n", safe(r.Message))
				return nil
			})
		}
	}
	approve := &cobra.Command{
		Use:     "approve HOST ID [--always] [--reason TEXT]",
		Short:   "Approve a request on a host (once; --always adds an exact rule there)",
		Example: "  warden fleet approve hostb 3",
		Args:    args(cobra.ExactArgs(2)),
		RunE:    decide(engine.ApproveOnce),
	}
	approve.Flags().Bool("always", false, "approve always: the host adds an exact rule to the subject's policy")
	approve.Flags().String("reason", "", "why (recorded on the host)")
	deny := &cobra.Command{
		Use:     "deny HOST ID --reason TEXT",
		Short:   "Deny a request on a host; the reason reaches the hook",
		Example: `  warden fleet deny hostb 4 --reason "not during the freeze"`,
		Args:    args(cobra.ExactArgs(2)),
		RunE:    decide(engine.Deny),
	}
	deny.Flags().String("reason", "", "why (reaches the hook; recorded on the host)")

	var fullVerify bool
	verify := &cobra.Command{
		Use:   "verify [HOST]",
		Short: "Ask each host for its chain's hashes at every witnessed checkpoint and compare",
		Long: `verify reads every host's signed checkpoints from the fleet, checks each
signature against the key pinned at the host's first join, and asks the host
(over its fleet subject) for its chain's hashes at those seqs, recomputed
from its receipts. A mismatch names the host and the first bad checkpoint.
A host that does not answer is UNVERIFIED, never reported as fine. Exit 1
unless every host verified.

Like ` + "`receipts verify`" + `, it starts from the newest checkpoint of each host
that an earlier verify (yours, kept in <data-dir>/fleet/verified.json)
found to match, so the host recomputes only what was added since; a
rewrite before that checkpoint is then not seen. --full checks every host
from its first receipt again.`,
		Example: `  warden fleet verify           # each host, from the checkpoint verified last
  warden fleet verify hostb --full`,
		Args: args(cobra.MaximumNArgs(1)),
		RunE: func(_ *cobra.Command, argv []string) error {
			only := ""
			if len(argv) == 1 {
				only = argv[0]
			}
			dir, err := engine.ResolveDataDir(a.dataDir)
			if err != nil {
				return err
			}
			anchors := fleet.LoadAnchors(filepath.Join(dir, "fleet", fleet.AnchorsFile))
			return withView(true, func(ctx context.Context, cl *fleet.Client, v *fleet.View) error {
				res, err := cl.Verify(ctx, v, fleet.VerifyOptions{Only: only, Full: fullVerify, From: anchors.For(ff.url)})
				if err != nil {
					return err
				}
				for _, r := range res {
					if r.Status == "verified" && r.Anchor != nil {
						anchors.Set(ff.url, r.Host, *r.Anchor)
					}
				}
				if err := anchors.Save(); err != nil {
					fmt.Fprintf(a.stderr, "warden: %v; the next verify checks from seq 1\n", err)
				}
				bad := 0
				for _, r := range res {
					if r.Status != "verified" {
						bad++
					}
				}
				if a.json {
					if err := a.emitJSON(map[string]any{"hosts": nonNil(res), "ok": bad == 0}); err != nil {
						return err
					}
				} else {
					for _, r := range res {
						a.printf("%-10s %s\n", strings.ToUpper(r.Status), safe(r.Message))
					}
					if len(res) == 0 {
						a.printf("no host has published a checkpoint yet\n")
					}
				}
				if bad > 0 {
					return &exitError{code: 1}
				}
				return nil
			})
		},
	}

	verify.Flags().BoolVar(&fullVerify, "full", false, "check every host's chain from its first receipt, not from the checkpoint verified last")

	forget := &cobra.Command{
		Use:   "forget HOST",
		Short: "Remove a host's pinned fleet key, so its next join pins a new one (a rebuilt host; admin credentials)",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(_ *cobra.Command, argv []string) error {
			return with(func(ctx context.Context, cl *fleet.Client) error {
				if err := cl.Forget(ctx, argv[0]); err != nil {
					return err
				}
				if a.json {
					return a.emitJSON(map[string]any{"forgot": argv[0]})
				}
				a.printf("host %s's fleet key is no longer pinned: its next join pins the key it has then\n", safe(argv[0]))
				return nil
			})
		},
	}
	c.AddCommand(initCmd, hosts, requests, runs, approve, deny, verify, forget)
	if fleetConsole != nil {
		c.RunE = func(*cobra.Command, []string) error {
			if err := a.needTerminal(); err != nil {
				return err
			}
			cl, err := ff.dial()
			if err != nil {
				return err
			}
			defer cl.Close()
			return fleetConsole(a, cl)
		}
	}
	return c
}

// needTerminal refuses the console without a terminal on stdout.
func (a *app) needTerminal() error {
	if f, ok := a.stdout.(interface{ Fd() uintptr }); !ok || !term.IsTerminal(int(f.Fd())) {
		return usageError{errors.New("the fleet console needs a terminal; for scripts use `warden fleet hosts|requests|runs --json`")}
	}
	return nil
}

// fleetConsole runs the fleet console (fleet_console.go sets it).
var fleetConsole func(a *app, cl *fleet.Client) error

func requestState(r fleet.FleetRequest, now time.Time) string {
	if d := r.Request.Decision; d != nil {
		return d.Verdict + " by " + d.By
	}
	if !r.Request.Pending(now) {
		return "expired"
	}
	return "pending"
}

func ago(t time.Time) string {
	d := time.Since(t).Round(time.Second)
	if d < 0 {
		d = 0
	}
	return d.String() + " ago"
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// fleetJoin is serve's --fleet, --fleet-creds and --fleet-host.
type fleetJoin struct{ url, creds, host, ca, domain string }

func (f *fleetJoin) bind(c *cobra.Command) {
	c.Flags().StringVar(&f.url, "fleet", "", "join the fleet at this NATS URL (nats://HOST:4222, tls://HOST:4222)")
	c.Flags().StringVar(&f.creds, "fleet-creds", "", "this host's fleet credentials: a NATS creds file, an nkey seed or user:password (0600)")
	c.Flags().StringVar(&f.ca, "fleet-ca", "", "PEM file of a private CA that signed the fleet server's certificate")
	c.Flags().StringVar(&f.host, "fleet-host", "", "this host's name in the fleet (letters, digits, - and _)")
	c.Flags().StringVar(&f.domain, "fleet-domain", "", "the JetStream domain of the fleet's stream (leaf nodes running JetStream of their own)")
}

// or fills what the flags left unset from the config file's fleet:.
func (f fleetJoin) or(cfg fleetJoin) fleetJoin {
	if f.url == "" {
		f.url = cfg.url
	}
	if f.creds == "" {
		f.creds = cfg.creds
	}
	if f.host == "" {
		f.host = cfg.host
	}
	if f.ca == "" {
		f.ca = cfg.ca
	}
	if f.domain == "" {
		f.domain = cfg.domain
	}
	return f
}

// parseFleetSettings decodes config.yaml's fleet: mapping strictly.
func parseFleetSettings(n ast.Node, bad func(line int, key, format string, args ...any) error) (fleetJoin, error) {
	var f fleetJoin
	var values []*ast.MappingValueNode
	switch v := n.(type) {
	case *ast.MappingNode:
		values = v.Values
	case *ast.MappingValueNode:
		values = []*ast.MappingValueNode{v}
	default:
		return f, bad(line(n), "", "want a mapping {url: nats://HOST:4222, creds: /ABS/FILE, host: NAME}, got %s", n.Type())
	}
	absolute := func(what string) func(string) string {
		return func(v string) string {
			if !filepath.IsAbs(v) {
				return "want an absolute path to " + what
			}
			return ""
		}
	}
	name := func(what string) func(string) string {
		return func(v string) string {
			if !fleet.ValidName(v) {
				return "want " + what + "1-64 letters, digits, '-' or '_'"
			}
			return ""
		}
	}
	// Each key of fleet:, what it must be (a problem, "" when fine), and
	// where it goes.
	fields := map[string]struct {
		check func(string) string
		dest  *string
	}{
		"url": {func(v string) string {
			if err := fleet.CheckURL(v); err != nil {
				return err.Error()
			}
			return ""
		}, &f.url},
		"creds":  {absolute("this host's fleet credentials"), &f.creds},
		"ca":     {absolute("the CA's PEM file"), &f.ca},
		"host":   {name(""), &f.host},
		"domain": {name("the JetStream domain: "), &f.domain},
	}
	seen := map[string]bool{}
	for _, mv := range values {
		var kn ast.Node = mv.Key
		if k, ok := kn.(*ast.MappingKeyNode); ok {
			kn = k.Value
		}
		ks, ok := kn.(*ast.StringNode)
		if !ok {
			return f, bad(line(kn), "", "keys must be plain strings")
		}
		if seen[ks.Value] {
			return f, bad(line(kn), ks.Value, "duplicated key")
		}
		seen[ks.Value] = true
		v, ok := mv.Value.(*ast.StringNode)
		if !ok {
			return f, bad(line(kn), ks.Value, "want a string")
		}
		field, ok := fields[ks.Value]
		if !ok {
			return f, bad(line(kn), ks.Value, "unknown key (fleet: knows url, creds, ca, host, domain)")
		}
		if problem := field.check(v.Value); problem != "" {
			return f, bad(line(kn), ks.Value, "%s", problem)
		}
		*field.dest = v.Value
	}
	return f, nil
}

// fleetCheck is doctor's check of the fleet connection.
func fleetCheck(dataDir string, f fleetJoin) engine.Check {
	creds, err := fleet.LoadCreds(f.creds)
	if err != nil {
		return engine.Check{Name: "fleet", Status: "problem", Detail: err.Error(), Fix: "give --fleet-creds FILE (mode 0600)"}
	}
	creds.CA, creds.Domain = f.ca, f.domain
	return fleethost.Probe(dataDir, fleethost.HostOptions{URL: f.url, Creds: creds, Name: f.host})
}

// check says which fleet setting is missing or bad, before anything runs.
func (f fleetJoin) check() error {
	if f.url == "" && f.creds == "" && f.host == "" {
		return nil
	}
	switch {
	case f.url == "":
		return usageError{errors.New("--fleet-creds and --fleet-host need --fleet nats://HOST:4222")}
	case f.creds == "":
		return usageError{errors.New("--fleet needs --fleet-creds FILE (this host's NATS credentials)")}
	case f.host == "":
		return usageError{errors.New("--fleet needs --fleet-host NAME (this host's name in the fleet)")}
	case !fleet.ValidName(f.host):
		return usageError{fmt.Errorf("--fleet-host %q: use 1-64 letters, digits, '-' or '_'", f.host)}
	case f.domain != "" && !fleet.ValidName(f.domain):
		return usageError{fmt.Errorf("--fleet-domain %q: one NATS subject token of letters, digits, '-' and '_'", f.domain)}
	}
	if err := fleet.CheckURL(f.url); err != nil {
		return usageError{fmt.Errorf("--fleet: %v", err)}
	}
	return nil
}

// joinFleet joins serve's engine to the fleet; nil when not asked to. A
// bad fleet config is an error and serve does not start.
func (a *app) joinFleet(e *engine.Engine, f fleetJoin) (*fleethost.Host, error) {
	if f.url == "" {
		return nil, nil
	}
	creds, err := fleet.LoadCreds(f.creds)
	if err != nil {
		return nil, err
	}
	creds.CA, creds.Domain = f.ca, f.domain
	logf := func(format string, args ...any) { fmt.Fprintln(a.stderr, safe(fmt.Sprintf(format, args...))) }
	h, err := fleethost.Join(e, fleethost.HostOptions{URL: f.url, Creds: creds, Name: f.host, Version: version, Logf: logf})
	if err != nil {
		return nil, fmt.Errorf("joining the fleet: %w", err)
	}
	return h, nil
}

// fleetListing prints a fleet verb's answer: obj as JSON with --json;
// else empty when there are no rows, or a table of header and n rows
// (tab-separated cells, already made safe for the terminal).
func (a *app) fleetListing(obj map[string]any, n int, empty, header string, row func(i int) string) error {
	if a.json {
		return a.emitJSON(obj)
	}
	if n == 0 {
		a.printf("%s\n", empty)
		return nil
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for i := range n {
		fmt.Fprintln(tw, row(i))
	}
	return tw.Flush()
}
