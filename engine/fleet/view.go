package fleet

import (
	"encoding/json"
	"sort"
	"strings"
	"sync"
	"time"
)

// View folds the fleet's events into the current state: the latest
// state of every request and run of every host (the highest receipt seq
// wins, so events arriving twice or out of order change nothing), and
// each host's checkpoints. It is safe for concurrent use.
type View struct {
	mu          sync.RWMutex
	requests    map[reqKey]*FleetRequest
	runs        map[runKey]*HostRun
	checkpoints map[string][]SignedCheckpoint
	hosts       map[string]bool
	seen        map[string]time.Time // host/kind/seq already folded, and when it happened
	dupes       int
	// lastOnly keeps only each host's newest checkpoint (a live console).
	lastOnly  bool
	malformed int
	rev       uint64
}

type reqKey struct {
	host string
	id   uint64
}

type runKey struct{ host, id string }

// HostRun is a run on a host.
type HostRun struct {
	Host string     `json:"host"`
	Seq  uint64     `json:"seq"`
	Run  RunSummary `json:"run"`
}

// NewView is an empty view.
func NewView() *View {
	return &View{requests: map[reqKey]*FleetRequest{}, runs: map[runKey]*HostRun{}, checkpoints: map[string][]SignedCheckpoint{},
		hosts: map[string]bool{}, seen: map[string]time.Time{}}
}

// NewLiveView is a view for a long-running console: it keeps only each
// host's newest checkpoint, and Prune bounds the rest.
func NewLiveView() *View {
	v := NewView()
	v.lastOnly = true
	return v
}

// Prune forgets what ended before cutoff: decided or expired requests,
// ended runs, and the de-duplication memory of events that old. A live
// console calls it now and then so it runs for weeks in bounded memory.
func (v *View) Prune(cutoff time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for k, r := range v.requests {
		if !r.Pending(cutoff) && decidedAt(*r).Before(cutoff) {
			delete(v.requests, k)
		}
	}
	for k, r := range v.runs {
		if r.Run.Ended != nil && r.Run.Ended.Before(cutoff) {
			delete(v.runs, k)
		}
	}
	for k, at := range v.seen {
		if at.Before(cutoff) {
			delete(v.seen, k)
		}
	}
	v.rev++
}

// maxEventBytes bounds one event (the stream refuses bigger).
const maxEventBytes = 1 << 20

// Add folds one event published on subject. The host is the subject's,
// never the payload's: a host can publish only under its own name.
func (v *View) Add(subject string, data []byte) {
	toks := strings.Split(subject, ".")
	if len(toks) != 5 || toks[0] != "warden" || toks[1] != "host" || toks[3] != "evt" || !ValidName(toks[2]) {
		return
	}
	host, kind := toks[2], toks[4]
	var env Envelope
	if len(data) > maxEventBytes || json.Unmarshal(data, &env) != nil || env.Host != host {
		v.mu.Lock()
		v.malformed++
		v.mu.Unlock()
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.hosts[host] = true
	id := host + "/" + kind + "/" + itoa(env.Seq)
	if _, dup := v.seen[id]; dup {
		v.dupes++
		return
	}
	v.seen[id] = env.At
	v.rev++
	switch {
	case kind == KindRequest && env.Request != nil:
		k := reqKey{host, env.Request.ID}
		if old := v.requests[k]; old == nil || old.Seq < env.Seq {
			v.requests[k] = &FleetRequest{Host: host, Seq: env.Seq, Request: *env.Request}
		}
	case kind == KindRun && env.Run != nil:
		k := runKey{host, env.Run.ID}
		if old := v.runs[k]; old == nil || old.Seq < env.Seq {
			v.runs[k] = &HostRun{Host: host, Seq: env.Seq, Run: *env.Run}
		}
	case kind == KindCheckpoint && env.Checkpoint != nil:
		if v.lastOnly {
			if cps := v.checkpoints[host]; len(cps) == 0 || cps[0].Seq < env.Checkpoint.Seq {
				v.checkpoints[host] = []SignedCheckpoint{*env.Checkpoint}
			}
		} else {
			v.checkpoints[host] = append(v.checkpoints[host], *env.Checkpoint)
		}
	}
}

func itoa(n uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// Rev changes whenever the view does.
func (v *View) Rev() uint64 {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.rev
}

// Duplicates is how many events arrived more than once (the stream's
// de-duplication should keep it at 0).
func (v *View) Duplicates() int {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.dupes
}

// Requests lists requests: pending first (oldest first), then with all
// the decided ones, newest first.
func (v *View) Requests(all bool, now time.Time) []FleetRequest {
	maxDecided := 0
	if all {
		maxDecided = -1
	}
	return v.Queue(now, maxDecided)
}

// Queue is Requests with at most maxDecided decided ones (the newest;
// -1 for all): a console's queue stays the same size however long the
// fleet runs. It sorts pointers with precomputed keys, so 10,000
// pending requests cost about a millisecond.
func (v *View) Queue(now time.Time, maxDecided int) []FleetRequest {
	type item struct {
		at   int64
		host string
		r    *FleetRequest
	}
	v.mu.RLock()
	pending := make([]item, 0, len(v.requests))
	var decided []item
	for _, r := range v.requests {
		if r.Pending(now) {
			pending = append(pending, item{r.Request.Created.UnixNano(), r.Host, r})
		} else if maxDecided != 0 {
			decided = append(decided, item{decidedAt(*r).UnixNano(), r.Host, r})
		}
	}
	sort.Slice(pending, func(i, j int) bool {
		if pending[i].at != pending[j].at {
			return pending[i].at < pending[j].at
		}
		return pending[i].host < pending[j].host
	})
	sort.Slice(decided, func(i, j int) bool { return decided[i].at > decided[j].at })
	if maxDecided > 0 && len(decided) > maxDecided {
		decided = decided[:maxDecided]
	}
	out := make([]FleetRequest, 0, len(pending)+len(decided))
	for _, it := range pending {
		out = append(out, *it.r)
	}
	for _, it := range decided {
		out = append(out, *it.r)
	}
	v.mu.RUnlock()
	return out
}

func decidedAt(r FleetRequest) time.Time {
	if r.Request.Decision != nil {
		return r.Request.Decision.At
	}
	return r.Request.Expires
}

// Request finds one request.
func (v *View) Request(host string, id uint64) (FleetRequest, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	r := v.requests[reqKey{host, id}]
	if r == nil {
		return FleetRequest{}, false
	}
	return *r, true
}

// PendingByHost counts every host's pending requests in one pass.
func (v *View) PendingByHost(now time.Time) map[string]int {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := map[string]int{}
	for k, r := range v.requests {
		if r.Pending(now) {
			out[k.host]++
		}
	}
	return out
}

// PendingOn counts a host's pending requests.
func (v *View) PendingOn(host string, now time.Time) int {
	v.mu.RLock()
	defer v.mu.RUnlock()
	n := 0
	for k, r := range v.requests {
		if k.host == host && r.Pending(now) {
			n++
		}
	}
	return n
}

// Runs lists runs, newest first, at most limit (0: all).
func (v *View) Runs(limit int) []HostRun {
	v.mu.RLock()
	out := make([]HostRun, 0, len(v.runs))
	for _, r := range v.runs {
		out = append(out, *r)
	}
	v.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Run.Started.After(out[j].Run.Started) })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

// Checkpoints are a host's checkpoints in seq order.
func (v *View) Checkpoints(host string) []SignedCheckpoint {
	v.mu.RLock()
	out := append([]SignedCheckpoint(nil), v.checkpoints[host]...)
	v.mu.RUnlock()
	sort.SliceStable(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out
}

// LastCheckpoint is a host's newest checkpoint.
func (v *View) LastCheckpoint(host string) *Checkpoint {
	cps := v.Checkpoints(host)
	if len(cps) == 0 {
		return nil
	}
	c := cps[len(cps)-1].Checkpoint
	return &c
}

// HostNames lists the hosts that published anything.
func (v *View) HostNames() []string {
	v.mu.RLock()
	out := make([]string, 0, len(v.hosts))
	for h := range v.hosts {
		out = append(out, h)
	}
	v.mu.RUnlock()
	sort.Strings(out)
	return out
}
