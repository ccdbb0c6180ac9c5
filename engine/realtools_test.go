package engine

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// toolsScript drives the tools real hooks use, each as a hook would:
// an interpreter writing and reading files in its tmp, git making a
// commit, tar packing and unpacking a tree, curl fetching a file, and a
// Go binary (the toolchain's go) starting. Each prints one CHECK line.
const toolsScript = `#!/bin/sh
cd "$(mktemp -d)" || exit 1
t() { name=$1; shift
  if out=$("$@" 2>&1); then echo "CHECK tool-$name ok"
  else echo "CHECK tool-$name failed: $(printf '%s' "$out" | tail -n 3 | tr '\n' ' ')"; fi; }
t python /usr/bin/python3 -c 'import json, os, tempfile, subprocess
d = tempfile.mkdtemp()
p = os.path.join(d, "x.json")
json.dump({"a": 1}, open(p, "w"))
assert json.load(open(p)) == {"a": 1}
subprocess.run(["true"], check=True)'
t node /usr/bin/node -e 'const fs = require("fs"), os = require("os"), path = require("path");
const d = fs.mkdtempSync(path.join(os.tmpdir(), "n-"));
fs.writeFileSync(path.join(d, "x"), "hi");
if (fs.readFileSync(path.join(d, "x"), "utf8") !== "hi") process.exit(1);
require("child_process").execFileSync("true");'
t git sh -c 'mkdir repo && cd repo && git init -q && echo hi > f && chmod +x f 2>/dev/null; git add f && git -c user.name=w -c user.email=w@example.invalid commit -qm one && git log --oneline | grep -q one'
t tar sh -c 'mkdir -p src/a/b && echo x > src/a/b/f && tar cf t.tar src && mkdir out && tar xf t.tar -C out && cmp src/a/b/f out/src/a/b/f'
t curl sh -c 'echo fetched > page && curl -fsS "file://$PWD/page" | grep -q fetched'
t go /usr/local/go/bin/go version
`

// TestRealToolsRunInTheJail: the allow-list keeps what real hooks need.
// Python, Node, git, tar, curl and a Go binary do their everyday work
// under both backends (and with the jail off, the contrast that shows a
// failure would be the jail's).
func TestRealToolsRunInTheJail(t *testing.T) {
	needJail(t)
	tools := []string{"/usr/bin/python3", "/usr/bin/node", "/usr/bin/git", "/usr/bin/tar", "/usr/bin/curl", "/usr/local/go/bin/go"}
	for _, p := range tools {
		if _, err := exec.LookPath(p); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("CI=true and %s is missing: %v", p, err)
			}
			t.Skipf("%s is missing here: %v", p, err)
		}
	}
	dir := testModule(t, map[string]string{"tools": "    run: [\"./tools.sh\"]\n"})
	if err := os.WriteFile(filepath.Join(dir, "tools.sh"), []byte(toolsScript), 0o755); err != nil {
		t.Fatal(err)
	}
	e := openTestEngine(t)
	if _, err := e.AddModule(testActor, dir); err != nil {
		t.Fatal(err)
	}
	modes := []string{JailOff, JailBwrap}
	if landlockWhyNot() == "" {
		modes = append(modes, JailLandlock)
	}
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			_, cs := escapeRun(t, e, "tools", mode)
			for _, tool := range []string{"python", "node", "git", "tar", "curl", "go"} {
				got := hasCheck(cs, "tool-"+tool+" ")
				if !strings.HasSuffix(got, " ok") {
					t.Errorf("jail %s: %s: %q", mode, tool, got)
				}
			}
		})
	}
}

// TestLandlockMetadataWhereWritesAre: under landlock the metadata calls
// the filter hands to the stage's supervisor are made beneath a writable
// rule (here the hook's tmp), and refused there too where they would
// make a setuid file, set a security xattr or reach a file through a
// second hard link. Under bwrap they are the kernel's to decide, in the
// jail's own mounts.
func TestLandlockMetadataWhereWritesAre(t *testing.T) {
	needJail(t)
	e := setupRun(t, map[string]string{"meta": escapeYAML("metadata-in-grant")})
	want := map[string][2]string{ // bwrap, landlock
		"meta-chmod":            {"ok", "ok"},
		"meta-chown":            {"ok", "ok"},
		"meta-utime":            {"ok", "ok"},
		"meta-chmod-dir-setgid": {"ok", "ok"},
		"meta-chmod-setuid":     {"blocked: EPERM", "blocked: EPERM"},
		"meta-xattr-security":   {"blocked: E", "blocked: EPERM"},
		"meta-chmod-hardlinked": {"ok", "blocked: EPERM"},
	}
	modes := []string{JailBwrap}
	if landlockWhyNot() == "" {
		modes = append(modes, JailLandlock)
	}
	for i, mode := range modes {
		_, cs := escapeRun(t, e, "meta", mode)
		for check, w := range want {
			got := hasCheck(cs, check+" ")
			if !strings.HasPrefix(got, check+" "+w[i]) {
				t.Errorf("jail %s: %q, want %q", mode, got, check+" "+w[i])
			}
		}
	}
}
