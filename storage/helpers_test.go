package storage

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Environment of the helper process (the standard re-exec pattern).
const (
	envHelper = "WARDEN_STORAGE_TEST_HELPER" // "hold" or "append"
	envDir    = "WARDEN_STORAGE_TEST_DIR"
)

// newDir returns a data dir path that does not exist yet, so Open creates it.
func newDir(t testing.TB) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "data")
}

func openStore(t testing.TB, dir string) *Store {
	t.Helper()
	s, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	return s
}

// rawBolt closes nothing: the caller must have closed the store. It opens
// warden.db with plain bbolt, runs fn in a write transaction and closes it.
func rawBolt(t testing.TB, dir string, fn func(tx *bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dir, DBFile), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatalf("raw bolt open: %v", err)
	}
	if err := db.Update(fn); err != nil {
		db.Close()
		t.Fatalf("raw bolt update: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("raw bolt close: %v", err)
	}
}

func rawGet(t testing.TB, dir string, bucket, key []byte) []byte {
	t.Helper()
	var out []byte
	rawBolt(t, dir, func(tx *bolt.Tx) error {
		v := tx.Bucket(bucket).Get(key)
		if v == nil {
			return fmt.Errorf("no key %q in %s", key, bucket)
		}
		out = append([]byte(nil), v...)
		return nil
	})
	return out
}

func rawPut(t testing.TB, dir string, bucket, key, val []byte) {
	t.Helper()
	rawBolt(t, dir, func(tx *bolt.Tx) error { return tx.Bucket(bucket).Put(key, val) })
}

func wantCorrupt(t testing.TB, err error, bucket, key string) {
	t.Helper()
	var ce *CorruptError
	if !errors.As(err, &ce) {
		t.Fatalf("want *CorruptError for %s/%s, got %T: %v", bucket, key, err, err)
	}
	if ce.Bucket != bucket || ce.Key != key {
		t.Fatalf("CorruptError names %q/%q, want %q/%q", ce.Bucket, ce.Key, bucket, key)
	}
	if !strings.Contains(ce.Error(), bucket) || !strings.Contains(ce.Error(), key) {
		t.Fatalf("message does not name bucket and key: %v", ce)
	}
}

// helperChild is a re-exec'd test binary running TestHelperProcess.
type helperChild struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *lockedBuffer
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startHelper starts the child and waits until it reports "ready" (the
// store is open), so the caller knows the lock is held.
func startHelper(t testing.TB, mode, dir string) *helperChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), envHelper+"="+mode, envDir+"="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	c := &helperChild{cmd: cmd, stderr: &lockedBuffer{}}
	cmd.Stderr = c.stderr
	var err error
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		ready <- line
		io.Copy(io.Discard, out)
	}()
	select {
	case line := <-ready:
		if strings.TrimSpace(line) != "ready" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("helper did not start: %q; stderr: %s", line, c.stderr)
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("helper never became ready; stderr: %s", c.stderr)
	}
	return c
}

// TestHelperProcess is not a test: it is the body of child processes
// started by other tests.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(envHelper)
	if mode == "" {
		t.Skip("helper process only")
	}
	s, err := Open(Options{Dir: os.Getenv(envDir)})
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper open:", err)
		os.Exit(2)
	}
	switch mode {
	case "hold":
		fmt.Println("ready")
		io.Copy(io.Discard, os.Stdin) // until the parent closes stdin
		s.Close()
		os.Exit(0)
	case "append":
		fmt.Println("ready")
		var wg sync.WaitGroup
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for i := 0; ; i++ {
					pad := strings.Repeat("x", (g*131+i*37)%2048)
					if _, err := s.AppendReceipt(Draft{Kind: "crash.test", Actor: fmt.Sprintf("g%d", g), Subject: "s", Summary: fmt.Sprintf("append %d", i),
						Details: map[string]any{"g": g, "i": i, "pad": pad}}); err != nil {
						fmt.Fprintln(os.Stderr, "append:", err)
						os.Exit(3)
					}
				}
			}(g)
		}
		wg.Wait() // never returns: the parent kills us
	default:
		fmt.Fprintln(os.Stderr, "unknown helper mode", mode)
		os.Exit(2)
	}
}
