package caps

import (
	"sync"
	"sync/atomic"

	"github.com/wardenhq/warden/storage"
)

// validCache keeps, by token id, the records Classify found VALID (their
// MAC recomputed under the current root), so that a shell hook's
// hundredth connection does not read and decode its token record again:
// that was most of the broker's own cost per `warden hook` call (issue
// 25). A hit is judged again on everything that can change without a
// commit (the clock against Expires, the current generation); the MAC
// needs no second look, since the id is the token's one-way hash.
//
// Invariant: a cached record is used only while no token has been
// revoked since it was read. Every transaction that revokes (RevokeTx,
// RevokeSessionTx, Rotate) calls drop once it has committed
// (storage.Tx.AfterCommit), which moves the epoch; an entry carries the
// epoch read before its record was, so a record read from a snapshot
// older than a revocation is stale from the moment that revocation
// lands, whichever of the two finished first. A failed transaction
// revoked nothing and drops nothing. Records change only by revocation,
// so nothing else can make a cached VALID wrong.
type validCache struct {
	gen atomic.Uint64 // the epoch

	mu      sync.Mutex
	entries map[string]validEntry
}

type validEntry struct {
	rec   storage.TokenRecord
	epoch uint64
}

// maxValid bounds the cache: about one entry per live run or session.
// Past it the cache starts over (a miss costs one store read).
const maxValid = 1024

func (c *validCache) epoch() uint64 { return c.gen.Load() }

// drop forgets every entry: called after a commit that revoked tokens.
func (c *validCache) drop() { c.gen.Add(1) }

func (c *validCache) get(id string) (storage.TokenRecord, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[id]
	if !ok || e.epoch != c.gen.Load() {
		return storage.TokenRecord{}, false
	}
	return e.rec, true
}

func (c *validCache) put(id string, rec storage.TokenRecord, epoch uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if epoch != c.gen.Load() {
		return // a revocation landed meanwhile: the record may be stale
	}
	if c.entries == nil || len(c.entries) >= maxValid {
		c.entries = make(map[string]validEntry)
	}
	c.entries[id] = validEntry{rec: rec, epoch: epoch}
}
