package jail

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestProbeCacheKeepsBwrapsAnswers: the version and the namespace try are
// read from the data dir's cache while the binary is the same one (a
// planted answer under the right key is what the next process gets), and
// probed again for a key that no longer matches.
func TestProbeCacheKeepsBwrapsAnswers(t *testing.T) {
	if _, err := os.Stat(DefaultBwrap); err != nil {
		t.Skip("bubblewrap is not installed")
	}
	cache := &ProbeCache{Path: filepath.Join(t.TempDir(), ProbeCacheName)}
	b, err := AdmitBwrapCached(DefaultBwrap, cache)
	if err != nil {
		t.Fatal(err)
	}
	real := b.Version
	es := cache.load()
	if len(es) != 1 || es[0].Version != real {
		t.Fatalf("after one admission the cache holds %+v, want the version %q", es, real)
	}
	// The next process reads it: plant another answer under the same key.
	es[0].Version = "planted"
	raw, _ := json.Marshal(es)
	os.WriteFile(cache.Path, raw, 0o600)
	if b, _ := AdmitBwrapCached(DefaultBwrap, cache); b == nil || b.Version != "planted" {
		t.Errorf("a cached version under the binary's key was not used: %+v", b)
	}
	// A key of another binary (its inode, size or mtime changed) is not it.
	es[0].Key += "x"
	raw, _ = json.Marshal(es)
	os.WriteFile(cache.Path, raw, 0o600)
	if b, _ := AdmitBwrapCached(DefaultBwrap, cache); b == nil || b.Version != real {
		t.Errorf("a stale key was taken for the binary: %+v, want %q", b, real)
	}

	// The namespace try: kept, and read back by a process that has not
	// tried (the per-process answers forgotten).
	usernsTries.Lock()
	usernsTries.m = nil
	usernsTries.Unlock()
	first := TryUsernsCached(DefaultBwrap, cache)
	key, _ := usernsKey(DefaultBwrap)
	if _, ok := cache.get(key); !ok {
		t.Fatalf("the namespace try was not kept (answer %v)", first)
	}
	es = cache.load()
	for i := range es {
		if es[i].Key == key {
			es[i].Userns = &UsernsRefused{Cause: "planted"}
		}
	}
	raw, _ = json.Marshal(es)
	os.WriteFile(cache.Path, raw, 0o600)
	usernsTries.Lock()
	usernsTries.m = nil
	usernsTries.Unlock()
	if r := TryUsernsCached(DefaultBwrap, cache); r == nil || r.Cause != "planted" {
		t.Errorf("a cached namespace answer was not used: %+v", r)
	}
	usernsTries.Lock()
	usernsTries.m = nil
	usernsTries.Unlock()
}
