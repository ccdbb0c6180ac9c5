package fleethost

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/engine/fleet"
	"github.com/wardenhq/warden/engine/fleet/fleettest"
	"github.com/wardenhq/warden/storage"
)

// TestVerifyFromAnchor: a verify anchors at the newest checkpoint that
// matched; the next one checks only what was witnessed after it. A
// rewrite after the anchor is found; one before it is found with Full
// (and not without: that is the trade, as with `receipts verify`).
func TestVerifyFromAnchor(t *testing.T) {
	url, creds := testNats(t)
	admin, err := fleet.Dial(url, mustCreds(t, creds, "admin"), "admin", fleet.RoleOperator)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx := t.Context()
	if err := admin.Init(ctx, fleet.InitOptions{MaxBytes: 64 << 20}); err != nil {
		t.Fatal(err)
	}
	op, err := fleet.Dial(url, mustCreds(t, creds, "alice"), "", fleet.RoleOperator)
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
	newest := func() (*fleet.View, uint64) {
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
	res, err := op.Verify(ctx, v, fleet.VerifyOptions{Only: "hostc"})
	if err != nil || len(res) != 1 || res[0].Status != "verified" || res[0].Anchor == nil || res[0].From != 0 {
		t.Fatalf("the first verify: %+v %v", res, err)
	}
	anchor := *res[0].Anchor
	from := map[string]fleet.Anchor{"hostc": anchor}

	work(150)
	waitFor(t, "a checkpoint after the anchor", 15*time.Second, func() bool { _, top := newest(); return top > anchor.Seq })
	v, _ = newest()
	res, err = op.Verify(ctx, v, fleet.VerifyOptions{From: from})
	if err != nil || len(res) != 1 || res[0].Status != "verified" || res[0].From != anchor.Seq || res[0].Anchor.Seq <= anchor.Seq {
		t.Fatalf("a verify from the anchor: %+v %v", res, err)
	}
	// The host does not publish while it is down, and v is what the
	// fleet witnessed before either rewrite.
	down()

	// A rewrite before the anchor: not seen from it, seen with Full.
	fleettest.RewriteReceipt(t, filepath.Join(data, storage.DBFile), 5, "nothing to see here")
	up()
	res, err = op.Verify(ctx, v, fleet.VerifyOptions{From: from})
	if err != nil || res[0].Status != "verified" {
		t.Errorf("a verify from the anchor after a rewrite before it: %+v %v", res, err)
	}
	res, err = op.Verify(ctx, v, fleet.VerifyOptions{From: from, Full: true})
	if err != nil || res[0].Status != "mismatch" || res[0].BadSeq == 0 || res[0].BadSeq > anchor.Seq || res[0].From != 0 {
		t.Errorf("--full after a rewrite before the anchor: %+v %v (anchor %d)", res, err, anchor.Seq)
	}
	down()

	// A rewrite after the anchor: found from the anchor.
	fleettest.RewriteReceipt(t, filepath.Join(data, storage.DBFile), anchor.Seq+10, "nor here")
	up()
	defer down()
	res, err = op.Verify(ctx, v, fleet.VerifyOptions{From: from})
	if err != nil || res[0].Status != "mismatch" || res[0].BadSeq <= anchor.Seq || res[0].From != anchor.Seq {
		t.Errorf("a verify from the anchor after a rewrite after it: %+v %v (anchor %d)", res, err, anchor.Seq)
	}
	t.Logf("anchor at %d; after the rewrite at %d: %s", anchor.Seq, anchor.Seq+10, res[0].Message)
}
