package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/wardenhq/warden/engine/jail"
)

// TestLandlockJail forces the landlock backend (--jail=landlock) on this
// host, as root and as the ordinary user uid 1000, and runs a hook that
// tries what the backend must stop: reading the operator's home, the
// data dir and another run's dir, writing the module dir, opening an
// inet socket. It must still reach its run dir, its tmp and the broker,
// run in its own process group, and the start line and receipts must
// say `jail landlock`.
func TestLandlockJail(t *testing.T) {
	needRootFor(t, "the ordinary user's variant needs setpriv, and the root variant is the other half")
	if abi := jail.ProbeHost().LandlockABI; abi < jail.MinLandlockABI {
		t.Skipf("Landlock ABI %d here (needs %d)", abi, jail.MinLandlockABI)
	}
	base := sharedDir(t, "warden-landlock-")
	bin := filepath.Join(base, "warden")
	buildWarden(t, bin)
	for _, who := range []struct {
		name string
		uid  int
	}{{"root", 0}, {"uid1000", ordinaryUID}} {
		t.Run(who.name, func(t *testing.T) {
			dir := filepath.Join(base, who.name)
			data, home := filepath.Join(dir, "data"), filepath.Join(dir, "home")
			other := filepath.Join(data, "runs", "20200101T000000-000000")
			for _, d := range []string{other, home} {
				if err := os.MkdirAll(d, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			for _, f := range []string{filepath.Join(home, "secret"), filepath.Join(other, "secret")} {
				if err := os.WriteFile(f, []byte("secret\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			modDir := filepath.Join(dir, "modules", "probe")
			// A socket of the host the hook's uid may connect to, as it may
			// to warden's own control.sock or, as root, docker.sock.
			hostSock := filepath.Join(dir, "host.sock")
			ln, err := net.Listen("unix", hostSock)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			os.Chmod(hostSock, 0o666)
			var reached atomic.Int32
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					reached.Add(1)
					c.Close()
				}
			}()
			script := `t() { if eval "$2" >/dev/null 2>&1; then echo "$1: yes"; else echo "$1: no"; fi; }
t "read home" "cat ` + filepath.Join(home, "secret") + `"
t "list data" "ls ` + data + `"
t "read other run" "cat ` + filepath.Join(other, "secret") + `"
t "write module" "echo x > ` + filepath.Join(modDir, "pwn") + `"
t "write tmp" 'echo x > "$TMPDIR/w" && test "$HOME" = "$TMPDIR"'
t "write run dir" 'echo x > "$(dirname "$TMPDIR")/w"'
t "inet socket" "exec 3<>/dev/tcp/127.0.0.1/9"
t "unix socket by path" "perl -MSocket -e 'socket(S, PF_UNIX, SOCK_STREAM, 0) and connect(S, pack_sockaddr_un(\$ARGV[0])) or exit 1' ` + hostSock + `"
t "datagram pair" "perl -MSocket -e 'socketpair(A, B, AF_UNIX, SOCK_DGRAM, 0) or exit 1'"
t "stream pair" "perl -MSocket -e 'socketpair(A, B, AF_UNIX, SOCK_STREAM, 0) or exit 1'"
t "broker" "warden hook context"
read -r _ _ _ _ pgid _ < /proc/self/stat
if [ "$pgid" = "$$" ]; then echo "own process group: yes"; else echo "own process group: no ($pgid, pid $$)"; fi
`
			mod := bashModule(t, dir, "probe", "p", script)
			if mod != modDir {
				t.Fatalf("module at %s, want %s", mod, modDir)
			}
			if who.uid != 0 {
				chownTree(t, dir, who.uid, who.uid)
			}
			run := func(args ...string) (string, error) {
				argv := append([]string{"--data-dir", data}, args...)
				cmd := exec.Command(bin, argv...)
				if who.uid != 0 {
					argv = append([]string{"--reuid", strconv.Itoa(who.uid), "--regid", strconv.Itoa(who.uid), "--clear-groups", "--", bin}, argv...)
					cmd = exec.Command("setpriv", argv...)
				}
				cmd.Env = hostEnv(home)
				cmd.Dir = home
				out, err := cmd.CombinedOutput()
				return string(out), err
			}
			if out, err := run("module", "add", mod); err != nil {
				t.Fatalf("module add: %v\n%s", err, out)
			}
			out, err := run("hook", "run", "probe", "p", "--jail=landlock")
			if err != nil {
				t.Fatalf("hook run --jail=landlock: %v\n%s", err, out)
			}
			for _, want := range []string{"started (jail landlock", "read home: no", "list data: no", "read other run: no", "write module: no",
				"write tmp: yes", "write run dir: yes", "inet socket: no", "unix socket by path: no", "datagram pair: no", "stream pair: yes", "broker: yes", "own process group: yes", "succeeded"} {
				if !strings.Contains(out, want) {
					t.Errorf("hook run as %s: no %q in:\n%s", who.name, want, out)
				}
			}
			if n := reached.Load(); n != 0 {
				t.Errorf("the hook reached a host socket by its path (%d connections)", n)
			}
			if _, err := os.Stat(filepath.Join(modDir, "pwn")); err == nil {
				t.Errorf("the hook wrote into its module dir")
			}
			rec, _ := run("receipts", "list")
			if !strings.Contains(rec, "(jail landlock") || strings.Contains(rec, "(jail bwrap") {
				t.Errorf("receipts do not say jail landlock:\n%s", rec)
			}
		})
	}
}
