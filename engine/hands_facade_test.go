package engine

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wardenhq/warden/engine/hands"
	"github.com/wardenhq/warden/engine/hands/handstest"
	"github.com/wardenhq/warden/storage"
)

func handsKinds(t *testing.T, e *Engine, root string) []string {
	t.Helper()
	var kinds []string
	for _, r := range allReceipts(t, e) {
		if r.Subject == "hands:"+root {
			kinds = append(kinds, r.Kind)
		}
	}
	return kinds
}

// Every phase is a receipt and updates the known-root record; ready sets
// the initial policy at revision 0; finish revokes every grant.
func TestHandsFacadeInitFinish(t *testing.T) {
	sock := handstest.Docker(t)
	e := openEngine(t, Options{})
	base := handstest.Base(t, sock)
	ctx := context.Background()

	files := filepath.Join(base, "files")
	res, err := e.HandsInit(ctx, testActor, hands.InitOptions{Root: files, EngineSocket: sock, Image: handstest.Image, Access: hands.AccessFiles})
	if err != nil {
		t.Fatal(err)
	}
	if res.Owner != string(testActor) {
		t.Errorf("owner %q", res.Owner)
	}
	want := "hands.prepared hands.creating hands.creating hands.running policy.set hands.ready"
	if got := strings.Join(handsKinds(t, e, files), " "); got != want {
		t.Errorf("receipts %s, want %s", got, want)
	}
	p, exists, err := e.Policy("hands:" + files)
	if err != nil || !exists || p.Revision != 0 || !p.Workspace.Read || !p.Workspace.Write || p.Execute || p.Network || len(p.Rules) != 0 {
		t.Fatalf("initial policy %+v %v %v", p, exists, err)
	}
	list, err := e.HandsList()
	if err != nil || len(list) != 1 || list[0].Root != files || list[0].Phase != "ready" || list[0].Access != "files" || list[0].ContainerID != res.ContainerID {
		t.Fatalf("list %+v %v", list, err)
	}

	none := filepath.Join(base, "none")
	if _, err := e.HandsInit(ctx, testActor, hands.InitOptions{Root: none, EngineSocket: sock, Image: handstest.Image, Access: hands.AccessNone}); err != nil {
		t.Fatal(err)
	}
	if p, _, _ := e.Policy("hands:" + none); p.Workspace.Read || p.Workspace.Write || p.Revision != 0 {
		t.Errorf("access none policy %+v", p)
	}
	st, err := e.HandsStatus(ctx, none)
	if err != nil || len(st.Drift) != 0 {
		t.Errorf("status %+v %v", st, err)
	}

	// A grant made later is revoked by finish too.
	p.Execute = true
	p.Rules = []storage.Rule{{Operation: "hands.exec", Digest: strings.Repeat("a", 64)}}
	if _, err := e.SetPolicy(testActor, p, 0); err != nil {
		t.Fatal(err)
	}
	fin, err := e.HandsFinish(ctx, testActor, files, nil)
	if err != nil || !fin.Stopped {
		t.Fatalf("finish %+v %v", fin, err)
	}
	p, _, _ = e.Policy("hands:" + files)
	if p.Revision != 2 || p.Workspace.Read || p.Workspace.Write || p.Execute || p.Network || len(p.Rules) != 0 {
		t.Fatalf("policy after finish %+v", p)
	}
	if kinds := handsKinds(t, e, files); strings.Join(kinds[len(kinds)-2:], " ") != "hands.finished policy.set" {
		t.Errorf("receipts %v", kinds)
	}
	if list, _ := e.HandsList(); list[0].Root != files || list[0].Phase != "finished" {
		t.Errorf("list after finish %+v", list)
	}

	// Finishing twice says so, and still makes sure no grant survived.
	p.Network = true
	if _, err := e.SetPolicy(testActor, p, p.Revision); err != nil {
		t.Fatal(err)
	}
	if _, err := e.HandsFinish(ctx, testActor, files, nil); !errors.Is(err, hands.ErrAlreadyFinished) {
		t.Fatalf("second finish: %v", err)
	}
	if p, _, _ := e.Policy("hands:" + files); p.Network {
		t.Error("a grant survived the second finish")
	}
	before := len(allReceipts(t, e))
	if _, err := e.HandsFinish(ctx, testActor, files, nil); !errors.Is(err, hands.ErrAlreadyFinished) {
		t.Fatalf("third finish: %v", err)
	}
	if after := len(allReceipts(t, e)); after != before {
		t.Errorf("a no-op finish wrote %d receipts", after-before)
	}
}

// A failed init (here: cancelled once its receipt exists) is receipted
// and sets no policy. A refused one (a missing image) records nothing.
func TestHandsFacadeFailedInit(t *testing.T) {
	sock := handstest.Docker(t)
	e := openEngine(t, Options{})
	base := handstest.Base(t, sock)
	refused := filepath.Join(base, "refused")
	if _, err := e.HandsInit(context.Background(), testActor, hands.InitOptions{Root: refused, EngineSocket: sock, Image: "warden-test/absent:0", Access: hands.AccessFiles}); err == nil {
		t.Fatal("init with a missing image succeeded")
	}
	if got := handsKinds(t, e, refused); len(got) != 0 {
		t.Errorf("a refused init wrote receipts %v", got)
	}
	root := filepath.Join(base, "root")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := e.HandsInit(ctx, testActor, hands.InitOptions{Root: root, EngineSocket: sock, Image: handstest.Image, Access: hands.AccessFiles,
		Progress: func(step, _ string) {
			if step == "prepared" {
				cancel()
			}
		}})
	if err == nil || !strings.Contains(err.Error(), "initialization failed; recovery evidence retained under "+root) {
		t.Fatalf("init: %v", err)
	}
	if got := strings.Join(handsKinds(t, e, root), " "); got != "hands.prepared hands.failed" {
		t.Errorf("receipts %s", got)
	}
	if _, exists, _ := e.Policy("hands:" + root); exists {
		t.Error("a failed init set a policy")
	}
	if list, _ := e.HandsList(); len(list) != 1 || list[0].Phase != "failed" {
		t.Errorf("list %+v", list)
	}
}
