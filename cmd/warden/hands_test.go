package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/engine/hands"
	"github.com/wardenhq/warden/engine/hands/handstest"
)

func TestHandsVerbs(t *testing.T) {
	handstest.Each(t, func(t *testing.T, e handstest.Engine) {
		sock := e.Socket
		c := newCLI(t)
		base := handstest.Base(t, sock)
		root := filepath.Join(base, "root")

		r := c.ok("hands", "init", "--root", root, "--engine-socket", sock, "--image", handstest.Image, "--access", "files")
		for _, step := range []string{"root", "engine", "layout", "lease", "prepared", "image", "creating", "created", "options", "label", "started", "running", "policy", "ready"} {
			if !strings.Contains(r.stderr, "✓ "+step) {
				t.Errorf("no progress line for %s:\n%s", step, r.stderr)
			}
		}
		if !strings.Contains(r.stdout, "hands "+root+" ready") || !strings.Contains(r.stdout, " on "+e.Name+", access files, workspace inodes ") {
			t.Errorf("init: %s", r)
		}
		var st hands.StatusReport
		c.json(0, &st, "hands", "status", "--root", root)
		if st.Phase != hands.PhaseReady || st.Container.State != "running" || len(st.Drift) != 0 {
			t.Errorf("status %+v", st)
		}
		inodes := hands.WorkspaceInodes
		if e.Name == hands.RuntimePodman {
			inodes = hands.InodesUnboundedPodman
		}
		if st.EngineKind != e.Name || st.Engine != "ok" || st.Inodes != inodes {
			t.Errorf("status engine %q (%s), inodes %q; want %s, %q", st.EngineKind, st.Engine, st.Inodes, e.Name, inodes)
		}
		if r := c.ok("hands", "status", "--root", root); !strings.Contains(r.stdout, "drift      none") ||
			!strings.Contains(r.stdout, "engine     "+e.Name+" ok ("+sock+")") || !strings.Contains(r.stdout, "inodes     "+inodes+"\n") {
			t.Errorf("status: %s", r)
		}
		var list []map[string]any
		c.json(0, &list, "hands", "list")
		if len(list) != 1 || list[0]["root"] != root || list[0]["phase"] != "ready" || list[0]["engine"] != e.Name {
			t.Errorf("list %v", list)
		}
		if r := c.ok("hands", "list"); !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(root) + ` +ready +` + e.Name + ` `).MatchString(r.stdout) {
			t.Errorf("list does not show the engine:\n%s", r.stdout)
		}

		// --json prints a summary and no progress.
		root2 := filepath.Join(base, "root2")
		var sum hands.InitResult
		r = c.json(0, &sum, "hands", "init", "--root", root2, "--engine-socket", sock, "--image", handstest.Image, "--access", "none")
		if sum.Phase != hands.PhaseReady || sum.Access != "none" || len(sum.ContainerID) != 64 || strings.Contains(r.stderr, "✓") {
			t.Errorf("json init: %+v\n%s", sum, r)
		}

		if r := c.ok("hands", "finish", "--root", root); !strings.Contains(r.stdout, "finished") || !strings.Contains(r.stderr, "✓ stopped") {
			t.Errorf("finish: %s", r)
		}
		if r := c.run("hands", "finish", "--root", root); r.code != 1 || !strings.Contains(r.stderr, "already finished") {
			t.Errorf("second finish: %s", r)
		}
		var fin hands.FinishResult
		c.json(0, &fin, "hands", "finish", "--root", root2)
		if !fin.Stopped || fin.Phase != hands.PhaseFinished {
			t.Errorf("json finish %+v", fin)
		}

		// Missing flags are usage errors; bad roots exit 1 and say why.
		if r := c.run("hands", "init", "--root", filepath.Join(base, "x"), "--image", handstest.Image, "--access", "files"); r.code != 2 || !strings.Contains(r.stderr, "--engine-socket is required") {
			t.Errorf("no socket: %s", r)
		}
		if r := c.run("hands", "init", "--root", filepath.Join(base, "x"), "--engine-socket", sock, "--image", handstest.Image, "--access", "rw"); r.code != 2 || !strings.Contains(r.stderr, `--access "rw": want files`) {
			t.Errorf("--access rw: %s", r)
		}
		if _, err := os.Stat(filepath.Join(base, "x")); !os.IsNotExist(err) {
			t.Errorf("a usage error created the root: %v", err)
		}
		if r := c.run("hands", "status"); r.code != 2 {
			t.Errorf("status without root: %s", r)
		}
		if r := c.run("hands", "init", "--root", "rel", "--engine-socket", sock, "--image", handstest.Image, "--access", "files"); r.code != 1 || !strings.Contains(r.stderr, "is relative") {
			t.Errorf("relative root: %s", r)
		}
		if r := c.ok("hands", "init", "--help"); !strings.Contains(r.stdout, "Examples:") {
			t.Errorf("help: %s", r)
		}

		// Drift makes status exit 1 with the fix.
		cli := handstest.Client(t, sock)
		root3 := filepath.Join(base, "root3")
		c.ok("hands", "init", "--root", root3, "--engine-socket", sock, "--image", handstest.Image, "--access", "files")
		rec, _ := hands.ReadReceipt(root3)
		if _, err := cli.ContainerStop(context.Background(), rec.ContainerID, client.ContainerStopOptions{}); err != nil {
			t.Fatal(err)
		}
		if r := c.run("hands", "status", "--root", root3); r.code != 1 || !strings.Contains(r.stdout, "stopped outside warden") || !strings.Contains(r.stdout, "warden hands finish --root "+root3) {
			t.Errorf("drift: %s", r)
		}
	})
}

// child runs this test binary as `warden` (TestMain) in its own process,
// pausing init after step, and returns once the step's progress line
// appeared on stderr.
type child struct {
	cmd    *exec.Cmd
	lines  chan string
	stderr strings.Builder
	done   chan struct{}
}

func startInit(t *testing.T, dataDir, root, sock, pauseAfter string) *child {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "warden")
	if err := os.Symlink(self, bin); err != nil {
		t.Fatal(err)
	}
	ch := &child{lines: make(chan string, 100), done: make(chan struct{})}
	ch.cmd = exec.Command(bin, "--data-dir", dataDir, "hands", "init", "--root", root, "--engine-socket", sock, "--image", handstest.Image, "--access", "files")
	ch.cmd.Env = append(os.Environ(), hands.PauseEnv+"="+pauseAfter)
	pipe, err := ch.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.cmd.Process.Kill(); <-ch.done })
	go func() {
		defer close(ch.done)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			ch.stderr.WriteString(sc.Text() + "\n")
			select {
			case ch.lines <- sc.Text():
			default:
			}
		}
	}()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case l := <-ch.lines:
			if strings.HasPrefix(l, "✓ "+pauseAfter+" ") {
				return ch
			}
		case <-deadline:
			t.Fatalf("init never reported step %s", pauseAfter)
		}
	}
}

func (ch *child) signal(t *testing.T, s syscall.Signal) (code int, stderr string) {
	t.Helper()
	if err := ch.cmd.Process.Signal(s); err != nil {
		t.Fatal(err)
	}
	<-ch.done
	err := ch.cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	}
	return code, ch.stderr.String()
}

func readEvidence(t *testing.T, root string) hands.FailureEvidence {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, hands.EvidenceDir, hands.FailureFile))
	if err != nil {
		t.Fatal(err)
	}
	var ev hands.FailureEvidence
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

// SIGINT or SIGTERM while the container exists: container stopped, phase
// failed, evidence written, exit 1 with the message.
func TestHandsInitSignals(t *testing.T) {
	handstest.Each(t, func(t *testing.T, e handstest.Engine) {
		sock := e.Socket
		cli := handstest.Client(t, sock)
		for _, tc := range []struct {
			sig   syscall.Signal
			pause string
		}{{syscall.SIGINT, "started"}, {syscall.SIGTERM, "created"}, {syscall.SIGINT, "running"}} {
			t.Run(tc.sig.String()+" after "+tc.pause, func(t *testing.T) {
				c := newCLI(t)
				root := filepath.Join(handstest.Base(t, sock), "root")
				ch := startInit(t, c.dir, root, sock, tc.pause)
				code, stderr := ch.signal(t, tc.sig)
				if code != 1 || !strings.Contains(stderr, "warden: initialization failed; recovery evidence retained under "+root) || !strings.Contains(stderr, "interrupted: received") ||
					!strings.Contains(stderr, "this root is spent: `warden hands finish --root "+root+"` closes its books") {
					t.Fatalf("exit %d:\n%s", code, stderr)
				}
				rec, err := hands.ReadReceipt(root)
				if err != nil || rec.Phase != hands.PhaseFailed || rec.ContainerID == "" {
					t.Fatalf("receipt %+v %v", rec, err)
				}
				in, err := cli.ContainerInspect(context.Background(), rec.ContainerID, client.ContainerInspectOptions{})
				if err != nil || in.Container.State.Running {
					t.Fatalf("container still running: %+v %v", in.Container.State, err)
				}
				if ev := readEvidence(t, root); ev != (hands.FailureEvidence{Stopped: true}) {
					t.Errorf("evidence %+v", ev)
				}
				// The data dir saw it too, and finish closes the books.
				var list []map[string]any
				c.json(0, &list, "hands", "list")
				if len(list) != 1 || list[0]["phase"] != "failed" {
					t.Errorf("list %v", list)
				}
				c.ok("hands", "finish", "--root", root)
			})
		}
	})
}

// warden killed with SIGKILL mid-init leaves a status that shows the phase
// and the reconciliation needed.
func TestHandsInitSIGKILL(t *testing.T) {
	handstest.Each(t, func(t *testing.T, e handstest.Engine) {
		sock := e.Socket
		cli := handstest.Client(t, sock)

		t.Run("after create", func(t *testing.T) {
			c := newCLI(t)
			root := filepath.Join(handstest.Base(t, sock), "root")
			startInit(t, c.dir, root, sock, "created").signal(t, syscall.SIGKILL)
			var st hands.StatusReport
			c.json(1, &st, "hands", "status", "--root", root)
			if st.Phase != hands.PhaseCreating || st.Container.State != "created" || len(st.Drift) != 1 ||
				!strings.Contains(st.Drift[0].Problem, "init was interrupted at phase creating") || !strings.Contains(st.Drift[0].Fix, "warden hands finish --root "+root) {
				t.Fatalf("status %+v", st)
			}
			r := c.run("hands", "status", "--root", root)
			if r.code != 1 || !strings.Contains(r.stdout, "phase      creating") {
				t.Errorf("text status: %s", r)
			}
			c.ok("hands", "finish", "--root", root)
		})

		t.Run("after start", func(t *testing.T) {
			c := newCLI(t)
			root := filepath.Join(handstest.Base(t, sock), "root")
			startInit(t, c.dir, root, sock, "started").signal(t, syscall.SIGKILL)
			var st hands.StatusReport
			c.json(1, &st, "hands", "status", "--root", root)
			if st.Phase != hands.PhaseCreating || st.Container.State != "running" || len(st.Drift) != 1 ||
				!strings.Contains(st.Drift[0].Problem, "reconciliation required") || !strings.Contains(st.Drift[0].Fix, "unix://"+sock+" stop`") {
				t.Fatalf("status %+v", st)
			}
			// finish will not stop a generation it never recorded.
			if r := c.run("hands", "finish", "--root", root); r.code != 1 || !strings.Contains(r.stderr, "reconciliation required") {
				t.Fatalf("finish: %s", r)
			}
			in, err := cli.ContainerInspect(context.Background(), st.ContainerID, client.ContainerInspectOptions{})
			if err != nil || !in.Container.State.Running {
				t.Fatalf("finish stopped an unrecorded generation: %v", err)
			}
			// The operator stops it; then finish closes the books.
			if _, err := cli.ContainerStop(context.Background(), st.ContainerID, client.ContainerStopOptions{}); err != nil {
				t.Fatal(err)
			}
			c.ok("hands", "finish", "--root", root)
		})

		t.Run("after running", func(t *testing.T) {
			c := newCLI(t)
			root := filepath.Join(handstest.Base(t, sock), "root")
			startInit(t, c.dir, root, sock, "running").signal(t, syscall.SIGKILL)
			var st hands.StatusReport
			c.json(1, &st, "hands", "status", "--root", root)
			if st.Phase != hands.PhaseRunning || len(st.Drift) != 1 || !strings.Contains(st.Drift[0].Problem, "init was interrupted at phase running") {
				t.Fatalf("status %+v", st)
			}
			if r := c.ok("hands", "finish", "--root", root); !strings.Contains(r.stdout, "stopped") {
				t.Errorf("finish: %s", r)
			}
		})
	})
}

// doctor --engine-socket names the engine, its init binary and its API
// version; a path with no engine is a problem with its fix.
func TestDoctorEngineSocket(t *testing.T) {
	needBwrap(t)
	handstest.Each(t, func(t *testing.T, e handstest.Engine) {
		c := newCLI(t)
		var rep engine.Report
		c.json(0, &rep, "doctor", "--engine-socket", e.Socket)
		got := map[string]engine.Check{}
		for _, ch := range rep.Checks {
			got[ch.Name] = ch
		}
		label, init := "Docker ", "docker-init"
		if e.Name == hands.RuntimePodman {
			label, init = "Podman ", "catatonit ("+hands.PodmanInitPath+")"
		}
		if ch := got["engine"]; ch.Status != "ok" || !strings.HasPrefix(ch.Detail, label) || !strings.Contains(ch.Detail, e.Socket+": "+e.Name+", storage ") {
			t.Errorf("engine check %+v", ch)
		}
		if ch := got["engine init"]; ch.Status != "ok" || !strings.HasPrefix(ch.Detail, init) {
			t.Errorf("engine init check %+v", ch)
		}
		if ch := got["engine API"]; ch.Status != "ok" || !strings.HasPrefix(ch.Detail, "API 1.41 negotiated") {
			t.Errorf("engine API check %+v", ch)
		}
		r := c.ok("doctor", "--engine-socket", e.Socket)
		if !regexp.MustCompile(`(?m)^ok +engine +` + label).MatchString(r.stdout) {
			t.Errorf("doctor text:\n%s", r.stdout)
		}
	})
	c := newCLI(t)
	missing := filepath.Join(t.TempDir(), "none.sock")
	r := c.run("doctor", "--engine-socket", missing)
	if r.code != 1 || !strings.Contains(r.stdout, "no engine socket at "+missing) || !strings.Contains(r.stdout, "fix: start the engine") {
		t.Errorf("doctor on a missing socket: %s", r)
	}
}

// finish stops the container and leaves it on the engine: it says so, why,
// and the command that removes it (text and --json), and that command,
// run as printed, removes it.
func TestHandsFinishSaysTheStoppedContainerStays(t *testing.T) {
	sock := handstest.Docker(t)
	c := newCLI(t)
	base := handstest.Base(t, sock)
	root, root2 := filepath.Join(base, "root"), filepath.Join(base, "root2")
	var in hands.InitResult
	c.json(0, &in, "hands", "init", "--root", root, "--engine-socket", sock, "--image", handstest.Image, "--access", "none")
	var in2 hands.InitResult
	c.json(0, &in2, "hands", "init", "--root", root2, "--engine-socket", sock, "--image", handstest.Image, "--access", "none")

	rm := "docker -H unix://" + sock + " rm " + in.ContainerID
	r := c.ok("hands", "finish", "--root", root)
	if !strings.Contains(r.stdout, "the stopped container stays on the engine (warden never removes a container: the stopped one keeps its logs") ||
		!strings.Contains(r.stdout, "remove it when you are done with it: "+rm+"\n") {
		t.Errorf("finish does not say the container stays, or how to remove it:\n%s", r)
	}
	if out, err := exec.Command("sh", "-c", rm).CombinedOutput(); err != nil {
		t.Errorf("the printed command %q: %v %s", rm, err, out)
	}
	var fin map[string]any
	c.json(0, &fin, "hands", "finish", "--root", root2)
	if fin["containerKept"] != true || fin["removeWith"] != "docker -H unix://"+sock+" rm "+in2.ContainerID ||
		!strings.Contains(fmt.Sprint(fin["keptWhy"]), "never removes a container") {
		t.Errorf("json finish: %v", fin)
	}
}
