package control

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/engine/hands"
	"github.com/wardenhq/warden/engine/hands/handstest"
)

// TestHandsOverSocket runs the hands wizards' calls from an attached
// client against the real Docker Engine: every step's progress reaches
// the client as it happens, a failed init keeps its evidence type, and a
// second finish still matches ErrAlreadyFinished.
func TestHandsOverSocket(t *testing.T) {
	sock := handstest.Docker(t)
	e, _ := served(t)
	c := attach(t, e.DataDir())
	base := handstest.Base(t, sock)
	ctx := context.Background()

	var mu sync.Mutex
	var steps []string
	progress := func(step, _ string) {
		mu.Lock()
		steps = append(steps, step)
		mu.Unlock()
	}
	root := filepath.Join(base, "task")
	res, err := c.HandsInit(ctx, engine.LocalActor(), hands.InitOptions{Root: root, EngineSocket: sock, Image: handstest.Image,
		Access: hands.AccessFiles, Progress: progress})
	if err != nil {
		t.Fatal(err)
	}
	if res.Owner != string(engine.LocalActor()) || res.ContainerID == "" {
		t.Fatalf("init over the socket: %+v", res)
	}
	mu.Lock()
	got := strings.Join(steps, " ")
	mu.Unlock()
	for _, want := range []string{"prepared", "running", "ready"} {
		if !strings.Contains(got, want) {
			t.Fatalf("progress over the socket %q lacks %q", got, want)
		}
	}
	ls, err := e.HandsList()
	if err != nil {
		t.Fatal(err)
	}
	rs, err := c.HandsList()
	sameErr(t, "HandsList", nil, err)
	sameJSON(t, "HandsList", ls, rs)
	st, err := c.HandsStatus(ctx, root)
	if err != nil || len(st.Drift) != 0 {
		t.Fatalf("status over the socket: %+v %v", st, err)
	}

	steps = nil
	fin, err := c.HandsFinish(ctx, engine.LocalActor(), root, progress)
	if err != nil || !fin.Stopped || len(steps) == 0 {
		t.Fatalf("finish over the socket: %+v %v (steps %v)", fin, err, steps)
	}
	if _, err := c.HandsFinish(ctx, engine.LocalActor(), root, nil); !errors.Is(err, hands.ErrAlreadyFinished) {
		t.Fatalf("second finish over the socket: %v", err)
	}

	bad := filepath.Join(base, "bad")
	// A missing image is refused before the root exists (nothing burnt);
	// the refusal crosses the socket as it was said. (A failure with
	// evidence crossing it: TestHandsInitCancelledOverSocket.)
	_, err = c.HandsInit(ctx, engine.LocalActor(), hands.InitOptions{Root: bad, EngineSocket: sock, Image: "warden-test/absent:0", Access: hands.AccessFiles})
	var failed *engine.HandsInitFailedError
	if err == nil || errors.As(err, &failed) || !strings.Contains(err.Error(), "never pulls") || !strings.Contains(err.Error(), "run the same init again") {
		t.Fatalf("refused init over the socket: %v", err)
	}
	if _, serr := os.Lstat(bad); !errors.Is(serr, os.ErrNotExist) {
		t.Fatalf("a refused init created its root: %v", serr)
	}
}

// TestHandsInitCancelledOverSocket: cancelling the client's context (what
// ctrl-c does to `warden hands init` attached to another process) cancels
// the init in the serving process, which stops its container and keeps
// its evidence, and the client gets that failure.
func TestHandsInitCancelledOverSocket(t *testing.T) {
	sock := handstest.Docker(t)
	t.Setenv(hands.PauseEnv, "running")
	e, _ := served(t)
	c := attach(t, e.DataDir())
	root := filepath.Join(handstest.Base(t, sock), "task")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := c.HandsInit(ctx, engine.LocalActor(), hands.InitOptions{Root: root, EngineSocket: sock, Image: handstest.Image,
		Access: hands.AccessFiles, Progress: func(step, _ string) {
			if step == "running" {
				cancel()
			}
		}})
	var failed *engine.HandsInitFailedError
	if !errors.As(err, &failed) || !failed.Evidence.Stopped {
		t.Fatalf("cancelled init over the socket: %v", err)
	}
	if ls, _ := e.HandsList(); len(ls) != 1 || ls[0].Phase != "failed" {
		t.Fatalf("hands after a cancelled init: %+v", ls)
	}
}
