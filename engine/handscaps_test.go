package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wardenhq/warden/engine/hands"
	"github.com/wardenhq/warden/engine/hands/handstest"
	"github.com/wardenhq/warden/engine/sdk/hookkit"
)

// handsCapScenario is the hook side: it runs each op given on its command
// line through the hands capabilities and reports what came back.
func handsCapScenario(root string, ops []string) int {
	c, err := hookkit.Connect()
	if err != nil {
		say("connect: %v", err)
		return 1
	}
	defer c.Close()
	for i, op := range ops {
		kind, arg, _ := strings.Cut(op, ":")
		var v json.RawMessage
		switch kind {
		case "write":
			path, content, _ := strings.Cut(arg, "=")
			v, err = c.Call("hands", "write", root, path, content)
		case "read":
			v, err = c.Call("hands", "read", root, arg)
		case "exec":
			v, err = c.Call("hands", "exec", root, strings.Fields(arg))
		}
		if err != nil {
			say("op%d %s: %s", i, kind, err)
		} else {
			say("op%d %s ok %s", i, kind, v)
		}
	}
	return 0
}

// TestHandsCapabilitiesAskThePolicy runs a hook against a real hands root
// (access none: nothing allowed) and answers its requests as an operator
// would: approve-once, deny with a reason, approve-always, deny.
func TestHandsCapabilitiesAskThePolicy(t *testing.T) {
	sock := handstest.Docker(t)
	root := filepath.Join(handstest.Base(t, sock), "hands")
	ops := []string{
		"write:/workspace/a.txt=hello",  // asked: approve once -> written
		"write:/workspace/a.txt=hello",  // the same again: asked again, denied with a reason
		"exec:cat /workspace/a.txt",     // asked: approve always -> runs
		"exec:cat /workspace/a.txt",     // the identical call: the rule lets it through, no request
		"exec:cat /workspace/other.txt", // different argv: asked, denied
	}
	args := strings.Join(append([]string{"handscap", root}, ops...), ", ")
	e := setupRun(t, map[string]string{"caps": fmt.Sprintf("    run: [./hook.sh, %s]\n    requires: [hands]\n    timeout: 2m\n", args)})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := e.HandsInit(ctx, "local:test", hands.InitOptions{Root: root, EngineSocket: sock, Image: handstest.Image, Access: hands.AccessNone}); err != nil {
		t.Fatal(err)
	}
	defer e.HandsFinish(context.Background(), "local:test", root, nil)

	detach := e.AttachOperator()
	defer detach()
	sub := e.Subscribe()
	defer sub.Close()
	h, err := e.StartRun("local:test", RunRequest{Module: "testmod", Hook: "caps", Jail: JailOff})
	if err != nil {
		t.Fatal(err)
	}
	decisions := []func(id uint64) error{
		func(id uint64) error { _, err := e.Approve("local:test", id, ""); return err },
		func(id uint64) error { _, err := e.Deny("local:test", id, "not twice, please"); return err },
		func(id uint64) error { _, _, _, err := e.ApproveAlways("local:test", id, ""); return err },
		func(id uint64) error { _, err := e.Deny("local:test", id, "only a.txt"); return err },
	}
	var asked []string
	for len(asked) < len(decisions) {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("waiting for request %d: %v (run: %+v)", len(asked)+1, err, h)
		}
		if ev.Kind != EventRequest || ev.Request.Decision != nil {
			continue
		}
		q := ev.Request
		if q.Subject != "hands:"+root {
			t.Fatalf("request subject %q", q.Subject)
		}
		asked = append(asked, q.Operation+" "+string(q.Content))
		if err := decisions[len(asked)-1](q.ID); err != nil {
			t.Fatal(err)
		}
	}
	o := h.Wait()
	cs := checks(t, e, o.Run.ID)
	t.Logf("requests:\n%s\nchecks:\n%s", strings.Join(asked, "\n"), strings.Join(cs, "\n"))
	wantCheck(t, cs, "op0 write", "ok null")
	wantCheck(t, cs, "op1 write", "permission_denied")
	wantCheck(t, cs, "op1 write", "not twice, please")
	wantCheck(t, cs, "op2 exec", `ok {"exit":0,"stderr":"","stdout":"hello"}`)
	wantCheck(t, cs, "op3 exec", `ok {"exit":0,"stderr":"","stdout":"hello"}`)
	wantCheck(t, cs, "op4 exec", "only a.txt")
	if !strings.Contains(asked[0], `"content":"hello"`) || !strings.Contains(asked[0], "/workspace/a.txt") {
		t.Errorf("the write request does not show the exact bytes and path: %s", asked[0])
	}
	// Exactly four requests: the identical exec after approve-always asked none.
	all, err := e.Requests(RequestFilter{All: true})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, q := range all {
		if q.Subject == "hands:"+root {
			n++
		}
	}
	if n != 4 {
		t.Errorf("%d requests for the root, want 4", n)
	}
	p, _, _ := e.Policy("hands:" + root)
	if len(p.Rules) != 1 || p.Rules[0].Operation != "hands.exec" {
		t.Errorf("approve-always should add one exact exec rule: %+v", p.Rules)
	}
}
