package hands

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wardenhq/warden/engine/hands/handstest"
)

func validReceipt() SetupReceipt {
	return SetupReceipt{Version: 2, Owner: "local:test", Engine: RuntimeDocker, EngineSocket: "/run/docker.sock", SocketIdentity: "64768:1234",
		DaemonID: "ICFL:TV3P:MQ2O:LHTN:UMKE:6RBL", EngineStorage: "overlay2:/var/lib/docker", Inodes: WorkspaceInodes, Image: "sha256:" + strings.Repeat("ab", 32),
		ContainerID: strings.Repeat("0f", 32), Generation: "2026-01-02T03:04:05.123456789Z", Phase: PhaseReady}
}

func validPodmanReceipt() SetupReceipt {
	r := validReceipt()
	r.Engine, r.EngineSocket, r.EngineStorage, r.Inodes = RuntimePodman, "/run/podman/podman.sock", "vfs:/var/lib/containers/storage", InodesUnboundedPodman
	r.DaemonID = podmanID(r.EngineStorage)
	return r
}

// receiptRoot is a root with an evidence dir and a valid receipt.
func receiptRoot(t *testing.T) (root, path string) {
	t.Helper()
	root = filepath.Join(handstest.Base(t, ""), "root")
	if err := os.MkdirAll(filepath.Join(root, EvidenceDir), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := writeReceipt(root, validReceipt()); err != nil {
		t.Fatal(err)
	}
	return root, filepath.Join(root, EvidenceDir, ReceiptFile)
}

func TestReadReceiptValid(t *testing.T) {
	root, _ := receiptRoot(t)
	got, err := ReadReceipt(root)
	if err != nil || got != validReceipt() {
		t.Fatalf("%+v %v", got, err)
	}
	// Every phase with what it promises.
	for _, r := range []SetupReceipt{
		{Version: 2, Owner: "o", Engine: RuntimeDocker, EngineSocket: "/s", SocketIdentity: "1:2", DaemonID: "d", Phase: PhasePrepared},
		{Version: 2, Owner: "o", Engine: RuntimeDocker, EngineSocket: "/s", SocketIdentity: "1:2", DaemonID: "d", Image: validReceipt().Image, Phase: PhaseCreating},
		{Version: 2, Owner: "o", Engine: RuntimeDocker, EngineSocket: "/s", SocketIdentity: "1:2", DaemonID: "d", Phase: PhaseFailed},
		validPodmanReceipt(),
	} {
		if err := writeReceipt(root, r); err != nil {
			t.Fatal(err)
		}
		if got, err := ReadReceipt(root); err != nil || got != r {
			t.Fatalf("%+v %v", got, err)
		}
	}
}

// The secret marker is in every bad receipt; no error may carry it.
const marker = "SECRETxyzzy"

func TestReadReceiptRefuses(t *testing.T) {
	valid := func() map[string]any {
		var m map[string]any
		b, _ := json.Marshal(validReceipt())
		json.Unmarshal(b, &m)
		return m
	}
	with := func(k string, v any) []byte {
		m := valid()
		m[k] = v
		b, _ := json.Marshal(m)
		return b
	}
	podman := func(k string, v any) []byte {
		var m map[string]any
		b, _ := json.Marshal(validPodmanReceipt())
		json.Unmarshal(b, &m)
		m[k] = v
		b, _ = json.Marshal(m)
		return b
	}
	without := func(k string) []byte {
		m := valid()
		delete(m, k)
		m["owner"] = marker // still a valid owner: the missing key is the fault
		b, _ := json.Marshal(m)
		return b
	}
	contents := map[string]struct {
		data []byte
		want string
	}{
		"oversized":           {append(with("owner", marker), []byte(strings.Repeat(" ", MaxReceiptSize))...), "bytes"},
		"unknown key":         {with(marker, marker), "keys outside the setup schema"},
		"missing key":         {without("generation"), `missing the key "generation"`},
		"bad container id":    {with("containerId", marker), "containerId"},
		"short container id":  {with("containerId", "abc123"), "containerId"},
		"bad daemon id":       {with("daemonId", marker+" with spaces"), "daemonId"},
		"bad image":           {with("image", "sha256:"+marker), "image"},
		"image by name":       {with("image", "busybox:1"), "image"},
		"bad phase":           {with("phase", marker), "phase"},
		"version 3":           {with("version", 3), "version"},
		"version 1 keys of 2": {with("version", 1), "keys outside the setup schema"},
		"engine":              {with("engine", marker), "engine"},
		"bad storage":         {with("engineStorage", marker), "engineStorage"},
		"relative storage":    {with("engineStorage", "vfs:"+marker), "engineStorage"},
		"docker unbounded":    {with("inodes", InodesUnboundedPodman), "docker receipt"},
		"bad inodes":          {with("inodes", marker), "inodes"},
		"podman forged id":    {podman("daemonId", "podman-"+strings.Repeat("0", 40)), "podman receipt"},
		"podman no storage":   {podman("engineStorage", ""), "podman receipt"},
		"podman bad inodes":   {podman("inodes", marker), "inodes"},
		"id without inodes":   {with("inodes", ""), "inode bound"},
		"wrong type":          {with("version", marker), "schema"},
		"bad generation":      {with("generation", marker), "generation"},
		"socket identity":     {with("socketIdentity", marker), "socketIdentity"},
		"relative socket":     {with("engineSocket", "run/"+marker), "engineSocket"},
		"control in owner":    {with("owner", marker+"\x1b[2J"), "owner"},
		"trailing data":       {append(with("owner", marker), []byte(` {"`+marker+`":1}`)...), "not a single JSON object"},
		"not json":            {[]byte(marker + " is not json"), "not a single JSON object"},
		"array":               {[]byte(`["` + marker + `"]`), "not a single JSON object"},
		"ready without id":    {with("containerId", ""), "phase ready"},
		"duplicate key case":  {[]byte(strings.Replace(string(with("owner", marker)), `"owner"`, `"Owner":"x","owner"`, 1)), "schema"},
	}
	for name, c := range contents {
		t.Run(name, func(t *testing.T) {
			root, path := receiptRoot(t)
			if err := os.WriteFile(path, c.data, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := ReadReceipt(root)
			checkRefused(t, err, c.want)
		})
	}

	t.Run("symlink", func(t *testing.T) {
		root, path := receiptRoot(t)
		other := filepath.Join(root, "state", "setup.json")
		os.MkdirAll(filepath.Dir(other), 0o700)
		if err := os.Rename(path, other); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(other, path); err != nil {
			t.Fatal(err)
		}
		_, err := ReadReceipt(root)
		checkRefused(t, err, "symlink")
	})
	t.Run("hard link", func(t *testing.T) {
		root, path := receiptRoot(t)
		if err := os.Link(path, filepath.Join(root, "setup.copy")); err != nil {
			t.Fatal(err)
		}
		_, err := ReadReceipt(root)
		checkRefused(t, err, "2 hard links")
	})
	for _, m := range []os.FileMode{0o644, 0o640, 0o400, 0o700} {
		t.Run("mode "+m.String(), func(t *testing.T) {
			root, path := receiptRoot(t)
			if err := os.Chmod(path, m); err != nil {
				t.Fatal(err)
			}
			_, err := ReadReceipt(root)
			checkRefused(t, err, "mode")
		})
	}
	t.Run("not a regular file", func(t *testing.T) {
		root, path := receiptRoot(t)
		os.Remove(path)
		if err := os.Mkdir(path, 0o700); err != nil {
			t.Fatal(err)
		}
		_, err := ReadReceipt(root)
		checkRefused(t, err, "not a regular file")
	})
	t.Run("symlinked evidence dir", func(t *testing.T) {
		root, _ := receiptRoot(t)
		ev := filepath.Join(root, EvidenceDir)
		if err := os.Rename(ev, ev+".real"); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(ev+".real", ev); err != nil {
			t.Fatal(err)
		}
		_, err := ReadReceipt(root)
		checkRefused(t, err, "not a real directory")
	})
	t.Run("relative root", func(t *testing.T) {
		if _, err := ReadReceipt("some/root"); err == nil {
			t.Fatal("relative root accepted")
		}
	})
}

func checkRefused(t *testing.T, err error, want string) {
	t.Helper()
	var re *ReceiptError
	if !errors.As(err, &re) {
		t.Fatalf("want *ReceiptError, got %v", err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
	if strings.Contains(err.Error(), marker) {
		t.Errorf("error echoes the receipt's content: %q", err)
	}
}

// The schema step: a version 1 receipt (before Podman) reads as a Docker
// receipt of version 2 with the inode bound Docker always had, and the
// next write stores version 2.
func TestReadReceiptUpgradesVersion1(t *testing.T) {
	root, path := receiptRoot(t)
	v1 := `{"version":1,"owner":"local:test","engineSocket":"/run/docker.sock","socketIdentity":"64768:1234",
"daemonId":"ICFL:TV3P:MQ2O:LHTN:UMKE:6RBL","image":"sha256:` + strings.Repeat("ab", 32) + `",
"containerId":"` + strings.Repeat("0f", 32) + `","generation":"2026-01-02T03:04:05.123456789Z","phase":"ready"}`
	if err := os.WriteFile(path, []byte(v1), 0o600); err != nil {
		t.Fatal(err)
	}
	want := validReceipt()
	want.EngineStorage = "" // version 1 did not record it
	got, err := ReadReceipt(root)
	if err != nil || got != want {
		t.Fatalf("v1 read as %+v, %v; want %+v", got, err, want)
	}
	// Before a container: no inode bound yet.
	v1 = strings.Replace(strings.Replace(strings.Replace(v1, strings.Repeat("0f", 32), "", 1), "2026-01-02T03:04:05.123456789Z", "", 1), `"ready"`, `"failed"`, 1)
	if err := os.WriteFile(path, []byte(v1), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadReceipt(root); err != nil || got.Engine != RuntimeDocker || got.Inodes != "" || got.Version != 2 {
		t.Fatalf("v1 without a container: %+v %v", got, err)
	}
	if err := writeReceipt(root, got); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); !strings.Contains(string(b), `"version": 2`) || !strings.Contains(string(b), `"engine": "docker"`) {
		t.Fatalf("rewritten as:\n%s", b)
	}
}

func TestWriteReceiptRefusesInvalid(t *testing.T) {
	root, path := receiptRoot(t)
	before, _ := os.ReadFile(path)
	r := validReceipt()
	r.ContainerID = "nope"
	if err := writeReceipt(root, r); err == nil {
		t.Fatal("an invalid receipt was written")
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Fatal("the receipt changed")
	}
}

func TestOwnerLabelBindsOwnerAndRoot(t *testing.T) {
	a := OwnerLabel("local:alice", "/h/r")
	for _, other := range []string{OwnerLabel("local:bob", "/h/r"), OwnerLabel("local:alice", "/h/r2"), OwnerLabel("local:alice|/h", "r")} {
		if other == a {
			t.Fatal("owner label collides")
		}
	}
	if len(a) != 64 {
		t.Fatalf("label %q", a)
	}
}

func TestCheckWorkspacePath(t *testing.T) {
	for _, ok := range []string{"/workspace", "/workspace/a", "/workspace/a b/c.txt", "/workspace/..x"} {
		if err := checkWorkspacePath(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "workspace/a", "/workspacex", "/workspace/", "/workspace/./a", "/workspace/../etc", "/workspace/a\x00", "/etc/passwd", "/"} {
		if err := checkWorkspacePath(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
