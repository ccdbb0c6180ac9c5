package fleet

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"warden/engine"
	"warden/storage"
)

// rewriteReceipt edits receipt seq's summary in a closed data dir's store
// and re-hashes the chain after it, as root on the host could: the
// host's own `receipts verify` then finds nothing.
func rewriteReceipt(t *testing.T, data string, seq uint64, summary string) {
	t.Helper()
	db, err := bolt.Open(filepath.Join(data, storage.DBFile), 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("receipts"))
		if b == nil {
			return fmt.Errorf("no receipts bucket")
		}
		prev := ""
		c := b.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if len(k) != 8 {
				continue
			}
			var rc storage.Receipt
			if err := json.Unmarshal(v, &rc); err != nil {
				return err
			}
			if s := binary.BigEndian.Uint64(k); s < seq {
				prev = rc.Hash
				continue
			} else if s == seq {
				rc.Summary = summary
			} else {
				rc.Prev = prev
			}
			if rc.Hash, err = rc.ComputeHash(); err != nil {
				return err
			}
			prev = rc.Hash
			var nb bytes.Buffer
			enc := json.NewEncoder(&nb)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(rc); err != nil {
				return err
			}
			if err := b.Put(append([]byte(nil), k...), bytes.TrimSuffix(nb.Bytes(), []byte("\n"))); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestVerifyFromAnchor: a verify anchors at the newest checkpoint that
// matched; the next one checks only what was witnessed after it. A
// rewrite after the anchor is found; one before it is found with Full
// (and not without: that is the trade, as with `receipts verify`).
func TestVerifyFromAnchor(t *testing.T) {
	url, creds := testNats(t)
	admin, err := Dial(url, mustCreds(t, creds, "admin"), "admin", RoleOperator)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx := t.Context()
	if err := admin.Init(ctx, InitOptions{MaxBytes: 64 << 20}); err != nil {
		t.Fatal(err)
	}
	op, err := Dial(url, mustCreds(t, creds, "alice"), "", RoleOperator)
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	data := filepath.Join(t.TempDir(), "data")
	var e *engine.Engine
	var h *Host
	up := func() {
		t.Helper()
		if e, err = engine.Open(engine.Options{DataDir: data}); err != nil {
			t.Fatal(err)
		}
		if h, err = Join(e, HostOptions{URL: url, Creds: mustCreds(t, creds, "hostc"), Name: "hostc", Version: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	down := func() { h.Close(); e.Close() }
	var rev uint64
	work := func(n int) {
		t.Helper()
		for range n {
			p, err := e.SetPolicy(engine.LocalActor(), engine.Policy{Subject: "module:m", Network: rev%2 == 0}, rev)
			if err != nil {
				t.Fatal(err)
			}
			rev = p.Revision
		}
	}
	newest := func() (*View, uint64) {
		v, err := op.Load(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		var top uint64
		for _, cp := range v.Checkpoints("hostc") {
			top = max(top, cp.Seq)
		}
		return v, top
	}

	up()
	work(150)
	waitFor(t, "a checkpoint at seq 100", 10*time.Second, func() bool { _, top := newest(); return top >= 100 })
	v, _ := newest()
	res, err := op.Verify(ctx, v, VerifyOptions{Only: "hostc"})
	if err != nil || len(res) != 1 || res[0].Status != "verified" || res[0].Anchor == nil || res[0].From != 0 {
		t.Fatalf("the first verify: %+v %v", res, err)
	}
	anchor := *res[0].Anchor
	from := map[string]Anchor{"hostc": anchor}

	work(150)
	waitFor(t, "a checkpoint after the anchor", 15*time.Second, func() bool { _, top := newest(); return top > anchor.Seq })
	v, _ = newest()
	res, err = op.Verify(ctx, v, VerifyOptions{From: from})
	if err != nil || len(res) != 1 || res[0].Status != "verified" || res[0].From != anchor.Seq || res[0].Anchor.Seq <= anchor.Seq {
		t.Fatalf("a verify from the anchor: %+v %v", res, err)
	}
	// The host does not publish while it is down, and v is what the
	// fleet witnessed before either rewrite.
	down()

	// A rewrite before the anchor: not seen from it, seen with Full.
	rewriteReceipt(t, data, 5, "nothing to see here")
	up()
	res, err = op.Verify(ctx, v, VerifyOptions{From: from})
	if err != nil || res[0].Status != "verified" {
		t.Errorf("a verify from the anchor after a rewrite before it: %+v %v", res, err)
	}
	res, err = op.Verify(ctx, v, VerifyOptions{From: from, Full: true})
	if err != nil || res[0].Status != "mismatch" || res[0].BadSeq == 0 || res[0].BadSeq > anchor.Seq || res[0].From != 0 {
		t.Errorf("--full after a rewrite before the anchor: %+v %v (anchor %d)", res, err, anchor.Seq)
	}
	down()

	// A rewrite after the anchor: found from the anchor.
	rewriteReceipt(t, data, anchor.Seq+10, "nor here")
	up()
	defer down()
	res, err = op.Verify(ctx, v, VerifyOptions{From: from})
	if err != nil || res[0].Status != "mismatch" || res[0].BadSeq <= anchor.Seq || res[0].From != anchor.Seq {
		t.Errorf("a verify from the anchor after a rewrite after it: %+v %v (anchor %d)", res, err, anchor.Seq)
	}
	t.Logf("anchor at %d; after the rewrite at %d: %s", anchor.Seq, anchor.Seq+10, res[0].Message)
}
