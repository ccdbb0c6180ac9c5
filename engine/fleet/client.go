package fleet

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/wardenhq/warden/storage"
)

// Limits of the fleet's stream (see the README's "Many hosts").
const (
	StreamMaxAge   = 90 * 24 * time.Hour
	StreamMaxBytes = 1 << 30
	DupeWindow     = 10 * time.Minute
)

// Client is an operator's or a viewer's connection to the fleet.
type Client struct {
	nc   *nats.Conn
	js   jetstream.JetStream
	Name string // the member's fleet name (its decision subject's last token)
	Role string // RoleOperator or RoleViewer

	domain string // the fleet's JetStream domain ("" for none)

	errMu   sync.Mutex
	lastErr error // the last asynchronous error (a permissions violation)
}

// Dial connects as name in role (name defaults to the creds' user).
func Dial(url string, creds Creds, name, role string) (*Client, error) {
	if name == "" {
		name = creds.name()
	}
	if err := CheckName("fleet member", name); err != nil {
		return nil, fmt.Errorf("%v (give --name)", err)
	}
	if role != RoleOperator && role != RoleViewer {
		return nil, fmt.Errorf("bad role %q: want operator or viewer", role)
	}
	c := &Client{Name: name, Role: role, domain: creds.Domain}
	nc, err := Connect(url, creds, "warden fleet "+role+" "+name, false, func(err error) {
		c.errMu.Lock()
		c.lastErr = err
		c.errMu.Unlock()
	})
	if err != nil {
		return nil, err
	}
	c.nc = nc
	if c.js, err = creds.NewJetStream(nc); err != nil {
		nc.Close()
		return nil, err
	}
	if c.domain != "" {
		// A domain no server has (or one the member may not use) leaves
		// every request unanswered: say so now, not after each verb's
		// own wait.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := c.js.AccountInfo(ctx); err != nil {
			nc.Close()
			return nil, fmt.Errorf("no JetStream answers in domain %s (%v): check --fleet-domain against the `domain` of the jetstream block on the fleet's hub, and that your permissions allow %s.>",
				c.domain, err, creds.JSAPI())
		}
	}
	return c, nil
}

// Close hangs up.
func (c *Client) Close() { c.nc.Close() }

// Conn is the NATS connection (for tests and the console's watch).
func (c *Client) Conn() *nats.Conn { return c.nc }

// Init creates (or updates) the fleet's stream and buckets. Only a
// member whose credentials allow the JetStream admin API can.
// InitOptions size the fleet's stream.
type InitOptions struct {
	MaxBytes int64 // the stream's size limit (default StreamMaxBytes)
	Replicas int   // 1 on one server, 3 on a cluster of 3 (default 1)
}

// Init creates or updates the stream and buckets with o.
func (c *Client) Init(ctx context.Context, o InitOptions) error {
	maxBytes := o.MaxBytes
	replicas := max(o.Replicas, 1)
	if maxBytes <= 0 {
		maxBytes = StreamMaxBytes
	}
	// A refused publish gets no answer: bound each call.
	ctx, cancel := context.WithTimeout(ctx, 8*time.Second)
	defer cancel()
	_, err := c.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: StreamName, Description: "warden fleet: every host's requests, runs and checkpoints",
		Subjects: []string{"warden.host.*.evt.>"}, Storage: jetstream.FileStorage, Retention: jetstream.LimitsPolicy,
		MaxAge: StreamMaxAge, MaxBytes: maxBytes, Replicas: replicas, Discard: jetstream.DiscardOld, Duplicates: DupeWindow, MaxMsgSize: 1 << 20,
	})
	if err != nil {
		return fmt.Errorf("creating stream %s: %v", StreamName, c.permission(c.noFleet(err)))
	}
	if _, err := c.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: HostsBucket, Description: "warden fleet heartbeats",
		TTL: HeartbeatTTL, History: 1, Storage: jetstream.FileStorage, Replicas: replicas}); err != nil {
		return fmt.Errorf("creating bucket %s: %v", HostsBucket, c.permission(err))
	}
	if _, err := c.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: KeysBucket, Description: "warden fleet keys, pinned at first join",
		History: 5, Storage: jetstream.FileStorage, Replicas: replicas}); err != nil {
		return fmt.Errorf("creating bucket %s: %v", KeysBucket, c.permission(err))
	}
	return nil
}

// HostStatus is one host as the fleet sees it.
type HostStatus struct {
	Host      string     `json:"host"`
	Up        bool       `json:"up"`
	Heartbeat *Heartbeat `json:"heartbeat,omitempty"`
	Key       string     `json:"key,omitempty"`
	// LastCheckpoint is the newest checkpoint in the stream.
	LastCheckpoint *Checkpoint `json:"lastCheckpoint,omitempty"`
	Pending        int         `json:"pending"`
}

// Keys reads the pinned keys.
func (c *Client) Keys(ctx context.Context) (map[string]string, error) {
	kv, err := c.js.KeyValue(ctx, KeysBucket)
	if err != nil {
		return nil, c.noFleet(err)
	}
	out := map[string]string{}
	ks, err := kv.ListKeys(ctx)
	if err != nil {
		return nil, err
	}
	for k := range ks.Keys() {
		if e, err := kv.Get(ctx, k); err == nil {
			out[k] = string(e.Value())
		}
	}
	return out, nil
}

// Forget removes a host's pinned key, so its next join pins a new one.
func (c *Client) Forget(ctx context.Context, host string) error {
	kv, err := c.js.KeyValue(ctx, KeysBucket)
	if err != nil {
		return c.noFleet(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 8*time.Second)
	defer cancel()
	if err := kv.Delete(ctx, host); err != nil {
		return c.permission(err)
	}
	return nil
}

func (c *Client) noFleet(err error) error {
	if errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("the fleet is not set up (%v): an operator runs `warden fleet init`", err)
	}
	if c.domain != "" && (errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrJetStreamNotEnabled) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)) {
		return fmt.Errorf("no JetStream answers in domain %s (%v): check --fleet-domain against the `domain` of the jetstream block on the fleet's hub", c.domain, err)
	}
	return err
}

// heartbeats reads every live heartbeat.
func (c *Client) heartbeats(ctx context.Context) (map[string]Heartbeat, error) {
	kv, err := c.js.KeyValue(ctx, HostsBucket)
	if err != nil {
		return nil, c.noFleet(err)
	}
	out := map[string]Heartbeat{}
	ks, err := kv.ListKeys(ctx)
	if err != nil {
		return nil, err
	}
	for k := range ks.Keys() {
		e, err := kv.Get(ctx, k)
		if err != nil {
			continue
		}
		var hb Heartbeat
		if json.Unmarshal(e.Value(), &hb) == nil {
			out[k] = hb
		}
	}
	return out, nil
}

// Hosts lists every host that ever joined (its key is pinned) or beats.
func (c *Client) Hosts(ctx context.Context, v *View) ([]HostStatus, error) {
	keys, err := c.Keys(ctx)
	if err != nil {
		return nil, err
	}
	hbs, err := c.heartbeats(ctx)
	if err != nil {
		return nil, err
	}
	return composeHosts(keys, hbs, v), nil
}

func composeHosts(keys map[string]string, hbs map[string]Heartbeat, v *View) []HostStatus {
	names := map[string]bool{}
	for k := range keys {
		names[k] = true
	}
	for k := range hbs {
		names[k] = true
	}
	now := time.Now()
	var pending map[string]int
	if v != nil {
		pending = v.PendingByHost(now)
	}
	out := []HostStatus{}
	for n := range names {
		s := HostStatus{Host: n, Key: keys[n]}
		if hb, ok := hbs[n]; ok {
			s.Heartbeat = &hb
			s.Up = now.Sub(hb.At) < DownAfter
		}
		if v != nil {
			s.LastCheckpoint = v.LastCheckpoint(n)
			s.Pending = pending[n]
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Host < out[j].Host })
	return out
}

// HostWatch keeps every host's heartbeat and pinned key current from
// the buckets' watchers, so a console reads hosts locally instead of
// asking the server about each one at every refresh.
type HostWatch struct {
	mu    sync.Mutex
	beats map[string]Heartbeat
	keys  map[string]string
}

// WatchHosts starts a HostWatch that lives until ctx ends.
func (c *Client) WatchHosts(ctx context.Context) (*HostWatch, error) {
	w := &HostWatch{beats: map[string]Heartbeat{}, keys: map[string]string{}}
	for _, b := range []string{HostsBucket, KeysBucket} {
		kv, err := c.js.KeyValue(ctx, b)
		if err != nil {
			return nil, c.noFleet(err)
		}
		kw, err := kv.WatchAll(ctx)
		if err != nil {
			return nil, err
		}
		go func() {
			defer kw.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case e, ok := <-kw.Updates():
					if !ok {
						return
					}
					if e != nil {
						w.apply(b, e)
					}
				}
			}
		}()
	}
	return w, nil
}

func (w *HostWatch) apply(bucket string, e jetstream.KeyValueEntry) {
	w.mu.Lock()
	defer w.mu.Unlock()
	put := e.Operation() == jetstream.KeyValuePut
	switch bucket {
	case HostsBucket:
		var hb Heartbeat
		if put && json.Unmarshal(e.Value(), &hb) == nil && hb.Host == e.Key() {
			w.beats[e.Key()] = hb
		} else if !put {
			delete(w.beats, e.Key())
		}
	case KeysBucket:
		if put {
			w.keys[e.Key()] = string(e.Value())
		} else {
			delete(w.keys, e.Key())
		}
	}
}

// Hosts is every host as the watch last heard, with v's pending counts
// and checkpoints.
func (w *HostWatch) Hosts(v *View) []HostStatus {
	w.mu.Lock()
	keys := make(map[string]string, len(w.keys))
	for k, x := range w.keys {
		keys[k] = x
	}
	beats := make(map[string]Heartbeat, len(w.beats))
	for k, x := range w.beats {
		beats[k] = x
	}
	w.mu.Unlock()
	return composeHosts(keys, beats, v)
}

// Window is how far back the queue and the run summaries are read: a
// request waits at most an hour (perms.DefaultTTL), so a day holds every
// pending one and the recent decisions, whatever the stream retains.
const Window = 24 * time.Hour

// FollowOptions select what Follow reads.
type FollowOptions struct {
	// Kind is the event kind (KindRequest, KindRun, KindCheckpoint).
	Kind string
	// Since reads from this far back (0: from the start of the stream).
	Since time.Duration
	// LastPerHost reads only each host's newest event of the kind.
	LastPerHost bool
	// CatchUp returns once everything there was is read; else Follow
	// follows until ctx ends.
	CatchUp bool
}

// Load reads what the CLI verbs show into a view, until caught up: the
// requests and runs of the last Window, and each host's newest
// checkpoint (withCheckpoints: every checkpoint, for verify).
func (c *Client) Load(ctx context.Context, allCheckpoints bool) (*View, error) {
	v := NewView()
	for _, o := range []FollowOptions{{Kind: KindRequest, Since: Window}, {Kind: KindRun, Since: Window},
		{Kind: KindCheckpoint, LastPerHost: !allCheckpoints}} {
		o.CatchUp = true
		if err := c.Follow(ctx, v, o); err != nil {
			return v, err
		}
	}
	return v, nil
}

// Follow feeds the stream's events of one kind into v.
func (c *Client) Follow(ctx context.Context, v *View, o FollowOptions) error {
	s, err := c.js.Stream(ctx, StreamName)
	if err != nil {
		return c.noFleet(err)
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{"warden.host.*.evt." + o.Kind}}
	switch {
	case o.LastPerHost:
		cfg.DeliverPolicy = jetstream.DeliverLastPerSubjectPolicy
	case o.Since > 0:
		from := time.Now().Add(-o.Since)
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &from
	}
	cons, err := s.OrderedConsumer(ctx, cfg)
	if err != nil {
		return err
	}
	if o.CatchUp {
		if info := cons.CachedInfo(); info != nil && info.NumPending == 0 {
			return nil // nothing selected
		}
	}
	it, err := cons.Messages()
	if err != nil {
		return err
	}
	defer it.Stop()
	go func() { <-ctx.Done(); it.Stop() }()
	for {
		m, err := it.Next()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		v.Add(m.Subject(), m.Data())
		if o.CatchUp {
			if md, err := m.Metadata(); err == nil && md.NumPending == 0 {
				return nil
			}
		}
	}
}

// Decide sends a decision to host, as this member, and returns the host's
// answer.
func (c *Client) Decide(ctx context.Context, host string, d Decision) (DecisionReply, error) {
	if err := CheckName("host", host); err != nil {
		return DecisionReply{}, err
	}
	b, _ := json.Marshal(d)
	ctx, cancel := context.WithTimeout(ctx, DecideTimeout)
	defer cancel()
	m, err := c.nc.RequestWithContext(ctx, DecideSubject(host, c.Role, c.Name), b)
	if err != nil {
		return DecisionReply{}, c.explain(host, err)
	}
	var r DecisionReply
	if err := json.Unmarshal(m.Data, &r); err != nil {
		return r, fmt.Errorf("host %s answered something that is not a decision reply", host)
	}
	return r, nil
}

// permission says so when the server refused a publish of this
// client's (it answers a refused request with silence).
func (c *Client) permission(err error) error {
	c.errMu.Lock()
	async := c.lastErr
	c.errMu.Unlock()
	if async != nil && strings.Contains(strings.ToLower(async.Error()), "permissions violation") {
		return fmt.Errorf("the fleet's server refused it (%v): your credentials do not allow this; use the fleet's admin credentials", async)
	}
	return err
}

func (c *Client) explain(host string, err error) error {
	c.errMu.Lock()
	async := c.lastErr
	c.errMu.Unlock()
	if async != nil && strings.Contains(strings.ToLower(async.Error()), "permissions violation") {
		return fmt.Errorf("the fleet refused to carry this as %s %s (%v): your credentials do not allow it", c.Role, c.Name, async)
	}
	if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
		return fmt.Errorf("host %s did not answer (%v): it is down or not joined; its local console can still decide", host, err)
	}
	return err
}

// Verification is the outcome of verifying one host.
type Verification struct {
	Host        string `json:"host"`
	Status      string `json:"status"` // "verified", "mismatch", "unverified", "key-refused"
	Checkpoints int    `json:"checkpoints"`
	Head        uint64 `json:"head,omitempty"`
	// BadSeq and BadAt name the first checkpoint that does not match.
	BadSeq  uint64    `json:"badSeq,omitempty"`
	BadAt   time.Time `json:"badAt,omitzero"`
	Message string    `json:"message"`
	// From is the checkpoint seq this verify started from (one an
	// earlier verify found to match); 0 when it checked from seq 1.
	From uint64 `json:"from,omitempty"`
	// Anchor is the newest checkpoint that matched: where the next
	// verify may start (nil unless Status is "verified").
	Anchor *Anchor `json:"anchor,omitempty"`
}

// VerifyOptions say which hosts a verify checks and from where.
type VerifyOptions struct {
	Only string // one host ("" for every host)
	// From is, per host, the checkpoint an earlier verify found to
	// match: the host's chain is checked from there on. A rewrite before
	// it is then not seen; Full ignores From and checks from seq 1.
	From map[string]Anchor
	Full bool
}

// Verify asks each host that has checkpoints for its hashes at every
// witnessed seq and compares them with the signed checkpoints.
func (c *Client) Verify(ctx context.Context, v *View, o VerifyOptions) ([]Verification, error) {
	only := o.Only
	keys, err := c.Keys(ctx)
	if err != nil {
		return nil, err
	}
	var out []Verification
	names := map[string]bool{}
	for _, h := range v.HostNames() {
		names[h] = true
	}
	for h := range keys {
		names[h] = true // joined, perhaps never checkpointed: unverified
	}
	var hosts []string
	for h := range names {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	for _, host := range hosts {
		if only != "" && host != only {
			continue
		}
		var from *Anchor
		if a, ok := o.From[host]; ok && !o.Full {
			from = &a
		}
		out = append(out, c.verifyHost(ctx, host, keys[host], v.Checkpoints(host), from))
	}
	if only != "" && len(out) == 0 {
		return nil, fmt.Errorf("no host %s in the fleet", only)
	}
	return out, nil
}

func (c *Client) verifyHost(ctx context.Context, host, key string, cps []SignedCheckpoint, from *Anchor) Verification {
	res := Verification{Host: host, Checkpoints: len(cps)}
	pub, err := base64.StdEncoding.DecodeString(key)
	if key == "" || err != nil || len(pub) != ed25519.PublicKeySize {
		res.Status, res.Message = "key-refused", fmt.Sprintf("%s has no pinned fleet key: its checkpoints cannot be trusted", host)
		return res
	}
	var good []SignedCheckpoint
	for _, cp := range cps {
		if !cp.Verify(pub) || cp.Host != host {
			res.Status, res.BadSeq, res.BadAt = "key-refused", cp.Seq, cp.At
			res.Message = fmt.Sprintf("%s: checkpoint at seq %d (%s) is not signed by its pinned key: refused", host, cp.Seq, cp.At.Format(time.RFC3339))
			return res
		}
		good = append(good, cp)
	}
	if len(good) == 0 && from == nil {
		res.Status, res.Message = "unverified", fmt.Sprintf("%s has published no checkpoint yet", host)
		return res
	}
	if from != nil {
		// Only what was witnessed after the anchor is checked; the
		// anchor itself was checked before, and a second signed hash
		// for its seq is a forked history.
		var after []SignedCheckpoint
		for _, cp := range good {
			switch {
			case cp.Seq == from.Seq && cp.Hash != from.Hash:
				res.Status, res.BadSeq, res.BadAt = "mismatch", cp.Seq, cp.At
				res.Message = fmt.Sprintf("%s: MISMATCH at checkpoint seq %d (%s): it signed hash %s, but the checkpoint verified before says %s; its history forked",
					host, cp.Seq, cp.At.Format(time.RFC3339), cp.Hash[:min(16, len(cp.Hash))], from.Hash[:min(16, len(from.Hash))])
				return res
			case cp.Seq > from.Seq:
				after = append(after, cp)
			}
		}
		good = after
		res.From = from.Seq
	}
	seqs := make([]uint64, len(good))
	for i, cp := range good {
		seqs[i] = cp.Seq
	}
	b, _ := json.Marshal(VerifyRequest{Seqs: seqs, From: from})
	ctx, cancel := context.WithTimeout(ctx, VerifyTimeout)
	defer cancel()
	m, err := c.nc.RequestWithContext(ctx, VerifySubject(host), b)
	if err != nil {
		res.Status = "unverified"
		res.Message = fmt.Sprintf("%s did not answer (%v): UNVERIFIED, not fine; %d checkpoints wait to be checked", host, err, len(good))
		return res
	}
	var vr VerifyReply
	if err := json.Unmarshal(m.Data, &vr); err != nil || vr.Error != "" {
		res.Status = "unverified"
		res.Message = fmt.Sprintf("%s answered no hashes (%s): UNVERIFIED", host, firstNonEmpty(vr.Error, fmt.Sprint(err)))
		return res
	}
	res.Head = vr.Head
	if from != nil && vr.Head < from.Seq {
		res.Status, res.BadSeq, res.BadAt = "mismatch", from.Seq, from.At
		res.Message = fmt.Sprintf("%s: MISMATCH at checkpoint seq %d (%s): the host's chain now ends at %d; receipts were removed after they were witnessed",
			host, from.Seq, from.At.Format(time.RFC3339), vr.Head)
		return res
	}
	for _, cp := range good {
		got, ok := vr.Hashes[cp.Seq]
		if !ok || got != cp.Hash {
			res.Status, res.BadSeq, res.BadAt = "mismatch", cp.Seq, cp.At
			if !ok {
				res.Message = fmt.Sprintf("%s: MISMATCH at checkpoint seq %d (%s): the host's chain now ends at %d; receipts were removed after they were witnessed",
					host, cp.Seq, cp.At.Format(time.RFC3339), vr.Head)
			} else {
				res.Message = fmt.Sprintf("%s: MISMATCH at checkpoint seq %d (%s): witnessed hash %s, the host's receipts now hash to %s; they were rewritten after the checkpoint",
					host, cp.Seq, cp.At.Format(time.RFC3339), cp.Hash[:16], got[:min(16, len(got))])
			}
			return res
		}
	}
	res.Status = "verified"
	switch {
	case from != nil && len(good) == 0:
		res.Anchor = from
		res.Message = fmt.Sprintf("%s: no checkpoint since seq %d, verified before (its chain goes on to %d); --full re-checks from seq 1", host, from.Seq, vr.Head)
	case from != nil:
		last := good[len(good)-1]
		res.Anchor = &Anchor{Seq: last.Seq, Hash: last.Hash, At: last.At}
		res.Message = fmt.Sprintf("%s: %d checkpoints match, from seq %d (verified before) up to seq %d; --full re-checks from seq 1", host, len(good), from.Seq, last.Seq)
	default:
		last := good[len(good)-1]
		res.Anchor = &Anchor{Seq: last.Seq, Hash: last.Hash, At: last.At}
		res.Message = fmt.Sprintf("%s: %d checkpoints match, up to seq %d", host, len(good), last.Seq)
	}
	return res
}

func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" && x != "<nil>" {
			return x
		}
	}
	return ""
}

// FleetRequest is one request as the fleet knows it.
type FleetRequest struct {
	Host    string                `json:"host"`
	Seq     uint64                `json:"seq"`
	Request storage.RequestRecord `json:"request"`
}

// Pending reports whether it still waits at now.
func (r FleetRequest) Pending(now time.Time) bool { return r.Request.Pending(now) }
