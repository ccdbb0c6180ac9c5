package hands

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/moby/moby/client"

	"github.com/wardenhq/warden/engine/hands/handstest"
)

// Init reaches ready, every container option is confirmed by inspection,
// exec/read/write work as uid 10002 in /workspace, and finish stops it.
func TestInitReadyThenFinish(t *testing.T) {
	handstest.Each(t, func(t *testing.T, e handstest.Engine) {
		f := newFixture(t, e)
		opts := f.opts()
		var phaseAtPolicy Phase
		opts.BeforeReady = func(SetupReceipt) error {
			phaseAtPolicy = f.receipt().Phase
			return nil
		}
		res, err := Init(context.Background(), opts)
		if err != nil {
			t.Fatal(err)
		}
		wantSteps := []string{"root", "engine", "layout", "lease", "prepared", "image", "creating", "created", "options", "label", "started", "running", "policy", "ready"}
		if e.Name == RuntimePodman {
			// Podman 4.3 refuses nr_inodes: warden says so, and creates with the size bound.
			wantSteps = slices.Insert(wantSteps, 7, "inodes")
		}
		if !reflect.DeepEqual(f.steps, wantSteps) {
			t.Errorf("steps %v, want %v", f.steps, wantSteps)
		}
		wantPhases := []Phase{PhasePrepared, PhaseCreating, PhaseCreating, PhaseRunning, PhaseReady}
		if !reflect.DeepEqual(f.phases, wantPhases) {
			t.Errorf("phases %v, want %v", f.phases, wantPhases)
		}
		if phaseAtPolicy != PhaseRunning {
			t.Errorf("the policy was set at phase %s, want running", phaseAtPolicy)
		}

		// Layout and files.
		for name, want := range map[string]os.FileMode{"": 0o755, "state": 0o700, "agent": 0o700, "workspace": 0o700, "evidence": 0o700, "docker-cli": 0o700, "resources": 0o755,
			"hands.json": 0o600, "evidence/setup.json": 0o600} {
			if got := mode(t, filepath.Join(f.root, name)); got != want {
				t.Errorf("%s mode %04o, want %04o", name, got, want)
			}
		}
		rec := f.receipt()
		if rec.Phase != PhaseReady || rec.ContainerID != res.ContainerID || rec.Generation != res.Generation || rec.Image != res.Image || rec.Owner != testOwner {
			t.Fatalf("receipt %+v, result %+v", rec, res)
		}
		if rec.Engine != e.Name || res.Engine != e.Name || rec.Inodes != f.wantInodes() || res.Inodes != f.wantInodes() || rec.Version != 2 {
			t.Errorf("engine %q inodes %q version %d in the receipt (result %q %q), want %s and %q", rec.Engine, rec.Inodes, rec.Version, res.Engine, res.Inodes, e.Name, f.wantInodes())
		}
		raw, err := os.ReadFile(filepath.Join(f.root, EvidenceDir, ReceiptFile))
		if err != nil || !strings.Contains(string(raw), `"inodes": "`+f.wantInodes()+`"`) || !strings.Contains(string(raw), `"engine": "`+e.Name+`"`) {
			t.Errorf("setup.json does not say engine %s and inodes %q:\n%s", e.Name, f.wantInodes(), raw)
		}
		info, err := ReadInfo(f.root)
		if err != nil || info != (HandsInfo{Root: f.root, ContainerID: res.ContainerID, Image: res.Image, Access: AccessFiles, EngineSocket: f.sock}) {
			t.Fatalf("hands.json %+v, %v", info, err)
		}

		// Every container option, by inspection.
		c := f.inspect(res.ContainerID)
		hc := c.HostConfig
		checks := []struct {
			what string
			ok   bool
		}{
			{"owner label", c.Config.Labels[LabelOwner] == OwnerLabel(testOwner, f.root)},
			{"root label", c.Config.Labels[LabelRoot] == f.root},
			{"network none", string(hc.NetworkMode) == "none"},
			{"read-only rootfs", hc.ReadonlyRootfs},
			{"cap-drop ALL", f.capsAllDropped(hc.CapDrop, hc.CapAdd)},
			{"no-new-privileges", slices.Contains(hc.SecurityOpt, "no-new-privileges")},
			{"tmpfs", f.tmpfsAsSet(hc.Tmpfs["/workspace"])},
			{"ulimits", f.ulimitsAsSet(hc.Ulimits)},
			{"pids limit", hc.PidsLimit != nil && *hc.PidsLimit == PidsLimit},
			{"init", hc.Init != nil && *hc.Init},
			{"user", c.Config.User == "10002:10002"},
			// Podman reports the image's name in Config.Image even when
			// created by id; the container's image is the id on both.
			{"image by id", c.Image == res.Image && (c.Config.Image == res.Image || e.Name == RuntimePodman)},
			{"running generation", c.State.Running && c.State.StartedAt == res.Generation},
			{"no restart", hc.RestartPolicy.Name == "no" || hc.RestartPolicy.Name == ""},
			{"not privileged", !hc.Privileged},
		}
		for _, ch := range checks {
			if !ch.ok {
				t.Errorf("container option %s not as set: host config %+v, config %+v", ch.what, hc, c.Config)
			}
		}

		// Inside: the uid, no capabilities, no new privileges, no network.
		ctx := context.Background()
		out, err := Exec(ctx, f.root, []string{"sh", "-c", "id -u; id -g; grep -E '^(CapEff|CapBnd|NoNewPrivs)' /proc/self/status; ls /sys/class/net; pwd; df -k /workspace; ulimit -n; ulimit -u"})
		if err != nil || out.Exit != 0 {
			t.Fatalf("exec: %+v %v", out, err)
		}
		for _, want := range []string{"10002\n10002\n", "CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "NoNewPrivs:\t1", "\nlo\n", "/workspace", " 131072 ", "\n4096\n4096\n"} {
			if !strings.Contains(out.Stdout, want) {
				t.Errorf("exec output lacks %q:\n%s", want, out.Stdout)
			}
		}
		if strings.Contains(out.Stdout, "eth0") {
			t.Errorf("the container has a network interface:\n%s", out.Stdout)
		}
		if out, err := Exec(ctx, f.root, []string{"touch", "/etc/x"}); err != nil || out.Exit == 0 {
			t.Errorf("the root file system is writable: %+v %v", out, err)
		}
		content := "line one\n'quotes' \"and\" $dollars `ticks`\n"
		if err := Write(ctx, f.root, "/workspace/notes.txt", content); err != nil {
			t.Fatal(err)
		}
		if got, err := Read(ctx, f.root, "/workspace/notes.txt"); err != nil || got != content {
			t.Fatalf("read back %q, %v", got, err)
		}
		if _, err := Read(ctx, f.root, "/workspace/missing"); err == nil {
			t.Error("reading a missing file succeeded")
		}
		for _, bad := range []string{"/etc/passwd", "workspace/x", "/workspace/../etc/passwd", "/workspace/a/../../etc", "/workspace/x\x00y", "/workspace//x"} {
			if err := Write(ctx, f.root, bad, "x"); err == nil {
				t.Errorf("write %q was allowed", bad)
			}
			if _, err := Read(ctx, f.root, bad); err == nil {
				t.Errorf("read %q was allowed", bad)
			}
		}
		big, err := Exec(ctx, f.root, []string{"head", "-c", "1100000", "/dev/zero"})
		if err != nil || len(big.Stdout) > MaxOutput+200 || !strings.Contains(big.Stdout, "[warden: output cut at 1048576 bytes") {
			t.Errorf("big output not cut: %d bytes, %v", len(big.Stdout), err)
		}
		if out, err := Exec(ctx, f.root, []string{"sh", "-c", "echo oops >&2; exit 3"}); err != nil || out.Exit != 3 || out.Stderr != "oops\n" {
			t.Errorf("exit code and stderr: %+v %v", out, err)
		}

		st, err := Status(ctx, f.root)
		if err != nil || len(st.Drift) != 0 || st.Container.State != "running" || !st.Container.GenerationMatches || !st.Container.LabelOK || st.Engine != "ok" {
			t.Fatalf("status of a ready root: %+v %v", st, err)
		}

		var finished []Phase
		fin, err := Finish(ctx, f.root, nil, func(r SetupReceipt) error { finished = append(finished, r.Phase); return nil })
		if err != nil || !fin.Stopped || fin.Phase != PhaseFinished {
			t.Fatalf("finish: %+v %v", fin, err)
		}
		if c := f.inspect(res.ContainerID); c.State.Running {
			t.Fatal("the container runs after finish")
		}
		if f.receipt().Phase != PhaseFinished || !reflect.DeepEqual(finished, []Phase{PhaseFinished}) {
			t.Fatalf("phase after finish %s, onPhase %v", f.receipt().Phase, finished)
		}
		_, err = Finish(ctx, f.root, nil, nil)
		if !errors.Is(err, ErrAlreadyFinished) {
			t.Fatalf("second finish: %v", err)
		}
		wantContains(t, err, "already finished")
		if _, err := Exec(ctx, f.root, []string{"true"}); err == nil {
			t.Error("exec in a finished root succeeded")
		}
		if st, err := Status(ctx, f.root); err != nil || len(st.Drift) != 0 {
			t.Errorf("status after finish: %+v %v", st, err)
		}
	})
}

// A missing image is found before the root is created: nothing is
// burnt, and the same init at the same root works once the image is
// there.
func TestInitMissingImageBurnsNothing(t *testing.T) {
	handstest.Each(t, func(t *testing.T, e handstest.Engine) {
		f := newFixture(t, e)
		opts := f.opts()
		opts.Image = "warden-test/not-here:0"
		_, err := Init(context.Background(), opts)
		var ie *InitFailedError
		if err == nil || errors.As(err, &ie) {
			t.Fatalf("want a plain refusal, got %v", err)
		}
		cli := "docker -H unix://"
		if e.Name == RuntimePodman {
			cli = "podman --url unix://"
		}
		wantContains(t, err, "never pulls", cli+f.sock+" pull warden-test/not-here:0", "run the same init again")
		if _, serr := os.Lstat(f.root); !errors.Is(serr, os.ErrNotExist) {
			t.Fatalf("the root was created: %v", serr)
		}
		if len(f.phases) != 0 {
			t.Errorf("phases recorded: %v", f.phases)
		}
		if ids := handstest.Labelled(t, f.cli, f.root); len(ids) != 0 {
			t.Errorf("containers left: %v", ids)
		}
		// The rerun, with an image that is there, takes the same root.
		f.steps, f.phases = nil, nil
		if res := f.ready(); res.Phase != PhaseReady {
			t.Fatalf("rerun: %+v", res)
		}
	})
}

// Cancelled after the receipt but before a container exists: phase
// failed, evidence written, nothing to stop; the error names the command
// that closes the books, and status and finish agree.
func TestCancelBeforeContainer(t *testing.T) {
	handstest.Each(t, func(t *testing.T, e handstest.Engine) {
		f := newFixture(t, e)
		ctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		opts := f.opts()
		progress := opts.Progress
		opts.Progress = func(step, detail string) {
			progress(step, detail)
			if step == "prepared" {
				cancel(errors.New("received interrupt"))
			}
		}
		_, err := Init(ctx, opts)
		var ie *InitFailedError
		if !errors.As(err, &ie) {
			t.Fatalf("want *InitFailedError, got %v", err)
		}
		wantContains(t, err, "initialization failed; recovery evidence retained under "+f.root, "interrupted: received interrupt")
		if !reflect.DeepEqual(f.phases, []Phase{PhasePrepared, PhaseFailed}) {
			t.Errorf("phases %v, want prepared then failed", f.phases)
		}
		rec := f.receipt()
		if rec.Phase != PhaseFailed || rec.ContainerID != "" || rec.Image != "" || rec.Engine != e.Name {
			t.Errorf("receipt %+v", rec)
		}
		ev, ok, err := readFailure(f.root)
		if err != nil || !ok || ev != (FailureEvidence{}) {
			t.Errorf("failure evidence %+v %v %v", ev, ok, err)
		}
		if mode(t, filepath.Join(f.root, EvidenceDir, FailureFile)) != 0o600 {
			t.Error("failure evidence is not 0600")
		}
		if ids := handstest.Labelled(t, f.cli, f.root); len(ids) != 0 {
			t.Errorf("containers left: %v", ids)
		}
		st, err := Status(context.Background(), f.root)
		if err != nil || len(st.Drift) != 1 || !strings.Contains(st.Drift[0].Problem, "before a container was created") || st.Engine != "ok" {
			t.Errorf("status: %+v %v", st, err)
		}
		// Finish closes the books: there is nothing to stop.
		if res, err := Finish(context.Background(), f.root, nil, nil); err != nil || res.Stopped {
			t.Errorf("finish: %+v %v", res, err)
		}
	})
}

// Cancellation (what SIGINT/SIGTERM do in the CLI) while the container
// exists stops it, writes phase failed and the evidence.
func TestCancelWhileContainerExists(t *testing.T) {
	handstest.Each(t, func(t *testing.T, e handstest.Engine) {
		for _, at := range []string{"created", "started", "running"} {
			t.Run(at, func(t *testing.T) {
				f := newFixture(t, e)
				ctx, cancel := context.WithCancelCause(context.Background())
				defer cancel(nil)
				opts := f.opts()
				progress := opts.Progress
				opts.Progress = func(step, detail string) {
					progress(step, detail)
					if step == at {
						cancel(errors.New("received interrupt"))
					}
				}
				_, err := Init(ctx, opts)
				var ie *InitFailedError
				if !errors.As(err, &ie) {
					t.Fatalf("want *InitFailedError, got %v", err)
				}
				wantContains(t, err, "initialization failed; recovery evidence retained under "+f.root, "interrupted: received interrupt")
				if ie.Evidence != (FailureEvidence{Stopped: true}) {
					t.Errorf("evidence %+v", ie.Evidence)
				}
				rec := f.receipt()
				if rec.Phase != PhaseFailed || rec.ContainerID == "" {
					t.Fatalf("receipt %+v", rec)
				}
				if c := f.inspect(rec.ContainerID); c.State.Running {
					t.Error("the container still runs")
				}
				if ev, ok, err := readFailure(f.root); err != nil || !ok || ev != ie.Evidence {
					t.Errorf("evidence on disk %+v %v %v", ev, ok, err)
				}
				if f.phases[len(f.phases)-1] != PhaseFailed || !slices.Contains(f.steps, "stopped") {
					t.Errorf("phases %v steps %v", f.phases, f.steps)
				}
			})
		}
	})
}

// Finish refuses a container that was restarted behind its back, and
// stops nothing.
func TestFinishRefusesRestartedContainer(t *testing.T) {
	handstest.Each(t, func(t *testing.T, e handstest.Engine) {
		f := newFixture(t, e)
		res := f.ready()
		ctx := context.Background()
		if _, err := f.cli.ContainerRestart(ctx, res.ContainerID, client.ContainerRestartOptions{}); err != nil {
			t.Fatal(err)
		}
		c := f.inspect(res.ContainerID)
		if c.State.StartedAt == res.Generation || !c.State.Running {
			t.Fatalf("restart did not change the generation: %+v", c.State)
		}
		_, err := Finish(ctx, f.root, nil, nil)
		wantContains(t, err, "restarted behind warden's back", "`"+f.cliPrefix()+" stop` it yourself", "warden hands finish --root "+f.root, "init a new root")
		if c := f.inspect(res.ContainerID); !c.State.Running {
			t.Fatal("finish stopped a restarted container")
		}
		if f.receipt().Phase != PhaseReady {
			t.Fatal("a refused finish changed the phase")
		}
		st, err := Status(ctx, f.root)
		if err != nil || len(st.Drift) != 1 || !strings.Contains(st.Drift[0].Problem, "restarted outside warden") || st.Container.GenerationMatches ||
			!strings.Contains(st.Drift[0].Fix, "`"+f.cliPrefix()+" stop` it yourself and run `warden hands finish --root "+f.root) {
			t.Fatalf("status: %+v %v", st, err)
		}
		if _, err := Exec(ctx, f.root, []string{"true"}); err == nil {
			t.Error("exec ran in a restarted container")
		}
		// The operator does what the fix says, `docker stop`: status now says
		// finish, and finish closes the books (stopping nothing).
		if _, err := f.cli.ContainerStop(ctx, res.ContainerID, client.ContainerStopOptions{}); err != nil {
			t.Fatal(err)
		}
		st, err = Status(ctx, f.root)
		if err != nil || len(st.Drift) != 1 || !strings.Contains(st.Drift[0].Problem, "restarted outside warden") ||
			strings.Contains(st.Drift[0].Fix, " stop`") || !strings.Contains(st.Drift[0].Fix, "warden hands finish --root "+f.root) {
			t.Fatalf("status after docker stop: %+v %v", st, err)
		}
		fin, err := Finish(ctx, f.root, nil, nil)
		if err != nil || fin.Stopped || fin.Phase != PhaseFinished || !strings.Contains(fin.Note, "restarted outside warden") {
			t.Fatalf("finish after docker stop: %+v %v", fin, err)
		}
		if st, err := Status(ctx, f.root); err != nil || len(st.Drift) != 0 {
			t.Fatalf("status after finish: %+v %v", st, err)
		}
	})
}

// A container without our owner label is never stopped: not by finish,
// not by the failure path, not by stopOwned; status and exec refuse it.
func TestForeignContainerNeverStopped(t *testing.T) {
	handstest.Each(t, func(t *testing.T, e handstest.Engine) {
		f := newFixture(t, e)
		res := f.ready()
		ctx := context.Background()
		cases := map[string]map[string]string{
			"label changed": {LabelOwner: OwnerLabel("local:someone-else", f.root), LabelRoot: f.root},
			"no labels":     nil,
			"other root":    {LabelOwner: OwnerLabel(testOwner, f.root+"-other"), LabelRoot: f.root + "-other"},
		}
		for name, labels := range cases {
			t.Run(name, func(t *testing.T) {
				id := f.foreign(labels)
				rec := f.receipt()
				rec.ContainerID, rec.Generation, rec.Phase = id, f.inspect(id).State.StartedAt, PhaseReady
				if err := writeReceipt(f.root, rec); err != nil {
					t.Fatal(err)
				}
				_, err := Finish(ctx, f.root, nil, nil)
				wantContains(t, err, "does not carry this root's owner label", "never stop it")
				st, err := Status(ctx, f.root)
				if err != nil || len(st.Drift) != 1 || !strings.Contains(st.Drift[0].Problem, "does not carry this root's owner label") || st.Container.LabelOK {
					t.Errorf("status: %+v %v", st, err)
				}
				if _, err := Exec(ctx, f.root, []string{"true"}); err == nil {
					t.Error("exec ran in a foreign container")
				}
				eng, err := openRuntime(ctx, f.sock)
				if err != nil {
					t.Fatal(err)
				}
				defer eng.Close()
				if _, err := eng.stopOwned(ctx, id, testOwner, f.root); err == nil {
					t.Error("stopOwned accepted a foreign container")
				}
				// The init failure path, pointed at it.
				r := &initRun{opts: InitOptions{Root: f.root, Owner: testOwner}, root: f.root, eng: eng, rec: rec, creating: true, ctx: ctx}
				r.rec.Phase, r.rec.Generation = PhaseCreating, ""
				ferr := r.fail(ctx, errors.New("boom"))
				var ie *InitFailedError
				if !errors.As(ferr, &ie) || ie.Evidence != (FailureEvidence{ReconciliationRequired: true}) {
					t.Errorf("failure path: %v %+v", ferr, ie)
				}
				if c := f.inspect(id); !c.State.Running {
					t.Fatal("a foreign container was stopped")
				}
			})
		}
		// Our own container was never touched either.
		if c := f.inspect(res.ContainerID); !c.State.Running {
			t.Fatal("our container stopped")
		}
	})
}

// A container stopped outside warden is drift; finish closes the books.
func TestStatusDriftStoppedOutside(t *testing.T) {
	handstest.Each(t, func(t *testing.T, e handstest.Engine) {
		f := newFixture(t, e)
		res := f.ready()
		ctx := context.Background()
		if _, err := f.cli.ContainerStop(ctx, res.ContainerID, client.ContainerStopOptions{}); err != nil {
			t.Fatal(err)
		}
		st, err := Status(ctx, f.root)
		if err != nil || len(st.Drift) != 1 || !strings.Contains(st.Drift[0].Problem, "stopped outside warden") ||
			!strings.Contains(st.Drift[0].Fix, "warden hands finish --root "+f.root) || st.Container.State != "exited" {
			t.Fatalf("status: %+v %v", st, err)
		}
		fin, err := Finish(ctx, f.root, nil, nil)
		if err != nil || fin.Stopped || fin.Phase != PhaseFinished {
			t.Fatalf("finish: %+v %v", fin, err)
		}
		if st, err := Status(ctx, f.root); err != nil || len(st.Drift) != 0 {
			t.Fatalf("status after finish: %+v %v", st, err)
		}
	})
}

// Another daemon answering on the recorded socket path is refused.
func TestFinishRefusesDifferentEngine(t *testing.T) {
	handstest.Each(t, func(t *testing.T, e handstest.Engine) {
		f := newFixture(t, e)
		f.ready()
		good := f.receipt()
		other := good
		otherID := good
		if e.Name == RuntimeDocker {
			// Same daemon ID, other data root: Docker 20.10 derives the ID
			// from /etc/docker/key.json, shared by every dockerd on a host.
			other.EngineStorage = "overlay2:/var/lib/other-docker"
			otherID.DaemonID = "AAAA:BBBB:CCCC"
		} else {
			// A Podman service on another storage root.
			other.EngineStorage = "vfs:/var/lib/other-storage"
			other.DaemonID = podmanID(other.EngineStorage)
		}
		otherKind := good
		otherKind.Engine, otherKind.EngineStorage, otherKind.Inodes = RuntimeDocker, good.EngineStorage, WorkspaceInodes
		if e.Name == RuntimeDocker {
			otherKind.Engine, otherKind.EngineStorage, otherKind.Inodes = RuntimePodman, "vfs:/var/lib/containers", InodesUnboundedPodman
			otherKind.DaemonID = podmanID(otherKind.EngineStorage)
		}
		for _, rec := range []SetupReceipt{other, otherID, otherKind} {
			if rec == good {
				continue // Podman's ID is its storage: other covers it
			}
			if err := writeReceipt(f.root, rec); err != nil {
				t.Fatal(err)
			}
			_, err := Finish(context.Background(), f.root, nil, nil)
			wantContains(t, err, "is not the one", "warden will not act through it")
			st, err := Status(context.Background(), f.root)
			if err != nil || st.Engine != "different" || len(st.Drift) != 1 {
				t.Fatalf("status: %+v %v", st, err)
			}
			if c := f.inspect(rec.ContainerID); !c.State.Running {
				t.Fatal("the container stopped")
			}
		}
	})
}

// Two inits of one root never both run: the second finds it exists.
func TestInitNeverAdoptsRoot(t *testing.T) {
	handstest.Each(t, func(t *testing.T, e handstest.Engine) {
		f := newFixture(t, e)
		f.ready()
		_, err := Init(context.Background(), f.opts())
		var re *RootError
		if !errors.As(err, &re) || !strings.Contains(err.Error(), "already exists") {
			t.Fatalf("second init: %v", err)
		}
		if ids := handstest.Labelled(t, f.cli, f.root); len(ids) != 1 {
			t.Fatalf("containers: %v", ids)
		}
		b, _ := json.Marshal(f.receipt())
		if !strings.Contains(string(b), `"phase":"ready"`) {
			t.Fatalf("receipt changed: %s", b)
		}
	})
}

// A data dir that cannot record a phase fails the init through the same
// failure path: the container is stopped and the evidence written.
func TestOnPhaseErrorFails(t *testing.T) {
	handstest.Each(t, func(t *testing.T, e handstest.Engine) {
		f := newFixture(t, e)
		opts := f.opts()
		opts.OnPhase = func(r SetupReceipt) error {
			if r.Phase == PhaseRunning {
				return errors.New("store is closed")
			}
			return nil
		}
		_, err := Init(context.Background(), opts)
		var ie *InitFailedError
		if !errors.As(err, &ie) || ie.Evidence != (FailureEvidence{Stopped: true}) {
			t.Fatalf("want a failed init with the container stopped, got %v", err)
		}
		wantContains(t, err, "recording phase running: store is closed")
		rec := f.receipt()
		if rec.Phase != PhaseFailed {
			t.Fatalf("phase %s", rec.Phase)
		}
		if c := f.inspect(rec.ContainerID); c.State.Running {
			t.Fatal("the container runs")
		}
	})
}

// A container with this root's label that the receipt never recorded:
// finish refuses while it runs, and after the operator's `docker stop`
// (what status's fix says) it closes the books, stopping nothing.
func TestFinishAfterStoppingUnrecordedContainer(t *testing.T) {
	handstest.Each(t, func(t *testing.T, e handstest.Engine) {
		f := newFixture(t, e)
		res := f.ready()
		ctx := context.Background()
		rec := f.receipt()
		rec.ContainerID, rec.Generation, rec.Phase = "", "", PhaseCreating // the create's answer never reached the receipt
		if err := writeReceipt(f.root, rec); err != nil {
			t.Fatal(err)
		}
		st, err := Status(ctx, f.root)
		if err != nil || len(st.Drift) != 1 || !strings.Contains(st.Drift[0].Problem, "reconciliation required") ||
			!strings.Contains(st.Drift[0].Fix, "`"+f.cliPrefix()+" stop` the running ones yourself, then run `warden hands finish --root "+f.root) {
			t.Fatalf("status: %+v %v", st, err)
		}
		_, err = Finish(ctx, f.root, nil, nil)
		wantContains(t, err, "reconciliation required", "`"+f.cliPrefix()+" stop` it yourself", "warden hands finish --root "+f.root)
		if c := f.inspect(res.ContainerID); !c.State.Running {
			t.Fatal("finish stopped an unrecorded container")
		}
		if _, err := f.cli.ContainerStop(ctx, res.ContainerID, client.ContainerStopOptions{}); err != nil {
			t.Fatal(err)
		}
		st, err = Status(ctx, f.root)
		if err != nil || len(st.Drift) != 1 || !strings.Contains(st.Drift[0].Problem, "stopped container(s) "+ShortID(res.ContainerID)) ||
			!strings.HasPrefix(st.Drift[0].Fix, "run `warden hands finish --root "+f.root) {
			t.Fatalf("status after docker stop: %+v %v", st, err)
		}
		fin, err := Finish(ctx, f.root, nil, nil)
		if err != nil || fin.Stopped || fin.Phase != PhaseFinished || !strings.Contains(fin.Note, ShortID(res.ContainerID)) || !strings.Contains(fin.Note, "rm") {
			t.Fatalf("finish after docker stop: %+v %v", fin, err)
		}
	})
}
