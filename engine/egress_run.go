package engine

// A run in egress mode (its hook's network is a list of names): the
// engine serves a filtering proxy on <run dir>/egress.sock; inside the
// jail, `warden hook egress-bridge` hands it the listeners on
// 127.0.0.1:3128 and :1080, so the engine accepts the hook's connections
// itself. Every connection is
// decided here, by the module's policy or the operator, and recorded at
// its close as one network.connect receipt.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/wardenhq/warden/engine/egress"
	"github.com/wardenhq/warden/engine/jail"
	"github.com/wardenhq/warden/engine/perms"
	"github.com/wardenhq/warden/storage"
)

// OpConnect is the operation of a network.connect permission request
// (content {"host","port"}), for views above the engine.
const OpConnect = perms.OpConnect

// egressOptions are test-only settings of the proxy. They live in an
// unexported field of Options, so no CLI flag or config file reaches them.
type egressOptions struct {
	// testNames resolve to 127.0.0.1 and, exactly these, skip the address
	// deny list: real TLS servers on loopback stand in for the world.
	testNames map[string]bool
	// maxConns and idle override the proxy's defaults.
	maxConns int
	idle     time.Duration
	// failSetup, when set, fails the run's egress setup after its proxy
	// opened: a fault the real parts cannot be made to show.
	failSetup error
}

// egressRun is one run's proxy and what it has reached.
type egressRun struct {
	e     *Engine
	r     *activeRun
	proxy *egress.Proxy

	mu   sync.Mutex
	seen map[string]bool // "host:port allowed|refused": the stream says each once
	dest []string        // host:port reached, in order
	// refused lists host:port refused, in order, each once (what
	// `warden run --learn` reports).
	refused []string
	// asks counts the permission requests this run opened; past
	// maxEgressAsks a connection the policy does not allow is refused at
	// once, with no request and no receipt, and only counted in quiet.
	asks  int
	quiet int

	// Receipts of closed connections waiting for their shared commit
	// (see writeReceipts).
	rmu     sync.Mutex
	pending []storage.Draft
	rkick   chan struct{} // cap 1: something is pending
	rstop   chan struct{} // closed by close: flush and stop
	rdone   chan struct{} // closed when the writer has flushed and stopped

	// hosts and loopback, for a command run: the names and the host's
	// own loopback ports the operator gave warden run (named).
	hosts    egress.List
	loopback []uint16

	// The policy's network list as last parsed (see parsedList).
	listMu     sync.Mutex
	listParsed bool
	listSrc    []string
	list       egress.List
}

// maxEgressAsks bounds the permission requests one run may open for
// connections its policy does not allow. Each costs three durable
// receipts (request.open, request.decide, network.connect): a hook
// trying name after name would otherwise fill the receipt log as fast as
// the disk takes it.
const maxEgressAsks = 64

// askLimitReason is the refusal past maxEgressAsks.
var askLimitReason = fmt.Sprintf("this run has already asked about %d connections its policy does not allow; warden asks no more for it (add the names to the policy, or run it again)", maxEgressAsks)

// startEgress opens the run's proxy on the run dir's egress socket.
func (e *Engine) startEgress(r *activeRun, runDir string) (_ *egressRun, err error) {
	er := &egressRun{e: e, r: r, seen: map[string]bool{},
		rkick: make(chan struct{}, 1), rstop: make(chan struct{}), rdone: make(chan struct{})}
	opt := e.opts.egress
	cfg := egress.Config{
		Socket:      filepath.Join(runDir, jail.EgressSocketName),
		Decide:      er.decide,
		Check:       er.check,
		Reached:     er.reached,
		OnClose:     er.closed,
		MaxConns:    opt.maxConns,
		IdleTimeout: opt.idle,
	}
	names := opt.testNames
	if c := r.command; c != nil {
		// The names warden run was given are the operator's grant.
		if er.hosts, err = egress.ParseList(c.Hosts); err != nil {
			return nil, err
		}
		er.loopback = c.Loopback
	}
	// The run's own name cache: each answer lives for its DNS TTL.
	cache := egress.NewCache(func(ctx context.Context, host string) ([]netip.Addr, time.Duration, error) {
		return egressResolve(ctx, host)
	})
	cfg.Resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
		if names[host] || (len(er.loopback) > 0 && host == "localhost") {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		}
		return cache.Resolve(ctx, host)
	}
	if len(names) > 0 {
		cfg.Exempt = func(host string) bool { return names[host] }
	}
	p, err := egress.Listen(cfg)
	if err != nil {
		return nil, err
	}
	er.proxy = p
	go er.writeReceipts()
	return er, nil
}

// egressResolve is the host's resolver, with the TTL of its answer (a
// var: tests point names at addresses of their choosing without the
// deny-list exemption).
var egressResolve egress.LookupFunc = egress.LookupTTL

// close ends every connection and waits until their receipts are
// committed: every network.connect receipt of the run comes before its
// hook.end.
func (er *egressRun) close() {
	if er != nil {
		er.proxy.Close() // every connection has handed its receipt to the queue
		close(er.rstop)
		<-er.rdone
	}
}

// receiptDelay is how long a closed connection's receipt may wait for
// others to share its commit. Each commit is an fsync, which on a small
// machine costs as much CPU as the connection itself: a hook opening
// connection after connection would otherwise pay one per connection,
// taken from the very cores its next connection needs. No client waits
// for a receipt (it is written at the connection's close); the run's end
// flushes the queue before hook.end, so a run that ends has them all. An
// engine that dies outright loses at most the receipts of connections
// closed in the last receiptDelay (and those still open, whose receipt
// waits for their close).
const receiptDelay = 10 * time.Millisecond

// queueReceipt hands a closed connection's receipt to the writer.
func (er *egressRun) queueReceipt(d storage.Draft) {
	er.rmu.Lock()
	er.pending = append(er.pending, d)
	er.rmu.Unlock()
	select {
	case er.rkick <- struct{}{}:
	default:
	}
}

// writeReceipts commits the queued receipts, those arriving within
// receiptDelay of each other in one transaction, in the order the
// connections closed; on stop it flushes what is left.
func (er *egressRun) writeReceipts() {
	defer close(er.rdone)
	for {
		select {
		case <-er.rkick:
		case <-er.rstop:
			er.flushReceipts()
			return
		}
		t := time.NewTimer(receiptDelay)
		select {
		case <-t.C:
		case <-er.rstop:
			t.Stop()
			er.flushReceipts()
			return
		}
		er.flushReceipts()
	}
}

func (er *egressRun) flushReceipts() {
	er.rmu.Lock()
	batch := er.pending
	er.pending = nil
	er.rmu.Unlock()
	if len(batch) == 0 {
		return
	}
	if _, err := er.e.store.Update(func(tx *storage.Tx) error {
		for _, d := range batch {
			if _, err := tx.AppendReceipt(d); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		er.r.streamLine(storage.LevelError, fmt.Sprintf("egress: recording %d network.connect receipts failed: %v", len(batch), err))
	}
}

// destinations lists the host:port the run reached, in order.
func (er *egressRun) destinations() []string {
	er.mu.Lock()
	defer er.mu.Unlock()
	return append([]string(nil), er.dest...)
}

// refusedDestinations lists the host:port the run was refused, in order.
func (er *egressRun) refusedDestinations() []string {
	er.mu.Lock()
	defer er.mu.Unlock()
	return append([]string(nil), er.refused...)
}

// unrecorded is how many connections were refused past maxEgressAsks.
func (er *egressRun) unrecorded() int {
	er.mu.Lock()
	defer er.mu.Unlock()
	return er.quiet
}

// decide is the policy's answer for one connection: allowed by the
// module's policy (its network list, network: true, or an exact rule), a
// retry claim, or else a permission request network.connect host:port,
// which holds the connection until the operator decides or it expires.
func (er *egressRun) decide(ctx context.Context, host string, port uint16) egress.Verdict {
	e, r := er.e, er.r
	subject := r.subject()
	op, err := perms.ConnectOp(subject, host, port)
	if err != nil {
		return egress.Verdict{Reason: err.Error()}
	}
	dest := perms.Connect{Host: host, Port: port}.Dest()
	// An operator who names an address (an ip: entry, or approving a
	// connection to an address) names that very address: the deny list
	// does not second-guess it. network: true never opens it.
	literal := egress.IsAddr(host)
	// The common case, a name the policy lists, is a read-only look: no
	// write transaction (and no fsync) on a connection's path. (The proxy
	// asks check first; the policy may have changed since.)
	if v, ok := er.check(host, port); ok {
		return v
	}
	er.mu.Lock()
	over := er.asks >= maxEgressAsks
	if !over {
		er.asks++
	}
	er.mu.Unlock()
	if over {
		return egress.Verdict{Reason: askLimitReason}
	}
	a := e.runAsk(r, op, func(req Request) askWords {
		ask := fmt.Sprintf("Allow %s/%s to connect to %s (request %d)?", r.rec.Module, r.rec.Hook, dest, req.ID)
		if req.Warning != "" {
			r.say(storage.LevelWarn, fmt.Sprintf("request %d: network.connect %s needs a decision (`warden perms show %d`); warning: %s", req.ID, dest, req.ID, req.Warning))
			ask = fmt.Sprintf("Allow %s/%s to connect to %s (request %d)? Warning: %s.", r.rec.Module, r.rec.Hook, dest, req.ID, req.Warning)
		} else {
			r.say(storage.LevelWarn, fmt.Sprintf("request %d: network.connect %s needs a decision (`warden perms show %d`)", req.ID, dest, req.ID))
		}
		list := dest
		if p, _, err := e.Policy(subject); err == nil && len(p.NetworkAllow) > 0 {
			list = strings.Join(append(append([]string{}, p.NetworkAllow...), dest), ",")
		}
		return askWords{prompt: ask,
			noOperator: fmt.Sprintf("network.connect %s is not allowed by the policy of %s, and no operator is attached (no terminal, no console) to decide request %d, so it is denied (add it to the list with `warden perms policy set %s --network '%s' --revision N`)",
				dest, subject, req.ID, subject, list)}
	})
	a.Undeclared = er.undeclared(host, port)
	ans, err := e.gate.ask(ctx, a)
	switch {
	case err != nil:
		return egress.Verdict{Reason: "the engine could not decide: " + err.Error()}
	case ans.refusal != nil:
		return egress.Verdict{Reason: ans.refusal.Message}
	case ans.approved() && ans.req.ID == 0: // a rule, or a retry claim
		by := "rule"
		if strings.Contains(ans.via, "retry claim") {
			by = "approve-once"
		}
		return egress.Verdict{Allow: true, AllowedBy: by, Via: ans.via, Exempt: literal && !strings.Contains(ans.via, "network true")}
	case ans.outcome == outcomeRunEnded:
		if errors.Is(context.Cause(ctx), egress.ErrHungUp) {
			return egress.Verdict{Reason: egress.ErrHungUp.Error()}
		}
		return egress.Verdict{Reason: runEndedWaiting}
	}
	req, d := ans.req, ans.decision
	if ans.approved() {
		return egress.Verdict{Allow: true, AllowedBy: d.Verdict, Exempt: literal,
			Via: fmt.Sprintf("%s by %s (request %d)", d.Verdict, d.By, req.ID)}
	}
	why := d.Reason
	switch {
	case ans.outcome == outcomeExpired:
		why = fmt.Sprintf("request %d expired without a decision", req.ID)
	case ans.outcome == outcomeNoOperator:
		why = fmt.Sprintf("no operator attached to decide request %d; the policy of %s does not list %s", req.ID, subject, dest)
	case why == "":
		why = fmt.Sprintf("denied by %s (request %d)", d.By, req.ID)
	}
	return egress.Verdict{Reason: why, Via: fmt.Sprintf("deny by %s (request %d)", d.By, req.ID)}
}

// check is decide's quick path, for the common case: a connection the
// policy allows (its switch, its list, or an exact rule), answered by a
// read-only look with nothing to wait on, so the proxy need not watch
// the client for a hang-up. The policy is read afresh for every
// connection (a name just removed is refused at once); only the parse of
// its list is kept while the list stays the same. Anything else is left
// to decide (retry claims, the operator).
func (er *egressRun) check(host string, port uint16) (egress.Verdict, bool) {
	if v, ok := er.named(host, port); ok {
		return v, true
	}
	subject := er.r.subject()
	var p storage.PolicyRecord
	if err := er.e.store.View(func(tx *storage.Tx) (err error) {
		p, _, err = perms.Policy(tx, subject)
		return err
	}); err != nil {
		return egress.Verdict{}, false
	}
	l, err := er.parsedList(p.NetworkAllow)
	if err != nil {
		return egress.Verdict{}, false
	}
	ok, via := perms.ListAllows(p, subject, l, host, port)
	if !ok {
		// Rarely, an exact rule: the whole evaluation, same policy read.
		op, err := perms.ConnectOp(subject, host, port)
		if err != nil {
			return egress.Verdict{}, false
		}
		if ok, via = perms.Evaluate(p, op); !ok {
			return egress.Verdict{}, false
		}
	}
	return egress.Verdict{Allow: true, AllowedBy: "rule", Via: via, Exempt: egress.IsAddr(host) && !p.Network}, true
}

// undeclared says how host:port is not what the run declared ("" when
// it is): a module's hook lists its destinations in module.yaml; a
// command run names its hosts by its profile and --allow-host, which
// check allows before anything asks.
func (er *egressRun) undeclared(host string, port uint16) string {
	if er.r.command != nil {
		return "NOT NAMED by the profile or --allow-host of this warden run"
	}
	if l, err := egress.ParseList(er.r.hook.Destinations); err == nil {
		if _, ok := l.Match(host, port); ok {
			return ""
		}
	}
	return "NOT DECLARED in module.yaml's network list of " + er.r.rec.Module + "/" + er.r.rec.Hook
}

// named is check's answer for what warden run was given: a host of its
// profile or --allow-host, or one of the host's own loopback ports it
// was given (--allow-host localhost:PORT, the one way to reach one: the
// deny list keeps loopback out for everything else).
func (er *egressRun) named(host string, port uint16) (egress.Verdict, bool) {
	c := er.r.command
	if c == nil {
		return egress.Verdict{}, false
	}
	if slices.Contains(er.loopback, port) && isLoopbackName(host) {
		return egress.Verdict{Allow: true, AllowedBy: "rule", Via: fmt.Sprintf("warden run --allow-host localhost:%d", port), Exempt: true}, true
	}
	if d, ok := er.hosts.Match(host, port); ok {
		via := "warden run --allow-host " + d.String()
		if c.Profile != "" {
			via = fmt.Sprintf("named by profile %s or --allow-host (%s)", c.Profile, d.String())
		}
		return egress.Verdict{Allow: true, AllowedBy: "rule", Via: via}, true
	}
	return egress.Verdict{}, false
}

// isLoopbackName: host names the host's own loopback.
func isLoopbackName(host string) bool {
	switch strings.Trim(strings.ToLower(host), "[]") {
	case "localhost", "127.0.0.1", "::1":
		return true
	}
	return false
}

// parsedList is egress.ParseList(src), remembered while src stays the same.
func (er *egressRun) parsedList(src []string) (egress.List, error) {
	er.listMu.Lock()
	defer er.listMu.Unlock()
	if er.listParsed && slices.Equal(src, er.listSrc) {
		return er.list, nil
	}
	l, err := egress.ParseList(src)
	if err != nil {
		return nil, err
	}
	er.list, er.listSrc, er.listParsed = l, slices.Clone(src), true
	return l, nil
}

// reached says in the stream, once per destination, where the run got to.
func (er *egressRun) reached(rec egress.Record) {
	dest := egress.JoinHostPort(rec.Host, rec.Port)
	er.mu.Lock()
	first := !er.seen[dest+" ok"]
	er.seen[dest+" ok"] = true
	if first {
		er.dest = append(er.dest, dest)
	}
	er.mu.Unlock()
	if first {
		er.r.streamLine(storage.LevelInfo, fmt.Sprintf("egress: reached %s (%s), allowed by %s: %s", dest, rec.Addr, rec.AllowedBy, rec.Via))
	}
}

// closed queues the connection's network.connect receipt (and, once per
// destination, a stream line for a refusal).
func (er *egressRun) closed(rec egress.Record) {
	r := er.r
	if !rec.Allowed && rec.Reason == askLimitReason {
		// Past the ask limit: counted, said once, never receipted one by
		// one (hook.end carries the count).
		er.mu.Lock()
		er.quiet++
		first := er.quiet == 1
		er.mu.Unlock()
		if first {
			r.streamLine(storage.LevelWarn, "egress: "+askLimitReason+"; further refusals are counted in the run's hook.end receipt")
		}
		return
	}
	dest := egress.JoinHostPort(rec.Host, rec.Port)
	details := map[string]any{"run": r.rec.ID, "host": rec.Host, "port": rec.Port, "protocol": rec.Protocol,
		"allowed": rec.Allowed, "bytesUp": rec.Up, "bytesDown": rec.Down, "durationMs": rec.Duration.Milliseconds()}
	if rec.Addr != "" {
		details["address"] = rec.Addr
	}
	if rec.AllowedBy != "" {
		details["allowedBy"] = rec.AllowedBy
	}
	if rec.Via != "" {
		details["via"] = rec.Via
	}
	var summary string
	if rec.Allowed {
		summary = fmt.Sprintf("%s (%s) allowed by %s: %d bytes up, %d down, %s", dest, rec.Addr, rec.AllowedBy, rec.Up, rec.Down, rec.Duration.Round(time.Millisecond))
	} else {
		details["reason"] = rec.Reason
		summary = fmt.Sprintf("%s refused: %s", dest, rec.Reason)
		er.mu.Lock()
		first := !er.seen[dest+" no"]
		er.seen[dest+" no"] = true
		if first {
			er.refused = append(er.refused, dest)
		}
		er.mu.Unlock()
		if first {
			r.streamLine(storage.LevelWarn, "egress: "+summary)
		}
	}
	er.queueReceipt(storage.Draft{Kind: storage.KindNetworkConnect, Actor: r.actor, Subject: r.rec.Module + "/" + r.rec.Hook,
		Summary: summary, Details: details})
}

// egressSetup starts the run's proxy, hands its socket to the jail's uid
// and puts the spawner in egress mode; the start receipt says so.
func (r *activeRun) egressSetup(js *jail.Spawner, runDir string, details map[string]any) error {
	er, err := r.e.startEgress(r, runDir)
	if err != nil {
		return err
	}
	r.egress = er
	if err := r.e.opts.egress.failSetup; err != nil {
		return err
	}
	if err := js.Egress(filepath.Join(runDir, jail.EgressSocketName)); err != nil {
		return err
	}
	details["network"] = "egress"
	details["networkList"] = r.hook.Destinations
	if p, _, err := r.e.Policy(r.subject()); err == nil {
		details["networkPolicy"] = perms.NetworkSummary(p)
	}
	return nil
}

// egressEnv points the hook's proxy variables at the bridge, replacing
// any the operator's environment passed.
func egressEnv(env []string) []string {
	add := egress.HookEnv()
	out := env[:0:0]
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if _, ours := add[k]; !ours {
			out = append(out, kv)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(add)) {
		out = append(out, k+"="+add[k])
	}
	return out
}

// networkNote marks a start receipt's summary: the host's network is
// loud, the egress proxy is named.
func networkNote(host, egressMode bool) string {
	switch {
	case host:
		return ", NETWORK: HOST (the host's whole network)"
	case egressMode:
		return ", network: egress proxy"
	}
	return ""
}

// runNetwork is a run record's network: "host", "egress" or "".
func runNetwork(host, egressMode bool) string {
	switch {
	case host:
		return "host"
	case egressMode:
		return "egress"
	}
	return ""
}
