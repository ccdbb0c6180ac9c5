package engine

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/wardenhq/warden/engine/hands"
)

// HandsEngineInfo is what warden knows about a container runtime before it
// creates anything on it.
type HandsEngineInfo = hands.RuntimeInfo

// HandsEngine reports which container runtime answers on socket (Docker or Podman),
// its API version and whether its init binary exists: the checks `warden
// doctor --engine-socket` and the init wizard make before anything is
// created. It changes nothing.
func (e *Engine) HandsEngine(ctx context.Context, socket string) (HandsEngineInfo, error) {
	return hands.ProbeRuntime(ctx, socket)
}

// minEngineAPI is the oldest Docker API warden's hands calls work with
// (HostConfig.Init arrived in 1.25); testedEngineAPI is what Debian 12's
// docker.io and podman speak, and what the tests run against.
const (
	minEngineAPI    = "1.25"
	testedEngineAPI = "1.41"
)

// doctorEngine checks the container runtime on socket: which one, its init binary
// and its API version, one line each.
func doctorEngine(socket string, add func(Check), problem func(string, string, string)) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	in, err := hands.ProbeRuntime(ctx, socket)
	if err != nil {
		problem("engine", err.Error(), "start the engine (dockerd, or `podman system service --time=0 unix://"+socket+"`), or pass the socket it listens on")
		return
	}
	who := fmt.Sprintf("%s at %s: %s, storage %s", in.Label, socket, in.Engine, in.Storage)
	if in.Rootless {
		who += fmt.Sprintf(", rootless (the socket belongs to uid %d)", in.SocketUID)
	}
	add(Check{Name: "engine", Status: "ok", Detail: who})
	if in.InitError != "" {
		problem("engine init", in.InitError, in.Fix)
	} else {
		add(Check{Name: "engine init", Status: "ok", Detail: in.Init + " present: --init works"})
	}
	switch {
	case apiBefore(in.APIVersion, minEngineAPI):
		problem("engine API", fmt.Sprintf("API %s is older than %s, which hands containers need", in.APIVersion, minEngineAPI), "upgrade the engine")
	case apiBefore(in.APIVersion, testedEngineAPI):
		add(Check{Name: "engine API", Status: "problem", Warning: true, Detail: fmt.Sprintf("API %s is older than %s, the version warden is tested with", in.APIVersion, testedEngineAPI),
			Fix: "upgrade the engine if init or status misbehave"})
	default:
		add(Check{Name: "engine API", Status: "ok", Detail: "API " + in.APIVersion + " negotiated; workspace inodes: " + in.Inodes})
	}
}

// apiBefore compares API versions "MAJOR.MINOR"; an unparsable one is old.
func apiBefore(v, than string) bool {
	parse := func(s string) (int, int, bool) {
		a, b, ok := strings.Cut(s, ".")
		x, err1 := strconv.Atoi(a)
		y, err2 := strconv.Atoi(b)
		return x, y, ok && err1 == nil && err2 == nil
	}
	x, y, ok := parse(v)
	tx, ty, _ := parse(than)
	return !ok || x < tx || (x == tx && y < ty)
}
