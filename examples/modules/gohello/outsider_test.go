package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// sdkPath is the Go SDK's module path: what a hook author puts in go.mod.
const sdkPath = "github.com/wardenhq/warden/engine/sdk"

// A hook author outside this repo requires the SDK by its path and
// builds this example with nothing else: no warden module, no module
// proxy, and no package beyond the standard library and the SDK's own.
// The replace points at the checkout, as it would at a fork; everything
// else is what `go get github.com/wardenhq/warden/engine/sdk` gives.
func TestGohelloBuildsAsAnOutsiderWould(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = "/usr/local/go/bin/go" // where the README installs it
		if _, err := os.Stat(goBin); err != nil {
			t.Fatalf("no go command on PATH or at %s to build the example with", goBin)
		}
	}
	sdk, err := filepath.Abs("../../../engine/sdk")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gomod := "module example.com/myhooks\n\ngo 1.24\n\nrequire " + sdkPath + " v0.1.0\n\nreplace " + sdkPath + " => " + sdk + "\n"
	for name, body := range map[string][]byte{"go.mod": []byte(gomod), "main.go": src} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	goCmd := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(goBin, args...)
		cmd.Dir = dir
		// Outside any workspace, offline: whatever the SDK needed from
		// elsewhere would fail here.
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOPROXY=off", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("go %s in an outside module: %v\n%s", strings.Join(args, " "), err, out.String())
		}
		return out.String()
	}
	goCmd("build", "-o", "gohello", ".")
	for _, dep := range strings.Fields(goCmd("list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".")) {
		if dep != "example.com/myhooks" && !strings.HasPrefix(dep, sdkPath+"/") {
			t.Errorf("building against the SDK brought %s: the SDK must need only the standard library", dep)
		}
	}
	if mods := strings.Fields(goCmd("list", "-m", "-f", "{{.Path}}", "all")); len(mods) != 2 || mods[1] != sdkPath {
		t.Errorf("modules in the outside build: %q, want only the hook's own and the SDK (replaced)", mods)
	}

	// The binary is a hook: outside a run it says there is no engine.
	out, err := exec.Command(filepath.Join(dir, "gohello")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "gohello:") {
		t.Errorf("gohello outside a run: %v\n%s", err, out)
	}
}
