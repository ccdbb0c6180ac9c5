package tui

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/engine/egress"
	"github.com/wardenhq/warden/engine/sdk/hookkit"
	"github.com/wardenhq/warden/themes"
)

func TestMain(m *testing.M) {
	// A hook of the test modules runs this binary as `warden` (the run
	// dir's link, first on PATH): it speaks the protocol with hookkit.
	if filepath.Base(os.Args[0]) == "warden" && len(os.Args) > 2 && os.Args[1] == "hook" && os.Args[2] == "egress-bridge" {
		os.Exit(egress.BridgeMain(os.Args[3:])) // the jail's first program in egress mode
	}
	if filepath.Base(os.Args[0]) == "warden" && len(os.Args) > 1 {
		os.Exit(hookMain(os.Args[1:]))
	}
	lipgloss.SetColorProfile(termenv.Ascii)
	lipgloss.SetHasDarkBackground(true)
	os.Setenv("TZ", "UTC")
	time.Local = time.UTC
	os.Exit(m.Run())
}

// hookMain: `warden confirm MESSAGE` asks operator.confirm and prints the
// answer; `warden log LEVEL MESSAGE` logs a line.
func hookMain(args []string) int {
	c, err := hookkit.Connect()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer c.Close()
	switch args[0] {
	case "confirm":
		ok, err := c.Confirm(args[1])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println("answer:", ok)
	case "stream":
		// A deterministic stream of N lines on one connection: levels
		// vary, line 120 is 3000 characters long.
		n, _ := strconv.Atoi(args[1])
		var delay time.Duration
		if len(args) > 2 {
			delay, _ = time.ParseDuration(args[2])
		}
		for i := 1; i <= n; i++ {
			level, text := "info", fmt.Sprintf("line %d: all good", i)
			switch {
			case i%100 == 0:
				level, text = "error", fmt.Sprintf("line %d: disk full", i)
			case i%50 == 0:
				level, text = "warn", fmt.Sprintf("line %d: disk getting full", i)
			case i == 7:
				level = "debug"
			case i == 150:
				level, text = "success", "line 150: halfway there"
			case i == 120:
				text = "line 120: long:" + strings.Repeat("x", 2985)
			}
			if err := c.Log(level, text); err != nil {
				return 1
			}
			if delay > 0 && i%25 == 0 {
				time.Sleep(delay)
			}
		}
	case "result": // result NAME VALUE: one string output
		if err := c.Result(map[string]any{args[1]: args[2]}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	case "greet":
		in := c.Context().Inputs
		c.Log("success", fmt.Sprintf("hello, %v x%v (loud: %v)", in["target"], in["times"], in["loud"]))
	case "log":
		if err := c.Log(args[1], args[2]); err != nil {
			return 1
		}
	case "hostile":
		// hostileText everywhere a hook can put text the console shows.
		fmt.Println(hostileText)
		c.Log("info", hostileText)
		if _, err := c.Confirm("line one\n" + hostileText); err != nil {
			return 1
		}
		c.Fail("hostile", hostileText)
	}
	return 0
}

// newEngine opens an engine on a fresh data dir with a short path (the
// header shows it; tests replace it with DATA).
func newEngine(t testing.TB) engine.Facade {
	t.Helper()
	dir, err := os.MkdirTemp("", "w")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	e, err := engine.Open(engine.Options{DataDir: filepath.Join(dir, "data")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// addModule writes a module whose hooks are shell scripts and registers
// it. It lives under the user's cache dir: module admission refuses the
// world-writable /tmp.
func addModule(t testing.TB, e engine.Facade, id string, hooks map[string]string, extra map[string]string) {
	t.Helper()
	base, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(base, 0o700)
	// A name of fixed length keeps golden frames stable.
	dir := filepath.Join(base, fmt.Sprintf("warden-tui-module-%08x", rand.Uint32()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	var b strings.Builder
	fmt.Fprintf(&b, "id: %s\nversion: 1.0.0\ndescription: test module %s\nhooks:\n", id, id)
	names := make([]string, 0, len(hooks))
	for n := range hooks {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := os.WriteFile(filepath.Join(dir, name+".sh"), []byte("#!/bin/sh\n"+hooks[name]+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "  %s:\n    run: [./%s.sh]\n    timeout: 2m\n%s", name, name, extra[name])
	}
	if err := os.WriteFile(filepath.Join(dir, "module.yaml"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := e.AddModule("local:test", dir); err != nil {
		t.Fatal(err)
	}
}

// runHook runs a hook unjailed to its end.
func runHook(t testing.TB, e engine.Facade, module, hook string) engine.Outcome {
	t.Helper()
	o, err := runToEnd(e, "local:test", engine.RunRequest{Module: module, Hook: hook, Jail: engine.JailOff})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func testShared(e engine.Facade) *shared {
	return &shared{e: e, th: themes.NoColor(), opts: Options{Actor: "local:test", Now: time.Now, Jail: engine.JailOff, Bell: func() {}}}
}

// normalize makes a frame stable across runs: run ids, clock times,
// durations and the data dir become placeholders of the same width.
var (
	reRunID  = regexp.MustCompile(`\d{8}T\d{6}-[0-9a-f]{6}`)
	reRunCut = regexp.MustCompile(`\b\d{4}[0-9Ta-f-]*…`)
	reTime   = regexp.MustCompile(`\d{2}:\d{2}:\d{2}(\.\d{3})?`)
	reDate   = regexp.MustCompile(`\d{4}-\d{2}-\d{2}`)
	reDur    = regexp.MustCompile(`\b\d+(d\d{2}h|h\d{2}m|m\d{2}s|s)\b`)
	reHash   = regexp.MustCompile(`[0-9a-f]{64}`)
	reData   = regexp.MustCompile(`/tmp/w\d+/data|/tmp/(w\d*)?…\S*`)
	reMod    = regexp.MustCompile(`warden-tui-module-[0-9a-f]{8}`)
)

func normalize(s string) string {
	pad := func(re *regexp.Regexp, with string) {
		s = re.ReplaceAllStringFunc(s, func(m string) string {
			out := with
			for len(out) < len(m) {
				out += with[len(with)-1:]
			}
			return out[:len(m)]
		})
	}
	pad(reRunID, "RUN-ID")
	pad(reRunCut, "RUN-ID")
	pad(reHash, "HASH")
	pad(reDate, "DATE")
	pad(reTime, "hh:mm:ss")
	pad(reDur, "Ns")
	pad(reMod, "warden-tui-module-XXXXXXXX")
	s = reData.ReplaceAllString(s, "/DATA")
	lines := strings.Split(s, "\n")
	for i := range lines {
		lines[i] = strings.TrimRight(lines[i], " ")
	}
	return strings.Join(lines, "\n") + "\n"
}

// runToEnd starts a run and waits for its outcome.
func runToEnd(e interface {
	StartRun(engine.Actor, engine.RunRequest) (*engine.RunHandle, error)
}, actor engine.Actor, req engine.RunRequest) (engine.Outcome, error) {
	h, err := e.StartRun(actor, req)
	if err != nil {
		return engine.Outcome{}, err
	}
	return h.Wait(), nil
}
