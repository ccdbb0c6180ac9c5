package fleethost

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/engine/fleet"
	"github.com/wardenhq/warden/engine/sdk/hookkit"
)

// BenchmarkHostDecide: an operator's decision round trip to a real host
// (real engine and store, real nats-server), where the load test's sims
// answer from memory. "not-found" is the baseline: the same subjects,
// decoding and reply, with no request to decide; "approve" decides a
// pending request (a hook's operator.confirm), which commits the decision and
// its receipt to the store (fsync) before the host answers. Their ratio
// is what the host's commit adds to the round trip. Run with:
//
//	go test -run '^$' -bench BenchmarkHostDecide -benchtime 40x -count 3 ./engine/fleet/
func BenchmarkHostDecide(b *testing.B) {
	url, creds := testNats(b)
	admin, err := fleet.Dial(url, mustCreds(b, creds, "admin"), "admin", fleet.RoleOperator)
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close()
	if err := admin.Init(b.Context(), fleet.InitOptions{MaxBytes: 64 << 20}); err != nil {
		b.Fatal(err)
	}
	cache, _ := os.UserCacheDir()
	os.MkdirAll(cache, 0o700)
	base, err := os.MkdirTemp(cache, "warden-fleet-bench-") // modules under /tmp are refused
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(base)
	os.Chmod(base, 0o755)
	// A module whose hook asks the operator once (this test binary is
	// its `warden`: TestMain answers "bench-confirm").
	hello := filepath.Join(base, "asker")
	os.MkdirAll(filepath.Join(hello, "hooks"), 0o755)
	os.WriteFile(filepath.Join(hello, "module.yaml"), []byte("id: asker\nversion: 1.0.0\ndescription: asks once\nhooks:\n  ask:\n    run: [./hooks/ask.sh]\n    timeout: 1m\n    requires: [operator]\n"), 0o644)
	os.WriteFile(filepath.Join(hello, "hooks", "ask.sh"), []byte("#!/bin/sh\nexec warden bench-confirm\n"), 0o755)
	e, err := engine.Open(engine.Options{DataDir: filepath.Join(base, "data")})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	if _, err := e.AddModule(engine.LocalActor(), hello); err != nil {
		b.Fatal(err)
	}
	h, err := Join(e, HostOptions{URL: url, Creds: mustCreds(b, creds, "hostb"), Name: "hostb", Version: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	defer e.AttachOperator()()
	op, err := fleet.Dial(url, mustCreds(b, creds, "alice"), "", fleet.RoleOperator)
	if err != nil {
		b.Fatal(err)
	}
	defer op.Close()

	b.Run("not-found", func(b *testing.B) {
		for b.Loop() {
			if r, err := op.Decide(b.Context(), "hostb", fleet.Decision{Request: 1 << 40, Verdict: "approve-once"}); err != nil || r.Code != fleet.CodeNotFound {
				b.Fatalf("%+v %v", r, err)
			}
		}
	})
	b.Run("approve", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			if _, err := e.StartRun(engine.LocalActor(), engine.RunRequest{Module: "asker", Hook: "ask", Jail: engine.JailOff}); err != nil {
				b.Fatal(err)
			}
			var id uint64
			for deadline := time.Now().Add(10 * time.Second); id == 0; time.Sleep(2 * time.Millisecond) {
				if rs, err := e.Requests(engine.RequestFilter{}); err == nil && len(rs) > 0 {
					id = rs[0].ID
				}
				if time.Now().After(deadline) {
					b.Fatal("no request from asker/ask")
				}
			}
			b.StartTimer()
			if r, err := op.Decide(b.Context(), "hostb", fleet.Decision{Request: id, Verdict: "approve-once"}); err != nil || r.Code != fleet.CodeOK {
				b.Fatalf("%+v %v", r, err)
			}
		}
	})
}

// TestMain lets this test binary be a hook's `warden` for
// BenchmarkHostDecide: "bench-confirm" asks the operator once.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "bench-confirm" {
		c, err := hookkit.Connect()
		if err != nil {
			os.Exit(3)
		}
		c.Confirm("bench")
		c.Close()
		os.Exit(0)
	}
	os.Exit(m.Run())
}
