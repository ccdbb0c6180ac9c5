package jail

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wardenhq/warden/engine/hooks"
)

const testToken = "cap_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// testJail is a Jail around the default bwrap, without admission (the
// argv shape does not depend on it).
func testJail() *Jail {
	return &Jail{Bwrap: &Bwrap{Path: DefaultBwrap}, Setpriv: DefaultSetpriv, UID: DefaultUID, GID: DefaultGID}
}

func testSpawn() hooks.Spawn {
	return hooks.Spawn{
		Argv: []string{ModuleTarget + "/hook.sh", "--flag", "value"},
		Dir:  ModuleTarget,
		Env:  []string{"LANG=C.UTF-8", "PATH=" + BinDir + ":/usr/bin:/bin", "WARDEN_SOCKET=" + SocketTarget, "WARDEN_TOKEN=" + testToken},
	}
}

// spawnerPlan is a plan whose sources exist; the module dir is 0755 so
// that the unprivileged hook can enter it.
func spawnerPlan(t *testing.T, network bool) (*Plan, PlanInput) {
	t.Helper()
	in := planInput(t)
	in.Network = network
	os.Chmod(in.ModuleDir, 0o755)
	plan, err := BuildPlan(in)
	if err != nil {
		t.Fatal(err)
	}
	return plan, in
}

// readArgsFile reads the --args memfd: the options of the jail proper,
// NUL-separated.
func readArgsFile(t *testing.T, f *os.File) []string {
	t.Helper()
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if len(b) == 0 || b[len(b)-1] != 0 {
		t.Fatalf("--args data is not NUL-terminated: %q", b)
	}
	return strings.Split(string(b[:len(b)-1]), "\x00")
}

// hasSeq reports whether seq occurs contiguously in args.
func hasSeq(args []string, seq ...string) bool {
	for i := 0; i+len(seq) <= len(args); i++ {
		if slices.Equal(args[i:i+len(seq)], seq) {
			return true
		}
	}
	return false
}

func TestSpawnerArgvShape(t *testing.T) {
	for _, network := range []bool{false, true} {
		t.Run("network="+strconv.FormatBool(network), func(t *testing.T) {
			plan, in := spawnerPlan(t, network)
			s := testJail().Spawner(plan, network)
			s.res = hooks.Resources{Tmp: 64 << 20, RunDir: 16 << 20}
			cmd, err := s.Command(testSpawn())
			if err != nil {
				t.Fatal(err)
			}
			defer s.Release()

			want := 5 // seccomp, passwd, group, args, block
			if os.Geteuid() == 0 {
				want = 6 // and the outer layer's args
			}
			if len(cmd.ExtraFiles) != want {
				t.Fatalf("%d files handed to bwrap, want %d (seccomp, passwd, group, args, block, outer args as root)", len(cmd.ExtraFiles), want)
			}
			inner := readArgsFile(t, cmd.ExtraFiles[fdArgs-3])
			argv := cmd.Args

			// The token is never on argv (world-readable in /proc), nor in
			// bwrap's own environment; it travels in the --args memfd.
			for _, a := range argv {
				if strings.Contains(a, testToken) {
					t.Errorf("the token is on bwrap's argv: %q", argv)
				}
			}
			if !slices.Equal(cmd.Env, []string{"PATH=/usr/bin:/bin"}) {
				t.Errorf("bwrap's own environment = %q", cmd.Env)
			}
			if !hasSeq(inner, "--setenv", "WARDEN_TOKEN", testToken) {
				t.Errorf("the token is not set through --args: %q", inner)
			}
			if !hasSeq(inner, "--clearenv", "--setenv") || !hasSeq(inner, "--setenv", "LANG", "C.UTF-8") {
				t.Errorf("the environment is not cleared, then set from the Spawn: %q", inner)
			}

			// The hook's own command is last on argv, after "--", and
			// only there.
			tail := append([]string{"--"}, testSpawn().Argv...)
			if !slices.Equal(argv[len(argv)-len(tail):], tail) {
				t.Errorf("argv does not end with %q: %q", tail, argv)
			}
			if slices.Contains(inner, testSpawn().Argv[0]) {
				t.Errorf("the hook's command is in --args: %q", inner)
			}

			// The jail proper (inner options): namespaces, identity,
			// capabilities, session, seccomp, working dir.
			for _, seq := range [][]string{
				{"--unshare-user"}, {"--unshare-ipc"}, {"--unshare-uts"}, {"--unshare-cgroup-try"},
				{"--uid", "60999"}, {"--gid", "60999"},
				{"--die-with-parent"}, {"--new-session"}, {"--cap-drop", "ALL"},
				{"--clearenv"}, {"--seccomp", strconv.Itoa(fdSeccomp)},
				{"--chdir", ModuleTarget},
			} {
				if !hasSeq(inner, seq...) {
					t.Errorf("the jail's options lack %q: %q", seq, inner)
				}
			}
			if got := slices.Contains(inner, "--unshare-net"); got == network {
				t.Errorf("network granted=%v but --unshare-net present=%v", network, got)
			}
			if slices.Contains(argv, "--share-net") || slices.Contains(inner, "--share-net") {
				t.Error("--share-net used")
			}

			// Where the mounts are: the outer (root) layer's argv, or the
			// single layer's --args.
			mounts := inner
			if os.Geteuid() == 0 {
				// The outer layer's options, host paths among them, come
				// through --args too: argv is the jail's /proc/1/cmdline.
				mounts = readArgsFile(t, cmd.ExtraFiles[fdOuter-3])
				if !slices.Equal(argv[:3], []string{DefaultBwrap, "--args", strconv.Itoa(fdOuter)}) {
					t.Errorf("argv = %q, want bwrap --args %d -- setpriv ...", argv, fdOuter)
				}
				for _, a := range argv {
					if strings.HasPrefix(a, in.ModuleDir) || strings.HasPrefix(a, in.RunDir) {
						t.Errorf("a host path is on the outer layer's argv (the hook's /proc/1/cmdline): %q", a)
					}
				}
				for _, seq := range [][]string{
					{"--die-with-parent"}, {"--unshare-pid"}, {"--proc", "/proc"}, {"--block-fd", strconv.Itoa(fdBlock)},
				} {
					if !hasSeq(mounts, seq...) {
						t.Errorf("the outer layer lacks %q: %q", seq, mounts)
					}
				}
				if !hasSeq(argv, innerSetpriv, "--reuid", "60999", "--regid", "60999", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--", innerBwrap, "--args", strconv.Itoa(fdArgs)) {
					t.Errorf("the outer layer does not exec setpriv then the inner bwrap: %q", argv)
				}
				// The outer layer is root: it must not run the hook.
				if i := slices.Index(argv, "--"); i < 0 || argv[i+1] != innerSetpriv {
					t.Errorf("the outer layer does not exec setpriv as its command: %q", argv)
				}
			} else {
				if !slices.Equal(argv[:3], []string{DefaultBwrap, "--args", strconv.Itoa(fdArgs)}) {
					t.Errorf("argv = %q, want bwrap --args %d -- CMD", argv, fdArgs)
				}
				if !hasSeq(inner, "--unshare-pid") {
					t.Errorf("no pid namespace: %q", inner)
				}
			}
			for _, seq := range [][]string{
				{"--ro-bind", "/usr", "/usr"},
				{"--ro-bind", in.ModuleDir, ModuleTarget},
				{"--ro-bind", in.Warden, WardenTarget},
				// /tmp and the run dir are tmpfs of their own, sized; the
				// run dir holds only the broker socket from the host.
				{"--size", "67108864", "--perms", "1777", "--tmpfs", "/tmp"},
				{"--size", "16777216", "--perms", "1777", "--tmpfs", RunTarget},
				{"--bind", filepath.Join(in.RunDir, SocketName), SocketTarget},
				// The synthesized passwd and group are readable by the hook.
				{"--perms", "0644", "--ro-bind-data", strconv.Itoa(fdPasswd), "/etc/passwd"},
				{"--perms", "0644", "--ro-bind-data", strconv.Itoa(fdGroup), "/etc/group"},
				{"--dev", "/dev"},
			} {
				if !hasSeq(mounts, seq...) {
					t.Errorf("the mounts lack %q: %q", seq, mounts)
				}
			}
			if hasSeq(mounts, "--bind", "/etc", "/etc") || hasSeq(mounts, "--ro-bind", "/etc", "/etc") {
				t.Error("/etc is bound whole")
			}

			// The seccomp fd holds this run's filter.
			prog, err := SeccompFilter(network)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(cmd.ExtraFiles[fdSeccomp-3])
			if !bytes.Equal(got, prog) {
				t.Errorf("seccomp fd holds %d bytes, not the network=%v filter (%d bytes)", len(got), network, len(prog))
			}
		})
	}
}

// With prlimit admitted, bwrap is started through it with the hooks'
// RLIMIT_NPROC (prlimit execs bwrap: same pid, no window without it).
func TestSpawnerSetsNproc(t *testing.T) {
	plan, _ := spawnerPlan(t, false)
	j := testJail()
	j.Prlimit = DefaultPrlimit
	s := j.Spawner(plan, false)
	cmd, err := s.Command(testSpawn())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	n := strconv.Itoa(HookNproc())
	if want := []string{DefaultPrlimit, "--nproc=" + n + ":" + n, "--", DefaultBwrap}; !slices.Equal(cmd.Args[:4], want) {
		t.Errorf("argv starts %q, want %q", cmd.Args[:4], want)
	}
	if max := readInt("/proc/sys/kernel/pid_max"); HookNproc() >= max {
		t.Errorf("RLIMIT_NPROC %d is not below pid_max %d", HookNproc(), max)
	}
}

func TestSpawnerReleaseClosesFiles(t *testing.T) {
	plan, _ := spawnerPlan(t, false)
	s := testJail().Spawner(plan, false)
	cmd, err := s.Command(testSpawn())
	if err != nil {
		t.Fatal(err)
	}
	s.Release()
	for i, f := range cmd.ExtraFiles {
		if _, err := f.Stat(); err == nil {
			t.Errorf("file %d (fd %d in bwrap) still open after Release", i, 3+i)
		}
	}
	if _, err := s.Command(hooks.Spawn{}); err == nil {
		t.Error("an empty argv was accepted")
	}
}

// TestSpawnerTokenNotInProcCmdline runs the real jail and scans every
// command line on the host while the hook runs: the token is in none of
// them (bwrap's, setpriv's, the hook's), yet the hook has it.
func TestSpawnerTokenNotInProcCmdline(t *testing.T) {
	seccompBwrap(t)
	j, err := New(DefaultBwrap)
	if err != nil {
		t.Fatal(err)
	}
	plan, _ := spawnerPlan(t, false)
	s := j.Spawner(plan, false)
	sp := testSpawn()
	sp.Argv = []string{"/bin/sh", "-c", `case "$WARDEN_TOKEN" in cap_*) echo has-token;; esac; exec sleep 1.5`}
	cmd, err := s.Command(sp)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.Release()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	scans, sawSleep := 0, false
	for running := true; running; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("jailed command: %v\n%s", err, out.String())
			}
			running = false
		default:
			dirs, _ := filepath.Glob("/proc/[0-9]*")
			for _, d := range dirs {
				b, err := os.ReadFile(d + "/cmdline")
				if err != nil {
					continue
				}
				if bytes.Contains(b, []byte(testToken)) {
					t.Errorf("the token is in %s/cmdline: %q", d, b)
				}
				sawSleep = sawSleep || bytes.Equal(b, []byte("sleep\x001.5\x00"))
			}
			scans++
			time.Sleep(10 * time.Millisecond)
		}
	}
	if !strings.Contains(out.String(), "has-token") {
		t.Errorf("the hook did not get its token: %q", out.String())
	}
	if !sawSleep {
		t.Errorf("the scan (%d passes) never saw the jailed sleep: it proves nothing", scans)
	}
}

// The hooks' RLIMIT_NPROC is the least of warden's cap, pid_max/4 and the
// hard limit warden has: lowered, never raised (an unprivileged user
// cannot raise a hard limit, and asking to would fail every run).
func TestHookNprocBounds(t *testing.T) {
	inf := uint64(unix.RLIM_INFINITY)
	for _, tc := range []struct {
		pidMax, hard uint64
		n            uint64
		source       string
	}{
		{4194304, inf, 8192, NprocFromCap},   // a big host, no ulimit
		{32768, inf, 8192, NprocFromCap},     // pid_max/4 ties the cap: the cap
		{32768, 8192, 8192, NprocFromCap},    // so does the hard limit
		{16384, inf, 4096, NprocFromPidMax},  // a small pid_max
		{4194304, 5000, 5000, NprocFromHard}, // ulimit -u 5000 (limits.conf)
		{4194304, 7977, 7977, NprocFromHard}, // a 2 GiB host's default
		{16384, 3000, 3000, NprocFromHard},   // the hard limit below pid_max/4
		{16384, 4095, 4095, NprocFromHard},   //
		{16384, 4097, 4096, NprocFromPidMax}, //
		{0, inf, 8192, NprocFromCap},         // pid_max unreadable
		{0, 100, 100, NprocFromHard},         //
		{4194304, 0, 0, NprocFromHard},       // never raised, even from 0
	} {
		n, source := hookNproc(tc.pidMax, tc.hard)
		if n != tc.n || source != tc.source {
			t.Errorf("hookNproc(pid_max %d, hard %d) = %d (%s), want %d (%s)", tc.pidMax, tc.hard, n, source, tc.n, tc.source)
		}
	}
	var cur unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NPROC, &cur); err != nil {
		t.Fatal(err)
	}
	if uint64(HookNproc()) > cur.Max {
		t.Errorf("HookNproc %d is above this process's hard limit %d", HookNproc(), cur.Max)
	}
	if HookNprocSource() == "" {
		t.Error("HookNprocSource is empty")
	}
}
