package engine

import (
	"errors"
	"strings"
	"testing"

	"github.com/wardenhq/warden/engine/hands"
)

const (
	viewerActor   Actor = "ssh:SHA256:viewerkeyfingerprint"
	sshOperator   Actor = "ssh:SHA256:operatorkeyfingerprint"
	strangerActor Actor = "ssh:SHA256:neverregistered"
)

func wantForbidden(t *testing.T, what string, err error) {
	t.Helper()
	var f *ForbiddenError
	if !errors.As(err, &f) || !errors.Is(err, ErrForbidden) {
		t.Fatalf("%s: %v, want a *ForbiddenError", what, err)
	}
	if !strings.Contains(err.Error(), "may watch but not") || !strings.Contains(err.Error(), "ask an operator") {
		t.Errorf("%s: message %q", what, err)
	}
}

func TestRolesResolve(t *testing.T) {
	e := openEngine(t, Options{})
	e.SetRole(viewerActor, RoleViewer)
	e.SetRole(sshOperator, RoleOperator)
	e.SetRole("ssh:SHA256:typo", "admin")
	for a, want := range map[Actor]Role{
		"local:alice": RoleOperator, LocalActor(): RoleOperator, viewerActor: RoleViewer, sshOperator: RoleOperator,
		strangerActor: RoleViewer, "ssh:SHA256:typo": RoleViewer, "": RoleViewer, "local:": RoleViewer, "engine": RoleViewer,
	} {
		if got := e.Role(a); got != want {
			t.Errorf("Role(%q) = %s, want %s", a, got, want)
		}
	}
	e.ForgetRole(sshOperator)
	if e.Role(sshOperator) != RoleViewer {
		t.Error("a forgotten operator is still an operator")
	}
}

// TestRolesViewerRefused: every mutating call of a viewer (or of an actor
// nobody registered) is refused by the engine itself and receipted; the
// same calls of an SSH operator and of a local actor go through.
func TestRolesViewerRefused(t *testing.T) {
	e := setupPerms(t, map[string]string{"r": permsYAML("perms-call", "make all")})
	e.SetRole(viewerActor, RoleViewer)
	e.SetRole(sshOperator, RoleOperator)
	h, sub := startPermsRun(t, e, "r")
	req := nextPending(t, sub)

	for _, actor := range []Actor{viewerActor, strangerActor} {
		before := len(kinds(t, e, "access.refused"))
		calls := map[string]func() error{
			"approve":        func() error { _, err := e.Approve(actor, req.ID, ""); return err },
			"approve-always": func() error { _, _, _, err := e.ApproveAlways(actor, req.ID, ""); return err },
			"deny":           func() error { _, err := e.Deny(actor, req.ID, ""); return err },
			"decide":         func() error { _, err := e.decideRequest(actor, req.ID, ApproveOnce, ""); return err },
			"run": func() error {
				_, err := e.StartRun(actor, RunRequest{Module: "testmod", Hook: "r", Jail: JailOff})
				return err
			},
			"run-hook": func() error {
				_, err := e.RunHook(actor, RunRequest{Module: "testmod", Hook: "r", Jail: JailOff})
				return err
			},
			"cancel": func() error { return e.CancelRun(actor, h.ID) },
			"hands init": func() error {
				_, err := e.HandsInit(t.Context(), actor, hands.InitOptions{Root: t.TempDir() + "/root", Access: hands.AccessFiles})
				return err
			},
			"hands finish": func() error {
				_, err := e.HandsFinish(t.Context(), actor, t.TempDir(), nil)
				return err
			},
			"hands parent": func() error {
				_, err := e.MakeHandsRootParent(actor, t.TempDir()+"/missing/root")
				return err
			},
			"policy set":    func() error { _, err := e.SetPolicy(actor, Policy{Subject: permsSubject}, 0); return err },
			"secret set":    func() error { return e.SetSecret(actor, "testmod", "token", "s3cret") },
			"secret delete": func() error { _, err := e.DeleteSecret(actor, "testmod", "token"); return err },
			"config set":    func() error { return e.SetConfig(actor, "testmod", "k", "v") },
			"config delete": func() error { _, err := e.DeleteConfig(actor, "testmod", "k"); return err },
			"module add":    func() error { _, err := e.AddModule(actor, t.TempDir()); return err },
			"module remove": func() error { return e.RemoveModule(actor, "testmod") },
			"trust rotate":  func() error { _, err := e.RotateTrust(actor); return err },
		}
		for name, call := range calls {
			wantForbidden(t, string(actor)+" "+name, call())
		}
		refused := kinds(t, e, "access.refused")
		if got := len(refused) - before; got != len(calls) {
			t.Fatalf("%s: %d access.refused receipts, want %d", actor, got, len(calls))
		}
		for _, r := range refused[before:] {
			if r.Actor != string(actor) || r.Subject == "" || !strings.Contains(r.Summary, "may watch but not "+r.Subject) {
				t.Errorf("receipt %+v", r)
			}
		}
	}
	// Nothing the viewers tried happened.
	if got, _ := e.Request(req.ID); got.Decision != nil {
		t.Fatalf("a viewer decided the request: %+v", got.Decision)
	}
	if names, _ := e.SecretNames("testmod"); len(names) != 0 {
		t.Errorf("a viewer set secrets %v", names)
	}
	if _, exists, _ := e.Policy(permsSubject); exists {
		t.Error("a viewer set a policy")
	}
	if _, err := e.Module("testmod"); err != nil {
		t.Errorf("a viewer removed the module: %v", err)
	}
	select {
	case <-h.Done():
		t.Fatal("a viewer cancelled the run")
	default:
	}

	// An SSH operator's approve goes through, named in the receipt.
	if _, err := e.Approve(sshOperator, req.ID, "fine"); err != nil {
		t.Fatal(err)
	}
	if o := h.Wait(); !o.OK() {
		t.Fatalf("run %s: %s", o.Run.Status, o.Run.Error)
	}
	dec := kinds(t, e, "request.decide")
	if len(dec) != 1 || dec[0].Actor != string(sshOperator) {
		t.Fatalf("decide receipts %+v", dec)
	}
	if err := e.SetSecret(sshOperator, "testmod", "token", "s3cret"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.SetPolicy(sshOperator, Policy{Subject: permsSubject}, 0); err != nil {
		t.Fatal(err)
	}
	// Local actors are operators, unregistered.
	if err := e.SetConfig("local:someone", "testmod", "k", "v"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.DeleteSecret(LocalActor(), "testmod", "token"); err != nil {
		t.Fatal(err)
	}
}

// TestRolesEngineDecisionsNotRefused: the engine's own denials (no operator
// attached, expired) do not go through the role check.
func TestRolesEngineDecisionsNotRefused(t *testing.T) {
	e := setupPerms(t, map[string]string{"r": permsYAML("perms-call", "make all")})
	o, err := e.RunHook(testActor, RunRequest{Module: "testmod", Hook: "r", Jail: JailOff})
	if err != nil {
		t.Fatal(err)
	}
	if !o.OK() {
		t.Fatalf("run %s: %s", o.Run.Status, o.Run.Error)
	}
	dec := kinds(t, e, "request.decide")
	if len(dec) != 1 || dec[0].Actor != "engine" {
		t.Fatalf("decide receipts %+v", dec)
	}
	if n := len(kinds(t, e, "access.refused")); n != 0 {
		t.Fatalf("%d access.refused receipts", n)
	}
}
