package storage

import (
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func handsRecord() HandsRecord {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return HandsRecord{Root: "/h/t1", Owner: "local:test", Access: "files", EngineSocket: "/run/podman/podman.sock", Engine: "podman",
		DaemonID: "podman-0123", Image: "sha256:" + strings.Repeat("ab", 32), ContainerID: strings.Repeat("0f", 32),
		Generation: "2026-01-02T03:04:05Z", Phase: "ready", Created: now, Updated: now}
}

// A record keeps its engine; a record written before warden told engines
// apart (no engine key) still reads, as Docker; an unknown engine is
// refused and nothing is written.
func TestHandsRecordEngine(t *testing.T) {
	dir := newDir(t)
	s := openStore(t, dir)
	if _, err := s.Update(func(tx *Tx) error { return tx.PutHands(handsRecord()) }); err != nil {
		t.Fatal(err)
	}
	bad := handsRecord()
	bad.Root, bad.Engine = "/h/t2", "rkt"
	if _, err := s.Update(func(tx *Tx) error { return tx.PutHands(bad) }); err == nil || !strings.Contains(err.Error(), "engine") {
		t.Fatalf("an unknown engine was written: %v", err)
	}
	s.Close()

	// An old record, as an earlier build wrote it: no engine key.
	old := `{"root":"/h/t0","owner":"local:test","access":"none","engineSocket":"/run/docker.sock","daemonId":"AAAA:BBBB",` +
		`"image":"","containerId":"","generation":"","phase":"failed","created":"2026-01-01T00:00:00Z","updated":"2026-01-01T00:00:00Z"}`
	rawBolt(t, dir, func(tx *bolt.Tx) error { return tx.Bucket(bucketHands).Put([]byte("/h/t0"), []byte(old)) })

	s = openStore(t, dir)
	defer s.Close()
	var rs []HandsRecord
	if err := s.View(func(tx *Tx) (err error) { rs, err = tx.HandsRoots(); return err }); err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].Root != "/h/t0" || rs[0].Engine != "" || rs[0].EngineName() != "docker" || rs[1].EngineName() != "podman" {
		t.Fatalf("records %+v", rs)
	}
}
