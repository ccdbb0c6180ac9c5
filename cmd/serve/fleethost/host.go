// Package fleethost is a warden host's door to its fleet: it joins the
// fleet (engine/fleet's protocol and connection), publishes the engine's
// receipts in order, and answers the decisions and verifies the fleet
// sends this host, acting on the engine.Host it is given.
//
// The host stays the authority (see engine/fleet's package comment): the
// fleet gets copies, and a decision from it is one more actor's, refused
// or receipted like any other.
package fleethost

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/engine/fleet"
	"github.com/wardenhq/warden/engine/perms"
	"github.com/wardenhq/warden/storage"
)

// KeyFile is the host's ed25519 fleet key seed in the data dir (0600).
const KeyFile = "fleet.key"

// stateFile is what the host has published so far (in <data>/fleet/).
const stateFile = "state.json"

// maxPublish is the largest event a host sends (the stream's MaxMsgSize
// is 1 MiB; the server's max_payload may be the same).
const maxPublish = 900 << 10

// HostOptions configure Join.
type HostOptions struct {
	URL     string // nats://HOST:4222 (comma-separated for a cluster)
	Creds   fleet.Creds
	Name    string // this host's fleet name
	Version string // warden's version, for the heartbeat
	// Logf reports the link's state changes; nil for none.
	Logf func(format string, args ...any)
}

// Host is a warden host's link to the fleet. It publishes from the
// engine's receipts (durable, in order), so a host that loses the fleet
// loses nothing: on reconnect it publishes its backlog in order, each
// message with a Nats-Msg-Id so a resend is never doubled.
type Host struct {
	e    engine.Host
	o    HostOptions
	nc   *nats.Conn
	js   jetstream.JetStream
	key  ed25519.PrivateKey
	dir  string
	logf func(string, ...any)

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	kick   chan struct{}

	decideMu sync.Mutex // one fleet decision at a time (roles are per actor)

	errMu     sync.Mutex // the last asynchronous error logged, and when
	lastErr   string
	lastErrAt time.Time

	mu    sync.Mutex
	state hostState
	// pinned is set once the fleet accepted this host's key.
	pinned atomic.Bool
	online atomic.Bool
}

// hostState is persisted in <data>/fleet/state.json.
type hostState struct {
	// Cursor is the last receipt whose events the fleet acknowledged.
	Cursor uint64 `json:"cursor"`
	// Checkpoint is the last checkpoint the fleet acknowledged.
	Checkpoint *fleet.Checkpoint `json:"checkpoint,omitempty"`
}

// KeyChangedError is a host key the fleet has pinned differently.
type KeyChangedError struct {
	Host, Pinned, Have string
}

func (k *KeyChangedError) Error() string {
	return fmt.Sprintf("the fleet REFUSES host %s: its fleet key changed (pinned at first join: %s; this host's %s: %s). "+
		"If this host was rebuilt on purpose, an operator removes the pin with `warden fleet forget %s`; otherwise treat the host as compromised",
		k.Host, k.Pinned, KeyFile, k.Have, k.Host)
}

// Join connects a host to the fleet and starts publishing. A bad fleet
// config (URL, credentials, name, key file), credentials the fleet
// refuses, or a changed key, is an error and nothing runs. A fleet that
// is only unreachable is not: the host joins offline and keeps trying.
func Join(e engine.Host, o HostOptions) (*Host, error) {
	if err := fleet.CheckName("fleet host", o.Name); err != nil {
		return nil, fmt.Errorf("%v (--fleet-host)", err)
	}
	if err := fleet.CheckURL(o.URL); err != nil {
		return nil, err
	}
	seed, err := storage.LoadKeyFile(e.DataDir(), KeyFile, true)
	if err != nil {
		return nil, fmt.Errorf("fleet key %s: %w", filepath.Join(e.DataDir(), KeyFile), err)
	}
	h := &Host{e: e, o: o, key: ed25519.NewKeyFromSeed(seed), dir: filepath.Join(e.DataDir(), "fleet"), kick: make(chan struct{}, 1)}
	h.logf = o.Logf
	if h.logf == nil {
		h.logf = func(string, ...any) {}
	}
	if err := os.MkdirAll(h.dir, 0o700); err != nil {
		return nil, err
	}
	if err := h.loadState(); err != nil {
		return nil, err
	}
	if rs, err := e.Receipts(engine.ReceiptFilter{Limit: 1}); err == nil {
		head := uint64(0)
		if len(rs) == 1 {
			head = rs[0].Seq
		}
		if head < h.state.Cursor {
			// The chain is shorter than what the fleet saw: a restored
			// backup, or receipts removed. Publish from the head on (and
			// let `warden fleet verify` judge the history).
			h.logf("fleet: WARNING: this host's receipts end at seq %d but the fleet has seen up to %d: the data dir was restored or its receipts removed; `warden fleet verify %s` compares with the witnessed checkpoints",
				head, h.state.Cursor, o.Name)
			h.state = hostState{Cursor: head}
		}
	}
	// A first dial without retries tells a refused login (a config
	// error: refuse to start) from an absent server (join offline).
	probe, err := fleet.Connect(o.URL, o.Creds, "warden host "+o.Name, false, nil)
	reachable := err == nil
	if err != nil && !errors.Is(err, nats.ErrNoServers) && !strings.Contains(err.Error(), "no fleet server answers") {
		return nil, err
	}
	if probe != nil {
		probe.Close()
	}
	h.nc, err = fleet.Connect(o.URL, o.Creds, "warden host "+o.Name, true, h.asyncError,
		nats.ConnectHandler(func(nc *nats.Conn) { // the first connection, when it came late
			h.logf("fleet: connected to %s; publishing the backlog", nc.ConnectedUrlRedacted())
			h.poke()
		}))
	if err != nil {
		return nil, err
	}
	if h.js, err = o.Creds.NewJetStream(h.nc); err != nil {
		h.nc.Close()
		return nil, err
	}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	if reachable {
		ctx, cancel := context.WithTimeout(h.ctx, 10*time.Second)
		err := h.pin(ctx)
		cancel()
		if err != nil {
			h.Close()
			return nil, err
		}
	} else {
		h.logf("fleet: no server answers at %s; working offline and retrying (requests are answered locally meanwhile)", o.URL)
	}
	h.nc.SetDisconnectErrHandler(func(_ *nats.Conn, err error) {
		h.online.Store(false)
		h.logf("fleet: disconnected (%v); working offline, reconnecting", err)
	})
	h.nc.SetReconnectHandler(func(*nats.Conn) {
		h.logf("fleet: reconnected to %s; publishing the backlog", h.nc.ConnectedUrlRedacted())
		h.poke()
	})
	if _, err := h.nc.Subscribe(fleet.HostPrefix(o.Name)+".decide.*.*", h.onDecide); err != nil {
		h.Close()
		return nil, err
	}
	if _, err := h.nc.Subscribe(fleet.VerifySubject(o.Name), h.onVerify); err != nil {
		h.Close()
		return nil, err
	}
	h.wg.Add(2)
	go h.publishLoop()
	go h.heartbeatLoop()
	return h, nil
}

// asyncError logs what the server said out of turn: a refused publish,
// or credentials that expired while joined (the host keeps retrying, and
// a new creds file in place logs it in again: no restart needed).
func (h *Host) asyncError(err error) {
	// A host retrying refused credentials hears the same error at each
	// retry (twice a second): say it once a minute.
	h.errMu.Lock()
	repeat := err.Error() == h.lastErr && time.Since(h.lastErrAt) < time.Minute
	if !repeat {
		h.lastErr, h.lastErrAt = err.Error(), time.Now()
	}
	h.errMu.Unlock()
	if repeat {
		return
	}
	if errors.Is(err, nats.ErrAuthExpired) || strings.Contains(strings.ToLower(err.Error()), "expired") {
		h.logf("fleet: the fleet's server says this host's credentials expired (%v): working offline; %s, and put it at %s: the host logs in with it at its next retry",
			err, fleet.CredsAdvice, h.o.Creds.File)
		return
	}
	h.logf("fleet: %v", err)
}

// Close stops publishing and hangs up (what was not acknowledged yet is
// published at the next join).
func (h *Host) Close() {
	if h.cancel != nil {
		h.cancel()
	}
	h.wg.Wait()
	if h.nc != nil {
		if h.nc.IsConnected() {
			h.nc.FlushTimeout(2 * time.Second)
		}
		h.nc.Close()
	}
}

// PublicKey is the host's fleet public key, base64.
func (h *Host) PublicKey() string {
	return base64.StdEncoding.EncodeToString(h.key.Public().(ed25519.PublicKey))
}

func (h *Host) poke() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// pin creates this host's key in the keys bucket, once; a different key
// already there is a *KeyChangedError.
func (h *Host) pin(ctx context.Context) error {
	subj := "$KV." + fleet.KeysBucket + "." + h.o.Name
	pub := h.PublicKey()
	for attempt := 0; attempt < 3; attempt++ {
		last, current, err := h.pinnedKey(ctx)
		if err != nil {
			return err
		}
		if current != "" {
			if current != pub {
				return &KeyChangedError{Host: h.o.Name, Pinned: current, Have: pub}
			}
			h.pinned.Store(true)
			return nil
		}
		m := nats.NewMsg(subj)
		m.Data = []byte(pub)
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, fmt.Sprint(last))
		if _, err := h.js.PublishMsg(ctx, m); err != nil {
			var apiErr *jetstream.APIError
			if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
				continue // another join raced this one: read again
			}
			return fmt.Errorf("pinning this host's fleet key: %v (has an operator run `warden fleet init`?)", err)
		}
		h.logf("fleet: host %s joined; its fleet key %s is pinned", h.o.Name, pub)
		h.pinned.Store(true)
		return nil
	}
	return errors.New("pinning this host's fleet key: the keys bucket kept changing; try again")
}

// pinnedKey reads the pinned key by a direct get; "" when none (never
// pinned, or forgotten: last is then the delete marker's sequence).
func (h *Host) pinnedKey(ctx context.Context) (last uint64, key string, err error) {
	subj := h.o.Creds.JSAPI() + ".DIRECT.GET.KV_" + fleet.KeysBucket + ".$KV." + fleet.KeysBucket + "." + h.o.Name
	msg, err := h.nc.RequestWithContext(ctx, subj, nil)
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			if h.o.Creds.Domain != "" {
				return 0, "", fmt.Errorf("no %s bucket answers in JetStream domain %s: check the domain (--fleet-domain, the hub's `jetstream { domain: ... }`), and that an operator ran `warden fleet init --fleet-domain %s`",
					fleet.KeysBucket, h.o.Creds.Domain, h.o.Creds.Domain)
			}
			return 0, "", fmt.Errorf("the fleet has no %s bucket: an operator runs `warden fleet init` first", fleet.KeysBucket)
		}
		if h.o.Creds.Domain != "" {
			return 0, "", fmt.Errorf("reading the fleet's pinned key: no answer in JetStream domain %s (%v): check --fleet-domain against the hub's `jetstream { domain: ... }`, and that this host may publish to %s",
				h.o.Creds.Domain, err, subj)
		}
		return 0, "", fmt.Errorf("reading the fleet's pinned key: %v", err)
	}
	if st := msg.Header.Get("Status"); st == "404" {
		return 0, "", nil
	} else if st != "" {
		return 0, "", fmt.Errorf("reading the fleet's pinned key: status %s %s", st, msg.Header.Get("Description"))
	}
	fmt.Sscan(msg.Header.Get("Nats-Sequence"), &last)
	if op := msg.Header.Get("KV-Operation"); op == "DEL" || op == "PURGE" {
		return last, "", nil
	}
	return last, string(msg.Data), nil
}

func (h *Host) loadState() error {
	b, err := os.ReadFile(filepath.Join(h.dir, stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &h.state); err != nil {
		// Derived data: republishing from the start is safe (the fleet
		// keeps the latest state per request), so start over.
		h.state = hostState{}
	}
	return nil
}

func (h *Host) saveState() error {
	h.mu.Lock()
	b, _ := json.Marshal(h.state)
	h.mu.Unlock()
	return storage.WriteFileAtomic(filepath.Join(h.dir, stateFile), b, 0o600)
}

// publishLoop publishes the events of every receipt after the cursor, in
// order, waiting for each acknowledgement; a failure leaves the cursor
// where it is, and the loop tries again from there.
func (h *Host) publishLoop() {
	defer h.wg.Done()
	sub := h.e.Subscribe()
	defer sub.Close()
	go func() {
		for {
			ev, err := sub.Next(h.ctx)
			if err != nil {
				return
			}
			if ev.Kind == engine.EventReceipt || ev.Kind == engine.EventMissed {
				h.poke()
			}
		}
	}()
	// Timed checkpoints start at a random phase and vary by ±10%
	// (jitter.go: hosts started together do not publish in lockstep).
	tick := time.NewTimer(fleet.FirstAfter(fleet.CheckpointEvery))
	defer tick.Stop()
	backoff := 200 * time.Millisecond
	for {
		err := h.publishBacklog(false)
		if err == nil {
			backoff = 200 * time.Millisecond
		}
		wait := time.Duration(1<<62 - 1)
		if err != nil {
			if h.ctx.Err() == nil && h.nc.IsConnected() {
				h.logf("fleet: publishing: %v; retrying in %s", err, backoff)
			}
			wait = backoff
			backoff = min(backoff*2, 5*time.Second)
		}
		timer := time.NewTimer(wait)
		select {
		case <-h.ctx.Done():
			timer.Stop()
			return
		case <-h.kick:
		case <-tick.C:
			tick.Reset(fleet.Jittered(fleet.CheckpointEvery))
			if err := h.publishBacklog(true); err != nil && h.nc.IsConnected() && h.ctx.Err() == nil {
				h.logf("fleet: checkpoint: %v", err)
			}
		case <-timer.C:
		}
		timer.Stop()
	}
}

// publishBacklog publishes what follows the cursor; with timed it also
// checkpoints the head if there is anything new since the last one.
func (h *Host) publishBacklog(timed bool) error {
	if !h.pinned.Load() {
		if !h.nc.IsConnected() {
			return errors.New("offline")
		}
		ctx, cancel := context.WithTimeout(h.ctx, 10*time.Second)
		err := h.pin(ctx)
		cancel()
		if err != nil {
			var changed *KeyChangedError
			if errors.As(err, &changed) {
				h.logf("fleet: %v", err)
				h.logf("fleet: this host publishes nothing to the fleet until that is resolved")
				<-h.ctx.Done()
			}
			return err
		}
	}
	h.mu.Lock()
	cursor := h.state.Cursor
	h.mu.Unlock()
	last, err := h.e.Receipts(engine.ReceiptFilter{Limit: 1})
	if err != nil {
		return err
	}
	head := cursor
	if len(last) == 1 {
		head = last[0].Seq
	}
	dirty := false
	defer func() {
		if dirty {
			h.saveState()
		}
	}()
	// A receipt at a time: a first join of a long-lived data dir never
	// holds its whole history in memory (each publish waits for its ack
	// anyway, which costs far more than the read).
	for seq := cursor + 1; seq <= head; seq++ {
		if h.ctx.Err() != nil {
			return h.ctx.Err()
		}
		rec, err := h.e.Receipt(seq)
		if errors.Is(err, engine.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		r := &rec
		for _, ev := range h.eventsFor(r) {
			if err := h.publish(ev.kind, ev.id, ev.env); err != nil {
				return err
			}
		}
		h.mu.Lock()
		h.state.Cursor = r.Seq
		lastCP := uint64(0)
		if h.state.Checkpoint != nil {
			lastCP = h.state.Checkpoint.Seq
		}
		h.mu.Unlock()
		dirty = true
		if countCheckpointDue(r.Seq, lastCP) {
			if err := h.checkpoint(r); err != nil {
				return err
			}
		}
	}
	if timed {
		h.mu.Lock()
		cp := h.state.Checkpoint
		head := h.state.Cursor
		h.mu.Unlock()
		if head > 0 && (cp == nil || cp.Seq < head) {
			r, err := h.e.Receipt(head)
			if err != nil {
				return err
			}
			if err := h.checkpoint(&r); err != nil {
				return err
			}
			dirty = true
		}
	}
	return nil
}

// countCheckpointDue says whether receipt seq gets a checkpoint of its
// own: the first receipt at or past each multiple of CheckpointReceipts
// since the last checkpoint. Counting from the multiples, not from the
// last checkpoint, keeps the witnessed seqs where an operator expects
// them (100, 200, ...) whenever a timed checkpoint came in between, and
// still leaves no more than CheckpointReceipts receipts unwitnessed. A
// seq missing from the chain moves the checkpoint to the next one there.
func countCheckpointDue(seq, lastCP uint64) bool {
	return seq/fleet.CheckpointReceipts > lastCP/fleet.CheckpointReceipts
}

type outgoing struct {
	kind, id string
	env      fleet.Envelope
}

// eventsFor is what the fleet hears of receipt r: the request it
// concerns (any kind of request, as its record), or the run.
func (h *Host) eventsFor(r *storage.Receipt) []outgoing {
	var d struct {
		Request uint64 `json:"request"`
		Run     string `json:"run"`
	}
	if len(r.Details) > 0 {
		json.Unmarshal(r.Details, &d)
	}
	env := fleet.Envelope{Host: h.o.Name, Seq: r.Seq, At: r.At}
	switch {
	case strings.HasPrefix(r.Kind, "request.") && d.Request != 0:
		req, err := h.e.Request(d.Request)
		if err != nil {
			return nil
		}
		env.Request = &req
		return []outgoing{{fleet.KindRequest, fmt.Sprintf("%s.%d.%s", h.o.Name, r.Seq, fleet.KindRequest), env}}
	case (r.Kind == "hook.start" || r.Kind == "hook.end") && d.Run != "":
		run, err := h.e.Run(d.Run)
		if err != nil {
			return nil
		}
		env.Run = &fleet.RunSummary{ID: run.ID, Module: run.Module, Hook: run.Hook, Actor: run.Actor, Status: run.Status,
			Started: run.Started, Ended: run.Ended, Error: run.Error}
		return []outgoing{{fleet.KindRun, fmt.Sprintf("%s.%d.%s", h.o.Name, r.Seq, fleet.KindRun), env}}
	}
	return nil
}

func (h *Host) publish(kind, id string, env fleet.Envelope) error {
	b, err := json.Marshal(env)
	if err != nil {
		return err
	}
	if len(b) > maxPublish && env.Request != nil {
		// A request too large for the stream would block the backlog
		// for ever: the fleet gets it without its content, which stays
		// on the host (`warden perms show ID` there).
		r := *env.Request
		r.Content = json.RawMessage(fmt.Sprintf(`{"truncated":true,"bytes":%d}`, len(r.Content)))
		env.Request = &r
		if b, err = json.Marshal(env); err != nil {
			return err
		}
	}
	m := nats.NewMsg(fleet.EventSubject(h.o.Name, kind))
	m.Data = b
	m.Header.Set(jetstream.MsgIDHeader, id)
	ctx, cancel := context.WithTimeout(h.ctx, 3*time.Second)
	defer cancel()
	_, err = h.js.PublishMsg(ctx, m)
	if err != nil {
		h.online.Store(false)
		return err
	}
	h.online.Store(true)
	return nil
}

// checkpoint signs and publishes {host, seq, hash, at} for receipt r.
func (h *Host) checkpoint(r *storage.Receipt) error {
	cp := fleet.Checkpoint{At: time.Now().UTC(), Hash: r.Hash, Host: h.o.Name, Seq: r.Seq}
	sc := fleet.Sign(cp, h.key)
	if err := h.publish(fleet.KindCheckpoint, fmt.Sprintf("%s.cp.%d", h.o.Name, r.Seq), fleet.Envelope{Host: h.o.Name, Seq: r.Seq, At: cp.At, Checkpoint: &sc}); err != nil {
		return err
	}
	h.mu.Lock()
	h.state.Checkpoint = &cp
	h.mu.Unlock()
	return nil
}

func (h *Host) heartbeatLoop() {
	defer h.wg.Done()
	// The first heartbeat goes out at once (the fleet sees the host
	// join); the next at a random phase, then every period ±10%
	// (jitter.go).
	wait := fleet.FirstAfter(fleet.HeartbeatEvery)
	for {
		if h.nc.IsConnected() && h.pinned.Load() {
			h.heartbeat()
		}
		t := time.NewTimer(wait)
		select {
		case <-h.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = fleet.Jittered(fleet.HeartbeatEvery)
	}
}

func (h *Host) heartbeat() {
	hb := fleet.Heartbeat{Host: h.o.Name, Version: h.o.Version, At: time.Now().UTC()}
	if runs, err := h.e.Runs(200); err == nil {
		for _, r := range runs {
			if r.Status == storage.RunRunning {
				hb.Running++
			}
		}
	}
	if reqs, err := h.e.Requests(engine.RequestFilter{}); err == nil {
		hb.Pending = len(reqs)
	}
	if rs, err := h.e.Receipts(engine.ReceiptFilter{Limit: 1}); err == nil && len(rs) == 1 {
		hb.Head = rs[0].Seq
	}
	h.mu.Lock()
	hb.Checkpoint = h.state.Checkpoint
	if hb.Head > h.state.Cursor {
		hb.Backlog = hb.Head - h.state.Cursor
	}
	h.mu.Unlock()
	b, _ := json.Marshal(hb)
	m := nats.NewMsg("$KV." + fleet.HostsBucket + "." + h.o.Name)
	m.Data = b
	ctx, cancel := context.WithTimeout(h.ctx, 3*time.Second)
	defer cancel()
	if _, err := h.js.PublishMsg(ctx, m); err != nil && h.ctx.Err() == nil {
		h.logf("fleet: heartbeat: %v", err)
	}
}

// onDecide applies a decision from the fleet. Who decided is the
// subject's last token and their role the one before: the fleet's
// server lets each member publish only to its own. The engine decides
// as for any actor: an operator's decision goes through its usual
// checks; a viewer's is refused and receipted.
func (h *Host) onDecide(m *nats.Msg) {
	reply := func(r fleet.DecisionReply) {
		b, _ := json.Marshal(r)
		m.Respond(b)
	}
	toks := strings.Split(m.Subject, ".")
	if len(toks) != 6 || !fleet.ValidName(toks[5]) {
		reply(fleet.DecisionReply{Code: fleet.CodeBadRequest, Message: "bad decision subject"})
		return
	}
	role, name := toks[4], toks[5]
	actor := engine.Actor("fleet:" + name)
	d, err := fleet.DecodeDecision(m.Data)
	if err != nil {
		reply(fleet.DecisionReply{Code: fleet.CodeBadRequest, Message: err.Error()})
		return
	}
	h.decideMu.Lock()
	defer h.decideMu.Unlock()
	switch role {
	case fleet.RoleOperator:
		h.e.SetRole(actor, engine.RoleOperator)
	default: // a viewer, or a role this host does not know: may watch only
		h.e.SetRole(actor, engine.RoleViewer)
	}
	var req engine.Request
	switch d.Verdict {
	case storage.ApproveOnce:
		req, err = h.e.Approve(actor, d.Request, d.Reason)
	case storage.ApproveAlways:
		req, _, _, err = h.e.ApproveAlways(actor, d.Request, d.Reason)
	default:
		req, err = h.e.Deny(actor, d.Request, d.Reason)
	}
	h.e.ForgetRole(actor)
	var refused *perms.Refusal
	switch {
	case err == nil:
		reply(fleet.DecisionReply{Code: fleet.CodeOK, Request: &req, Message: fmt.Sprintf("request %d on %s: %s by %s", req.ID, h.o.Name, d.Verdict, actor)})
	case errors.Is(err, engine.ErrForbidden):
		reply(fleet.DecisionReply{Code: fleet.CodeForbidden, Message: fmt.Sprintf("host %s refused: %v (recorded in its receipts)", h.o.Name, err)})
	case errors.Is(err, perms.ErrAlreadyDecided):
		reply(fleet.DecisionReply{Code: fleet.CodeAlreadyDecided, Request: &req, Message: fmt.Sprintf("host %s: %v", h.o.Name, err)})
	case errors.Is(err, engine.ErrNotFound):
		reply(fleet.DecisionReply{Code: fleet.CodeNotFound, Message: fmt.Sprintf("host %s: %v", h.o.Name, err)})
	case errors.As(err, &refused):
		reply(fleet.DecisionReply{Code: fleet.CodeRefused, Request: &req, Message: fmt.Sprintf("host %s: %v", h.o.Name, err)})
	default:
		reply(fleet.DecisionReply{Code: fleet.CodeInternal, Message: fmt.Sprintf("host %s: %v", h.o.Name, err)})
	}
}

// onVerify answers the chain's hashes at the asked seqs, recomputed from
// every receipt's content from the first on: a receipt edited in place
// (its stored hash kept) or a chain rewritten and re-hashed both answer a
// hash other than the one a checkpoint witnessed.
func (h *Host) onVerify(m *nats.Msg) {
	out := fleet.VerifyReply{Host: h.o.Name, Hashes: map[uint64]string{}}
	defer func() {
		b, _ := json.Marshal(out)
		m.Respond(b)
	}()
	var vr fleet.VerifyRequest
	if len(m.Data) > fleet.MaxVerifyRequestLen || json.Unmarshal(m.Data, &vr) != nil || len(vr.Seqs) > fleet.MaxVerifySeqs ||
		vr.From != nil && (vr.From.Seq == 0 || len(vr.From.Hash) != 64) {
		out.Error = "bad verify request"
		return
	}
	want := map[uint64]bool{}
	for _, s := range vr.Seqs {
		want[s] = true
	}
	var last uint64
	for s := range want {
		last = max(last, s)
	}
	head, err := h.e.Receipts(engine.ReceiptFilter{Limit: 1})
	if err != nil {
		out.Error = err.Error()
		return
	}
	if len(head) == 1 {
		out.Head = head[0].Seq
	}
	// From an anchor, the chain is recomputed from the receipt after it
	// on, chaining from its hash (the verifier checked it before).
	first, prev := uint64(1), storage.GenesisPrev
	if vr.From != nil {
		first, prev = vr.From.Seq+1, vr.From.Hash
	}
	// A chain up to verifyInMemory receipts is read in one go; a longer
	// one a receipt at a time, up to the last witnessed seq, so a
	// verify never holds a whole long chain in memory.
	next := func() func() (storage.Receipt, bool, error) {
		if vr.From == nil && out.Head <= verifyInMemory.Load() {
			rs, err := h.e.Receipts(engine.ReceiptFilter{})
			i := 0
			return func() (storage.Receipt, bool, error) {
				if err != nil || i >= len(rs) {
					return storage.Receipt{}, false, err
				}
				i++
				return rs[i-1], true, nil
			}
		}
		seq := first - 1
		return func() (storage.Receipt, bool, error) {
			if seq >= min(last, out.Head) {
				return storage.Receipt{}, false, nil
			}
			seq++
			r, err := h.e.Receipt(seq)
			if errors.Is(err, engine.ErrNotFound) {
				return r, false, nil // a gap: the hashes from here on are missing
			}
			return r, err == nil, err
		}
	}()
	for {
		r, ok, err := next()
		if err != nil {
			out.Error = err.Error()
			return
		}
		if !ok {
			return
		}
		r.Prev = prev
		hash, err := r.ComputeHash()
		if err != nil {
			out.Error = fmt.Sprintf("receipt %d: %v", r.Seq, err)
			return
		}
		if want[r.Seq] {
			out.Hashes[r.Seq] = hash
		}
		prev = hash
	}
}

// verifyInMemory is the longest chain verify reads in one go (tests
// lower it to cover the receipt-at-a-time path).
var verifyInMemory atomic.Uint64

func init() { verifyInMemory.Store(100_000) }

// Probe is `warden doctor`'s fleet check: it dials the fleet as this
// host and reads the key pinned for it, without joining.
func Probe(dataDir string, o HostOptions) engine.Check {
	c := engine.Check{Name: "fleet"}
	problem := func(detail, fix string) engine.Check {
		c.Status, c.Detail, c.Fix = "problem", detail, fix
		return c
	}
	if err := fleet.CheckName("fleet host", o.Name); err != nil {
		return problem(err.Error(), "set --fleet-host (or fleet.host in config.yaml) to this host's fleet name")
	}
	nc, err := fleet.Connect(o.URL, o.Creds, "warden doctor "+o.Name, false, nil)
	if err != nil {
		return problem(err.Error(), "check the URL, that nats-server runs with -js, and the credentials file")
	}
	defer nc.Close()
	h := &Host{nc: nc, o: o}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, pinned, err := h.pinnedKey(ctx)
	if err != nil {
		return problem(fmt.Sprintf("connected to %s as %s, but: %v", nc.ConnectedUrlRedacted(), o.Name, err),
			"an operator runs `warden fleet init`; check this host's subject permissions (README, \"Many hosts\")")
	}
	seed, err := storage.LoadKeyFile(dataDir, KeyFile, false)
	switch {
	case errors.Is(err, os.ErrNotExist) && pinned == "":
		c.Detail = fmt.Sprintf("connected to %s as %s; not joined yet (the first `warden serve --fleet` makes and pins its key)", nc.ConnectedUrlRedacted(), o.Name)
	case errors.Is(err, os.ErrNotExist):
		return problem(fmt.Sprintf("the fleet has a key pinned for %s, but this data dir has no %s", o.Name, KeyFile),
			fmt.Sprintf("restore %s from a backup, or (a rebuilt host) an operator runs `warden fleet forget %s`", KeyFile, o.Name))
	case err != nil:
		return problem(fmt.Sprintf("fleet key: %v", err), "restore it from a backup")
	default:
		pub := base64.StdEncoding.EncodeToString(ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey))
		if pinned != "" && pinned != pub {
			return problem((&KeyChangedError{Host: o.Name, Pinned: pinned, Have: pub}).Error(), "see above")
		}
		c.Detail = fmt.Sprintf("connected to %s as %s; its key is pinned", nc.ConnectedUrlRedacted(), o.Name)
		if pinned == "" {
			c.Detail = fmt.Sprintf("connected to %s as %s; its key pins at the next join", nc.ConnectedUrlRedacted(), o.Name)
		}
	}
	c.Status = "ok"
	return c
}
