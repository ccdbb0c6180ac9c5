package main

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestHelperLinksNoHeavyPackages: every `warden hook ...` call of a jailed
// shell hook starts this binary, so it must not pay for the console, SSH,
// MCP, NATS, Docker, cgroups, YAML or the store: their package inits are
// what would make each call cost a whole warden start. What it does
// link beyond the protocol client: engine/hookcli's own small argv parser
// (cobra's and pflag's words, help and usage errors, held to them by
// FuzzHelperArgvAsWarden in cmd/warden; cobra itself and text/template
// cost about 0.4 ms a start) and displaywidth (termsafe, which escapes
// error text for the terminal). Not go-runewidth, which termsafe used
// before: its init compiles a regexp, and with regexp it was 54 more page
// faults a start, the jail's dearest cost. Not net (and so not net/http).
func TestHelperLinksNoHeavyPackages(t *testing.T) {
	goCmd := "go"
	if _, err := exec.LookPath(goCmd); err != nil {
		goCmd = "/usr/local/go/bin/go"
	}
	out, err := exec.Command(goCmd, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	banned := []string{
		"github.com/charmbracelet/", // bubbletea, lipgloss, huh, bubbles, wish
		"github.com/muesli/termenv",
		"golang.org/x/crypto/ssh",
		"github.com/modelcontextprotocol/",
		"github.com/nats-io/",
		"github.com/moby/",
		"github.com/docker/",
		"github.com/containerd/",
		"github.com/godbus/",
		"github.com/coreos/",
		"github.com/goccy/go-yaml",
		"go.etcd.io/bbolt",
		// Not net itself: hookkit and the egress bridge talk through
		// plain sockets, and net's inits were a share of each start.
		"net",
		"github.com/spf13/cobra",
		"github.com/spf13/pflag",
		"text/template", // cobra's help templates
		"github.com/mattn/go-runewidth",
		"regexp",
		"github.com/wardenhq/warden/storage",
		"github.com/wardenhq/warden/tui",
		"github.com/wardenhq/warden/themes",
		"github.com/wardenhq/warden/engine/broker",
		"github.com/wardenhq/warden/engine/hooks",
		"github.com/wardenhq/warden/engine/caps",
	}
	for _, d := range deps {
		for _, b := range banned {
			if d == strings.TrimSuffix(b, "/") || strings.HasPrefix(d, b) && (strings.HasSuffix(b, "/") || len(d) == len(b) || d[len(b)] == '/') {
				t.Errorf("warden-hook links %s", d)
			}
		}
	}
	if len(deps) > 95 {
		t.Errorf("warden-hook links %d packages; it was 80 when it left net", len(deps))
	}
	for _, want := range []string{"github.com/wardenhq/warden/engine/sdk/hookkit", "github.com/wardenhq/warden/engine/hookcli"} {
		found := false
		for _, d := range deps {
			found = found || d == want
		}
		if !found {
			t.Errorf("warden-hook does not link %s", want)
		}
	}
}

// TestHelperBuildsStatic: built as the README says (CGO_ENABLED=0), the
// helper is a static binary: no program interpreter, no shared library.
// A dynamically linked one (cgo's resolver, pulled in by net) paid for
// loading libc at each call of a hook.
func TestHelperBuildsStatic(t *testing.T) {
	goCmd := "go"
	if _, err := exec.LookPath(goCmd); err != nil {
		goCmd = "/usr/local/go/bin/go"
	}
	bin := filepath.Join(t.TempDir(), "warden-hook")
	cmd := exec.Command(goCmd, "build", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("warden-hook has a %s program header: it is dynamically linked", p.Type)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("warden-hook needs shared libraries: %v", libs)
	}
}
