package jail

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// ProbeCache keeps what probing bwrap costs an exec for (`bwrap
// --version` at admission, and the try of a user namespace) in a small
// file of the data dir, so that each warden process (every CLI verb) does
// not pay for them again. An answer is kept under a key of what would
// change it: the binary's identity (device, inode, size, mtime, owner,
// mode) for its version; that, the boot, this process's user namespace
// and uid for the namespace try. A new bwrap, a reboot or another
// container probes again. The admission's file checks (owner, modes,
// every ancestor) are never cached: they are a few lstat calls.
type ProbeCache struct {
	// Path is the cache file ("" or a nil cache: nothing is kept).
	Path string
	mu   sync.Mutex
}

// ProbeCacheName is the cache file's name in the data dir.
const ProbeCacheName = "jail.probe"

// maxProbeEntries bounds the file: old keys are dropped.
const maxProbeEntries = 16

type probeEntry struct {
	Key     string         `json:"key"`
	Version string         `json:"version,omitempty"`
	Userns  *UsernsRefused `json:"userns,omitempty"`
}

// binaryID is what identifies the file at path for a cache key.
func binaryID(path string) (string, bool) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return "", false
	}
	return fmt.Sprintf("%s:%d:%d:%d:%d.%d:%d:%o", path, st.Dev, st.Ino, st.Size, st.Mtim.Sec, st.Mtim.Nsec, st.Uid, st.Mode), true
}

// usernsKey adds to the binary's identity what a namespace try depends on.
func usernsKey(bwrap string) (string, bool) {
	id, ok := binaryID(bwrap)
	if !ok {
		return "", false
	}
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", false
	}
	ns, err := os.Readlink("/proc/self/ns/user")
	if err != nil {
		return "", false
	}
	return fmt.Sprintf("userns|%s|%s|%s|%d", id, strings.TrimSpace(string(boot)), ns, os.Geteuid()), true
}

func (c *ProbeCache) load() []probeEntry {
	raw, err := os.ReadFile(c.Path)
	if err != nil || len(raw) > 64<<10 {
		return nil
	}
	var es []probeEntry
	if json.Unmarshal(raw, &es) != nil {
		return nil
	}
	return es
}

// get finds key's entry.
func (c *ProbeCache) get(key string) (probeEntry, bool) {
	if c == nil || c.Path == "" {
		return probeEntry{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.load() {
		if e.Key == key {
			return e, true
		}
	}
	return probeEntry{}, false
}

// put keeps e, written whole to a new file and renamed over the old (a
// reader never sees half of it). A cache that cannot be written only
// costs the next process its probe.
func (c *ProbeCache) put(e probeEntry) {
	if c == nil || c.Path == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	es := []probeEntry{e}
	for _, old := range c.load() {
		if old.Key != e.Key && len(es) < maxProbeEntries {
			es = append(es, old)
		}
	}
	raw, err := json.Marshal(es)
	if err != nil {
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(c.Path), ProbeCacheName+".*")
	if err != nil {
		return
	}
	_, err = tmp.Write(raw)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), c.Path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
}
