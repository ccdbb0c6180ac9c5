package jail

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// Egress mode: the network namespace stays unshared (empty), the seccomp
// filter is the one that allows AF_INET/AF_INET6, and the jail's program
// is the bridge, with the hook's argv after its "--".
func TestSpawnerEgressMode(t *testing.T) {
	plan, _ := spawnerPlan(t, false)
	s := testJail().Spawner(plan, false)
	sock := filepath.Join(t.TempDir(), EgressSocketName)
	if err := os.WriteFile(sock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Egress(sock); err != nil {
		t.Fatal(err)
	}
	cmd, err := s.Command(testSpawn())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	inner := readArgsFile(t, cmd.ExtraFiles[fdArgs-3])
	if !slices.Contains(inner, "--unshare-net") {
		t.Errorf("egress mode shares a network namespace: %q", inner)
	}
	want := append([]string{"--", WardenTarget, "hook", "egress-bridge", "--socket", EgressSocketTarget, "--"}, testSpawn().Argv...)
	if argv := cmd.Args; !slices.Equal(argv[len(argv)-len(want):], want) {
		t.Errorf("argv does not end with the bridge and the hook: %q", argv)
	}
	got, err := io.ReadAll(cmd.ExtraFiles[fdSeccomp-3])
	if err != nil {
		t.Fatal(err)
	}
	inet, _ := SeccompFilter(true)
	none, _ := SeccompFilter(false)
	if !bytes.Equal(got, inet) || bytes.Equal(inet, none) {
		t.Error("egress mode does not load the filter that allows AF_INET/AF_INET6")
	}
}
