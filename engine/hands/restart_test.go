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

	"github.com/wardenhq/warden/engine/hands/handstest"
)

// service is a runtime process a test started itself, so it may stop and
// start it again without disturbing the shared test runtimes.
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
	cli, err := client.New(client.WithHost("unix://" + s.sock))
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
// starts it again with the same arguments: the socket is re-created (its
// inode number may come back the same: the file system may reuse it).
func (s *service) restart() {
	s.t.Helper()
	old := s.cmd
	stopProcess(old)
	s.start()
	if old.ProcessState == nil || s.cmd.Process.Pid == old.Process.Pid {
		s.t.Fatal("the service was not restarted: the test proves nothing")
	}
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
func podmanService(t *testing.T, dir, root, runroot, sock string) *service {
	podman, err := exec.LookPath("podman")
	if err != nil {
		t.Fatalf("podman: %v", err)
	}
	for _, d := range []string{root, runroot, filepath.Join(dir, "tmp")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return &service{t: t, sock: sock, log: filepath.Join(dir, "podman.log"), args: []string{podman,
		"--root", root, "--runroot", runroot, "--tmpdir", filepath.Join(dir, "tmp"),
		"--storage-driver", "vfs", "--cgroup-manager", "cgroupfs", "--events-backend", "file", "--runtime", "runc",
		"system", "service", "--time=0", "unix://" + sock}}
}

// podmanStorage is where the shared test service keeps its storage: the
// dir of its socket (scripts/podman-test).
func podmanStorage(t *testing.T) string {
	return filepath.Dir(handstest.Podman(t))
}

// A Podman service restarted on the same storage is the same runtime:
// status shows no drift and finish stops the container. A service on
// another storage root answering on the same socket is not: status says
// different, finish refuses, and nothing is stopped.
func TestPodmanRestartedServiceIsSameEngine(t *testing.T) {
	shared := podmanStorage(t)
	base := handstest.Base(t, "")
	sock := filepath.Join(base, "p.sock")
	// The same storage as the shared service (which has the test image),
	// served by a process of this test's own.
	svc := podmanService(t, base, filepath.Join(shared, "root"), filepath.Join(shared, "run"), sock)
	svc.start()
	f := newFixture(t, handstest.Engine{Name: RuntimePodman, Socket: sock})
	// Through the shared service (same storage): ours may be stopped.
	t.Cleanup(func() { handstest.RemoveContainers(t, handstest.Podman(t), f.base) })
	res := f.ready()

	svc.restart()
	st, err := Status(context.Background(), f.root)
	if err != nil || st.Engine != "ok" || len(st.Drift) != 0 || st.Container.State != "running" || !st.Container.GenerationMatches {
		t.Fatalf("status after a restart of the service: %+v %v", st, err)
	}
	if out, err := Exec(context.Background(), f.root, []string{"true"}); err != nil || out.Exit != 0 {
		t.Fatalf("exec after the restart: %+v %v", out, err)
	}

	// Another storage root on the same socket path.
	stopProcess(svc.cmd)
	// Podman wants a run root of at most 50 bytes: a private dir in /tmp.
	run, err := os.MkdirTemp("", "warden-prun-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(run) })
	other := podmanService(t, base, filepath.Join(base, "other", "root"), run, sock)
	other.start()
	st, err = Status(context.Background(), f.root)
	if err != nil || st.Engine != "different" || len(st.Drift) != 1 || !strings.Contains(st.Drift[0].Problem, "storage vfs:"+filepath.Join(base, "other", "root")+",") {
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
	handstest.RemoveContainers(t, sock, f.base)
}

// dockerService is a private dockerd with its data under dir. It keeps
// containers running across its own restart (--live-restore), as a
// production daemon configured so would.
func dockerService(t *testing.T, dir, sock string) *service {
	dockerd, err := exec.LookPath("dockerd")
	if err != nil {
		t.Fatalf("dockerd: %v", err)
	}
	// dockerd bind-mounts its data root on itself (private propagation)
	// and leaves the mount behind when it stops. Registered first, so it
	// runs after every stop.
	t.Cleanup(func() { syscall.Unmount(filepath.Join(dir, "data"), syscall.MNT_DETACH) })
	return &service{t: t, sock: sock, log: filepath.Join(dir, "dockerd.log"), args: []string{dockerd,
		"--host", "unix://" + sock, "--data-root", filepath.Join(dir, "data"), "--exec-root", filepath.Join(dir, "x"),
		"--pidfile", filepath.Join(dir, "docker.pid"), "--bridge=none", "--iptables=false", "--ip6tables=false", "--live-restore"}}
}

// A dockerd restarted on the same data root keeps its daemon ID: the
// same runtime, though its socket's inode changed. Another daemon (another
// data root, so another ID) on the same socket is not.
func TestDockerRestartedServiceIsSameEngine(t *testing.T) {
	handstest.Docker(t) // the shared one proves dockerd and the image tarball work here
	base := handstest.Base(t, "")
	sock := filepath.Join(base, "d.sock")
	svc := dockerService(t, base, sock)
	svc.start()
	cli := handstest.Client(t, sock)
	handstest.ImportImage(t, cli)

	f := newFixture(t, handstest.Engine{Name: RuntimeDocker, Socket: sock})
	res := f.ready()

	svc.restart()
	st, err := Status(context.Background(), f.root)
	if err != nil || st.Engine != "ok" || len(st.Drift) != 0 || st.Container.State != "running" || !st.Container.GenerationMatches {
		t.Fatalf("status after a restart of dockerd: %+v %v", st, err)
	}

	// Another daemon on the same socket path.
	stopProcess(svc.cmd)
	otherDir := filepath.Join(base, "o")
	os.Mkdir(otherDir, 0o700)
	other := dockerService(t, otherDir, sock)
	other.start()
	st, err = Status(context.Background(), f.root)
	if err != nil || st.Engine != "different" || len(st.Drift) != 1 {
		t.Fatalf("status with another daemon: %+v %v", st, err)
	}
	_, err = Finish(context.Background(), f.root, nil, nil)
	wantContains(t, err, "is not the one", "warden will not act through it")
	stopProcess(other.cmd)

	svc.start()
	if c := f.inspect(res.ContainerID); !c.State.Running {
		t.Fatal("the container stopped while the other daemon answered")
	}
	fin, err := Finish(context.Background(), f.root, nil, nil)
	if err != nil || !fin.Stopped {
		t.Fatalf("finish after the restarts: %+v %v", fin, err)
	}
	handstest.RemoveContainers(t, sock, f.base)
}
