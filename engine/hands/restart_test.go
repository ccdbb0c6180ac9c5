package hands

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"warden/engine/hands/handstest"
)

// service is an engine process a test started itself, so it may stop and
// start it again without disturbing the shared test engines.
type service struct {
	t    *testing.T
	args []string
	sock string
	log  string
	cmd  *exec.Cmd
}

func (s *service) start() {
	s.t.Helper()
	os.Remove(s.sock)
	logf, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		s.t.Fatal(err)
	}
	defer logf.Close()
	s.cmd = exec.Command(s.args[0], s.args[1:]...)
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start %s: %v", s.args[0], err)
	}
	cmd := s.cmd
	s.t.Cleanup(func() { stopProcess(cmd) })
	cli, err := client.New(client.WithHost("unix://"+s.sock), client.WithAPIVersionNegotiation())
	if err != nil {
		s.t.Fatal(err)
	}
	defer cli.Close()
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := cli.Ping(ctx, client.PingOptions{})
		cancel()
		if err == nil {
			return
		}
		if i == 120 {
			b, _ := os.ReadFile(s.log)
			s.t.Fatalf("%s did not answer on %s: %v\n%s", s.args[0], s.sock, err, b)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// restart stops the process (SIGTERM, as a service manager would) and
// starts it again with the same arguments: the socket is re-created.
func (s *service) restart() {
	s.t.Helper()
	stopProcess(s.cmd)
	s.start()
}

func stopProcess(cmd *exec.Cmd) {
	if cmd.ProcessState != nil {
		return
	}
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
	}
}

// podmanService is a Podman service on storage under dir, listening on
// sock; podman is the Podman binary the shared test service runs.
func podmanService(t *testing.T, dir, storage, sock string) *service {
	podman, err := exec.LookPath("podman")
	if err != nil {
		t.Fatalf("podman: %v", err)
	}
	for _, d := range []string{filepath.Join(storage, "root"), filepath.Join(storage, "run"), filepath.Join(dir, "tmp")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return &service{t: t, sock: sock, log: filepath.Join(dir, "podman.log"), args: []string{podman,
		"--root", filepath.Join(storage, "root"), "--runroot", filepath.Join(storage, "run"), "--tmpdir", filepath.Join(dir, "tmp"),
		"--storage-driver", "vfs", "--cgroup-manager", "cgroupfs", "--events-backend", "file", "--runtime", "runc",
		"system", "service", "--time=0", "unix://" + sock}}
}

// podmanStorage is where the shared test service keeps its storage: the
// dir of its socket (scripts/podman-test).
func podmanStorage(t *testing.T) string {
	return filepath.Dir(handstest.Podman(t))
}

// A Podman service restarted on the same storage is the same engine:
// status shows no drift and finish stops the container. A service on
// another storage root answering on the same socket is not: status says
// different, finish refuses, and nothing is stopped.
func TestPodmanRestartedServiceIsSameEngine(t *testing.T) {
	shared := podmanStorage(t)
	base := handstest.Base(t, "")
	sock := filepath.Join(base, "p.sock")
	// The same storage as the shared service (which has the test image),
	// served by a process of this test's own.
	svc := podmanService(t, base, shared, sock)
	svc.start()
	t.Cleanup(func() { handstest.RemoveContainers(t, sock, base) })

	f := newFixture(t, handstest.Engine{Name: EnginePodman, Socket: sock})
	res := f.ready()
	before := f.receipt()

	svc.restart()
	st, err := Status(context.Background(), f.root)
	if err != nil || st.Engine != "ok" || len(st.Drift) != 0 || st.Container.State != "running" || !st.Container.GenerationMatches {
		t.Fatalf("status after a restart of the service: %+v %v", st, err)
	}
	if after, _ := socketIdentity(sock); after == before.SocketIdentity {
		t.Fatalf("the restart did not re-create the socket (%s): the test proves nothing", after)
	}
	if out, err := Exec(context.Background(), f.root, []string{"true"}); err != nil || out.Exit != 0 {
		t.Fatalf("exec after the restart: %+v %v", out, err)
	}

	// Another storage root on the same socket path.
	stopProcess(svc.cmd)
	other := podmanService(t, base, filepath.Join(base, "other"), sock)
	other.start()
	st, err = Status(context.Background(), f.root)
	if err != nil || st.Engine != "different" || len(st.Drift) != 1 || !strings.Contains(st.Drift[0].Problem, "storage vfs:"+filepath.Join(base, "other", "root")) {
		t.Fatalf("status with another storage root: %+v %v", st, err)
	}
	_, err = Finish(context.Background(), f.root, nil, nil)
	wantContains(t, err, "is not the one", "warden will not act through it")
	stopProcess(other.cmd)

	// Back on the right storage, finish stops what init started.
	svc.start()
	if c := f.inspect(res.ContainerID); !c.State.Running {
		t.Fatal("the container stopped while the other engine answered")
	}
	fin, err := Finish(context.Background(), f.root, nil, nil)
	if err != nil || !fin.Stopped {
		t.Fatalf("finish after the restarts: %+v %v", fin, err)
	}
}
