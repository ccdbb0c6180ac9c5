package engine

// The test binary doubles as the hook: a module's hook.sh execs it with
// "hook-scenario NAME", and TestMain runs that scenario against the real
// broker instead of the tests. So every protocol test below is a real
// child process talking over the real socket.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wardenhq/warden/engine/egress"
	"github.com/wardenhq/warden/engine/sdk/hookkit"
	"github.com/wardenhq/warden/engine/sdk/protocol"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "hook-scenario" {
		os.Exit(hookScenario(os.Args[2]))
	}
	if dir := os.Getenv(kill9EngineEnv); dir != "" {
		os.Exit(kill9Engine(dir, os.Getenv(kill9ModuleEnv)))
	}
	// Inside the jail this test binary is "warden": the jail starts the
	// egress bridge as `warden hook egress-bridge ...`.
	if len(os.Args) > 2 && os.Args[1] == "hook" && os.Args[2] == "egress-bridge" {
		os.Exit(egress.BridgeMain(os.Args[3:]))
	}
	code := m.Run()
	if helperBinsDir != "" {
		os.RemoveAll(helperBinsDir) // the binaries helperBins built
	}
	os.Exit(code)
}

// rawConn is a hand-rolled protocol client for the edge cases the SDK
// will not produce.
type rawConn struct {
	c net.Conn
	r *bufio.Reader
}

func dialRaw() *rawConn {
	c, err := net.Dial("unix", os.Getenv("WARDEN_SOCKET"))
	if err != nil {
		fmt.Println("dial failed:", err)
		os.Exit(3)
	}
	return &rawConn{c: c, r: bufio.NewReaderSize(c, 2<<20)}
}

func (rc *rawConn) send(s string) { rc.c.Write([]byte(s)) }

// answer reads one frame line (or reports EOF).
func (rc *rawConn) answer() string {
	rc.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := rc.r.ReadString('\n')
	if err != nil {
		return "EOF"
	}
	return strings.TrimSpace(line)
}

func (rc *rawConn) hello() string {
	rc.send(fmt.Sprintf(`{"type":"hello","protocol":1,"token":%q}`+"\n", os.Getenv("WARDEN_TOKEN")))
	return rc.answer()
}

// say prints a line the parent test asserts on (stdout is the stream).
func say(format string, args ...any) { fmt.Printf("CHECK "+format+"\n", args...) }

func hookScenario(name string) int {
	switch name {
	case "flood-frames":
		return floodFrames()
	case "log-calls":
		return logCalls(os.Args[3:])
	case "disk-full":
		return diskFullScenario()
	case "frames":
		c, err := hookkit.Connect()
		if err != nil {
			say("connect failed: %v", err)
			return 1
		}
		ctx := c.Context()
		say("context run=%s module=%s hook=%s target=%v", ctx.Run, ctx.Module, ctx.Hook, ctx.Inputs["target"])
		for _, lvl := range []string{"debug", "info", "warn", "error", "success"} {
			c.Log(lvl, "level "+lvl)
		}
		if err := c.Secrets().Set("api_key", "s3cr3t-VALUE-42"); err != nil {
			say("secret set: %v", err)
		}
		v, ok, err := c.Secrets().Get("api_key")
		say("secret get ok=%v match=%v err=%v", ok, v == "s3cr3t-VALUE-42", err)
		_, _, err = c.Secrets().Get("nope")
		say("undeclared secret code=%s msg=%v", hookkit.Code(err), err)
		err = c.Config().Set("region", "eu")
		say("config set err=%v", err)
		// A later connection's context has it (the engine keeps the
		// context encoded; a config write must renew it).
		if c2, err := hookkit.Connect(); err == nil {
			say("next context region=%s", c2.Context().Config["region"])
			c2.Close()
		}
		err = c.Config().Set("other", "x")
		say("undeclared config code=%s", hookkit.Code(err))
		v, ok, _ = c.Config().Get("region")
		say("config get %s %v", v, ok)
		err = c.Secrets().Tx().Set("api_key", "tx-value").Delete("spare").Commit()
		say("tx err=%v", err)
		_, err = c.Call("nosuch", "thing")
		say("unknown capability code=%s", hookkit.Code(err))
		_, err = c.Call("operator", "nosuch")
		say("unknown method code=%s", hookkit.Code(err))
		yes, err := c.Confirm("Proceed with the test?")
		say("confirm %v err=%v", yes, err)
		if err := c.Result(map[string]any{"greeting": "hi"}); err != nil {
			say("result: %v", err)
			return 1
		}
		return 0

	case "edges":
		// Missing hello.
		rc := dialRaw()
		rc.send(`{"type":"log","level":"info","message":"no hello"}` + "\n")
		say("missing hello: %s", rc.answer())
		// Wrong token (well-formed).
		rc = dialRaw()
		rc.send(`{"type":"hello","protocol":1,"token":"cap_` + strings.Repeat("ab", 32) + `"}` + "\n")
		say("wrong token: %s", rc.answer())
		// Protocol 2.
		rc = dialRaw()
		rc.send(fmt.Sprintf(`{"type":"hello","protocol":2,"token":%q}`+"\n", os.Getenv("WARDEN_TOKEN")))
		say("protocol 2: %s", rc.answer())
		// Garbage after a good hello, then the connection still works.
		rc = dialRaw()
		say("hello: %.20s", rc.hello())
		rc.send("this is not json\n")
		say("garbage: %s", rc.answer())
		rc.send(`{"type":"store","id":5,"store":"config","method":"get","args":["region"]}` + "\n")
		say("after garbage: %s", rc.answer())
		// A bad store op.
		rc.send(`{"type":"store","id":6,"store":"secrets","method":"get","args":["undeclared_one"]}` + "\n")
		say("undeclared: %s", rc.answer())
		// Oversized frame: answered and closed; another connection lives.
		big := dialRaw()
		big.hello()
		big.send(`{"type":"log","level":"info","message":"` + strings.Repeat("x", protocol.MaxFrame) + "\"}\n")
		say("oversized: %s", big.answer())
		say("oversized then: %s", big.answer())
		rc.send(`{"type":"store","id":7,"store":"config","method":"get","args":["region"]}` + "\n")
		say("other conn after oversized: %s", rc.answer())
		// Result, then frames after the result.
		rc.send(`{"type":"result","outputs":{"greeting":"x"}}` + "\n")
		rc.send(`{"type":"result","outputs":{"greeting":"y"}}` + "\n")
		say("second result: %s", rc.answer())
		rc.send(`{"type":"log","level":"info","message":"after result"}` + "\n")
		rc.send(`{"type":"store","id":8,"store":"config","method":"get","args":["region"]}` + "\n")
		say("store after result: %s", rc.answer())
		// Hook error frame.
		rc.send(`{"type":"context","protocol":1}` + "\n")
		say("engine frame from hook: %s", rc.answer())
		return 0

	case "bad-result":
		c, _ := hookkit.Connect()
		err := c.Result(map[string]any{"greeting": 42})
		say("bad result code=%s msg=%v", hookkit.Code(err), err)
		return 0

	case "hook-error":
		c, _ := hookkit.Connect()
		c.Fail("Boom", "the widget exploded")
		c.Close()
		return 0

	case "idle":
		fmt.Println("going quiet")
		time.Sleep(time.Minute)
		return 0

	case "ticking":
		for i := 0; i < 12; i++ {
			fmt.Println("tick", i)
			time.Sleep(400 * time.Millisecond)
		}
		c, _ := hookkit.Connect()
		c.Result(map[string]any{"greeting": "done"})
		return 0

	case "confirm-wait":
		c, _ := hookkit.Connect()
		yes, err := c.Confirm("Wait for me?")
		say("confirm-wait %v %v", yes, err)
		c.Result(map[string]any{"greeting": "waited"})
		return 0

	case "grandchild":
		// A grandchild in the hook's process group, then wait forever.
		attr := &syscall.ProcAttr{Files: []uintptr{0, 1, 2}}
		pid, err := syscall.ForkExec("/bin/sleep", []string{"sleep", "300"}, attr)
		if err != nil {
			say("fork failed %v", err)
			return 1
		}
		say("grandchild %d", pid)
		time.Sleep(5 * time.Minute)
		return 0

	case "torn-tx":
		// Write half a transaction frame and die mid-frame.
		rc := dialRaw()
		rc.hello()
		rc.send(`{"type":"store","id":1,"store":"secrets","method":"transaction","args":[[{"op":"set","name":"api_key","value":"torn"},{"op":"set","name":"spa`)
		time.Sleep(100 * time.Millisecond)
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		return 0

	case "bad-tx":
		c, _ := hookkit.Connect()
		err := c.Secrets().Tx().Set("api_key", "partial").Set("not_declared", "x").Commit()
		say("bad tx code=%s", hookkit.Code(err))
		raw := dialRaw()
		raw.hello()
		raw.send(`{"type":"store","id":3,"store":"secrets","method":"transaction","args":[[{"op":"set","name":"api_key","value":"p2"},{"op":"explode","name":"spare"}]]}` + "\n")
		say("bad op: %s", raw.answer())
		return 0

	case "handscap":
		return handsCapScenario(os.Args[3], os.Args[4:])

	case "noop":
		return 0

	// Jail escape attempts (jail_test.go): each prints one
	// "CHECK escape-X ok" or "CHECK escape-X blocked: ERRNO" line.
	case "escape-read", "escape-write", "escape-write-module", "escape-proc",
		"escape-tcp", "escape-tiocsti", "escape-ptrace", "escape-mount",
		"escape-unshare", "escape-keyctl", "escape-env", "escape-linger", "escape-fd",
		"escape-signal", "escape-abstract", "escape-chmod", "escape-chown",
		"escape-utime", "escape-setxattr", "escape-setuid", "escape-renice",
		"escape-ioprio", "escape-affinity", "escape-bind", "escape-inotify", "metadata-in-grant",
		"escape-read-input":
		return escapeScenario(name, os.Args[3:])

	// Egress through the run's proxy (egress_test.go).
	case "egress":
		return egressScenario(os.Args[3:])

	// Permission requests (perms_test.go).
	case "perms-call", "perms-flood":
		return permsScenario(name, os.Args[3:])

	// A token kept after its run (token_flood_test.go).
	case "save-token":
		if err := os.WriteFile(os.Args[3], []byte(os.Getenv("WARDEN_TOKEN")), 0o600); err != nil {
			fmt.Println("save-token:", err)
			return 1
		}
		return 0
	case "revoked-flood":
		tok, err := os.ReadFile(os.Args[3])
		if err != nil {
			fmt.Println("revoked-flood:", err)
			return 1
		}
		refused := 0
		for range 2000 {
			rc := dialRaw()
			rc.send(fmt.Sprintf(`{"type":"hello","protocol":1,"token":%q}`+"\n", tok))
			if strings.Contains(rc.answer(), `"unauthorized"`) {
				refused++
			}
			rc.c.Close()
		}
		say("refused %d of 2000", refused)
		return 0
	}
	fmt.Println("unknown scenario", name)
	return 2
}

// testModule writes a module whose hooks run scenarios of this binary.
// It lives under the user's cache dir: module admission refuses the
// world-writable /tmp, rightly.
func testModule(t testing.TB, hooks map[string]string) string {
	t.Helper()
	base, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(base, 0o700)
	dir, err := os.MkdirTemp(base, "warden-test-module-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	// "warden" first on the hook's PATH is this test binary: the run dir's
	// link with the jail off, the read-only bind at /opt/warden/bin inside.
	script := "#!/bin/sh\nexec warden hook-scenario \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "hook.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("id: testmod\nversion: 1.0.0\ndescription: scenarios\nsecrets: [api_key, spare]\nconfig: [region]\nhooks:\n")
	for name, body := range hooks {
		fmt.Fprintf(&b, "  %s:\n%s", name, body)
	}
	if err := os.WriteFile(filepath.Join(dir, "module.yaml"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func hookYAML(scenario, extra string) string {
	return fmt.Sprintf("    run: [./hook.sh, %s]\n%s", scenario, extra)
}

const greetingOutput = "    outputs: {greeting: string}\n"

func openTestEngine(t testing.TB) *Engine {
	t.Helper()
	e, err := Open(Options{DataDir: filepath.Join(t.TempDir(), "data")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// checks returns the "CHECK ..." lines of a run's stream.
func checks(t testing.TB, e *Engine, run string) []string {
	t.Helper()
	lines, err := e.StreamLines(run, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range lines {
		if s, ok := strings.CutPrefix(l.Text, "CHECK "); ok {
			out = append(out, s)
		}
	}
	return out
}

func hasCheck(lines []string, prefix string) string {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
