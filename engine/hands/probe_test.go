package hands

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/wardenhq/warden/engine/hands/handstest"
)

// fakeRuntime answers the three calls openRuntime makes, for faults the
// real runtimes on this host cannot show: a runtime that is neither
// Docker nor Podman, a Docker without docker-init, a rootless Podman (on
// cgroup v1 and v2). Beside the real tests (TestDoctorEngineSocket and the hands
// suite run on the real runtimes), never instead of them.
func fakeRuntime(t *testing.T, component, cgroup string, withInit bool, socketUID int) string {
	t.Helper()
	sock := filepath.Join(handstest.Base(t, ""), "fake.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/_ping", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Api-Version", "1.41")
		w.Write([]byte("OK"))
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/version"):
			comps := []map[string]string{{"Name": component, "Version": "9.9"}}
			if withInit {
				comps = append(comps, map[string]string{"Name": "docker-init", "Version": "0.19.0"})
			}
			json.NewEncoder(w).Encode(map[string]any{"Version": "9.9", "ApiVersion": "1.41", "Components": comps})
		case strings.HasSuffix(r.URL.Path, "/info"):
			json.NewEncoder(w).Encode(map[string]any{"ID": "AAAA:BBBB", "Driver": "vfs", "DockerRootDir": "/var/lib/fake", "CgroupVersion": cgroup})
		default:
			http.NotFound(w, r)
		}
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	if socketUID != 0 {
		if err := os.Chown(sock, socketUID, socketUID); err != nil {
			t.Fatal(err)
		}
	}
	return sock
}

func TestProbeEngineFaults(t *testing.T) {
	ctx := context.Background()

	_, err := ProbeRuntime(ctx, fakeRuntime(t, "Containerd Thing", "2", true, 0))
	if err == nil || !strings.Contains(err.Error(), "neither a Docker Engine nor Podman") {
		t.Errorf("an unknown engine: %v", err)
	}

	in, err := ProbeRuntime(ctx, fakeRuntime(t, "Engine", "2", false, 0))
	if err != nil || in.Engine != RuntimeDocker || !strings.Contains(in.Problem, "no docker-init component") || in.Fix == "" {
		t.Errorf("Docker without docker-init: %+v %v", in, err)
	}
	in, err = ProbeRuntime(ctx, fakeRuntime(t, "Engine", "1", true, 0))
	if err != nil || in.Problem != "" || in.Init != "docker-init 0.19.0" || in.Storage != "vfs:/var/lib/fake" || in.DaemonID != "AAAA:BBBB" || in.Label != "Docker 9.9 (API 1.41)" {
		t.Errorf("a Docker with docker-init: %+v %v", in, err)
	}

	if os.Geteuid() != 0 {
		t.Skip("the rootless case chowns the fake socket, which needs root")
	}
	// Rootless Podman is refused on either cgroup version: its Docker API
	// drops the ulimits (TestInitRefusesRootlessPodman shows it on a real
	// one); on cgroup v1 the pids limit too.
	for _, cg := range []string{"1", "2"} {
		sock := fakeRuntime(t, "Podman Engine", cg, false, 1000)
		in, err = ProbeRuntime(ctx, sock)
		if err != nil || in.Engine != RuntimePodman || !in.Rootless || in.DaemonID != podmanID("vfs:/var/lib/fake") ||
			!strings.Contains(in.Problem, "rootless (its socket belongs to uid 1000)") || !strings.Contains(in.Problem, "drops the ulimits") ||
			strings.Contains(in.Problem, "pids limit") != (cg == "1") || in.Fix != RootlessPodmanFix {
			t.Errorf("rootless Podman on cgroup v%s: %+v %v", cg, in, err)
		}
		// Init refuses it before the root exists, saying what to do.
		root := filepath.Join(handstest.Base(t, ""), "root")
		_, err = Init(ctx, InitOptions{Root: root, EngineSocket: sock, Image: "x:1", Access: AccessFiles, Owner: testOwner})
		wantContains(t, err, "drops the ulimits", "run the Podman service as root", "nothing was created, so run the same init again")
		if !errors.Is(err, errRootlessPodman) || !slices.Contains(Fixes(err), RootlessPodmanFix) {
			t.Errorf("init on rootless Podman on cgroup v%s: not a refusal with its fix: %#v", cg, err)
		}
		if _, serr := os.Lstat(root); !errors.Is(serr, os.ErrNotExist) {
			t.Errorf("the refused init created its root: %v", serr)
		}
	}
	// The same Podman with a root-owned socket is fine.
	if in, err := ProbeRuntime(ctx, fakeRuntime(t, "Podman Engine", "2", false, 0)); err != nil || in.Problem != "" || in.Rootless {
		t.Errorf("Podman as root on cgroup v2: %+v %v", in, err)
	}
}
