package main

// `warden run` over real agent CLIs nobody here wrote (Claude Code,
// Codex), as an ordinary user, each driven by the scripted model server
// (agentmodel_test.go) through --allow-host localhost:PORT.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/wardenhq/warden/cmd/serve/control"
	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/engine/jail"
)

// agentBinDir is where the test command installs the agent CLIs
// (scripts/agents-install); WARDEN_TEST_AGENTS overrides it.
const agentBinDir = "/opt/warden-agents/node_modules/.bin"

// needAgent finds an agent CLI, or fails in CI (the test command installs
// them), or skips saying why.
func needAgent(t *testing.T, name string) string {
	t.Helper()
	dir := agentBinDir
	if d := os.Getenv("WARDEN_TEST_AGENTS"); d != "" {
		dir = d
	}
	p := filepath.Join(dir, name)
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is missing in CI: the test command installs it (bash scripts/agents-install)", p)
		}
		t.Skipf("%s is not installed: bash scripts/agents-install", p)
	}
	return dir
}

// agentHost is an ordinary user's machine: a data dir, a home with a key
// planted in it, a workspace, and the agents on PATH.
type agentHost struct {
	t                    *testing.T
	bin, data, home, ws  string
	agents, plantedValue string
}

func newAgentHost(t *testing.T, agents string) *agentHost {
	needBwrap(t)
	needRootFor(t, "setpriv to the ordinary user")
	base := sharedDir(t, "warden-agent-")
	h := &agentHost{t: t, bin: filepath.Join(base, "warden"), data: filepath.Join(base, "data"), home: filepath.Join(base, "home"),
		ws: filepath.Join(base, "ws"), agents: agents, plantedValue: "PLANTED-" + strconv.Itoa(os.Getpid()) + "-k3y"}
	buildWarden(t, h.bin)
	for _, d := range []string{h.data, h.home, h.ws, filepath.Join(h.home, ".ssh")} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(h.home, ".ssh", "id_test"), []byte(h.plantedValue+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{h.data, h.home, h.ws} {
		chownTree(t, d, ordinaryUID, ordinaryUID)
	}
	return h
}

// warden runs the binary as the ordinary user, with env added.
func (h *agentHost) warden(stdin string, env []string, args ...string) (stdout, stderr string, code int) {
	argv := append([]string{"--reuid", strconv.Itoa(ordinaryUID), "--regid", strconv.Itoa(ordinaryUID), "--clear-groups", "--",
		h.bin, "--data-dir", h.data}, args...)
	cmd := exec.Command("setpriv", argv...)
	cmd.Env = append(append(hostEnv(h.home), "PATH="+h.agents+":/usr/bin:/bin"), env...)
	cmd.Dir = h.ws
	cmd.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code = 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		h.t.Fatalf("warden %v: %v", args, err)
	}
	return o.String(), e.String(), code
}

// countingListener counts the connections made to it: a host nobody
// allowed must see none.
func countingListener(t *testing.T) (port int, hits *atomic.Int64) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hits = new(atomic.Int64)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) })}
	go srv.Serve(countConns{ln, hits})
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().(*net.TCPAddr).Port, hits
}

type countConns struct {
	net.Listener
	hits *atomic.Int64
}

func (c countConns) Accept() (net.Conn, error) {
	conn, err := c.Listener.Accept()
	if err == nil {
		c.hits.Add(1)
	}
	return conn, err
}

// agentCase is one real agent CLI under `warden run`, driven by the
// scripted model server.
type agentCase struct {
	name    string // its profile and its program
	keyEnv  string // the env var it reads its API key from
	setup   func(h *agentHost, ms *modelServer)
	argv    []string
	baseEnv func(ms *modelServer) []string
}

// TestClaudeCodeUnderWardenRun: the real Claude Code, `claude -p ...
// --dangerously-skip-permissions`, under `warden run --profile claude`.
func TestClaudeCodeUnderWardenRun(t *testing.T) {
	testAgentUnderWardenRun(t, agentCase{name: "claude", keyEnv: "ANTHROPIC_API_KEY",
		argv:    []string{"claude", "-p", "follow the script", "--dangerously-skip-permissions"},
		baseEnv: func(ms *modelServer) []string { return []string{"ANTHROPIC_BASE_URL=" + ms.URL} }})
}

// TestCodexUnderWardenRun: the real Codex, `codex exec`, under `warden
// run --profile codex`: its provider (config.toml in the profile's kept
// home) points at the scripted server, and the profile runs it with
// sandbox_mode danger-full-access, warden being its sandbox. Its commands
// are still confined by warden's jail: the same refusals hold.
func TestCodexUnderWardenRun(t *testing.T) {
	testAgentUnderWardenRun(t, agentCase{name: "codex", keyEnv: "SCRIPTED_API_KEY",
		setup: func(h *agentHost, ms *modelServer) {
			home := filepath.Join(h.data, "homes", "codex")
			if err := os.MkdirAll(filepath.Join(home, ".codex"), 0o700); err != nil {
				h.t.Fatal(err)
			}
			cfg := fmt.Sprintf("model = \"test-model\"\nmodel_provider = \"scripted\"\napproval_policy = \"never\"\n[model_providers.scripted]\nname = \"scripted\"\nbase_url = \"%s/v1\"\nwire_api = \"responses\"\nenv_key = \"SCRIPTED_API_KEY\"\n", ms.URL)
			if err := os.WriteFile(filepath.Join(home, ".codex", "config.toml"), []byte(cfg), 0o600); err != nil {
				h.t.Fatal(err)
			}
			chownTree(h.t, filepath.Join(h.data, "homes"), ordinaryUID, ordinaryUID)
		},
		argv: []string{"codex", "exec", "--skip-git-repo-check", "follow the script"}})
}

// testAgentUnderWardenRun runs c as an ordinary user, against the
// scripted model server on the host's loopback (the one port
// --allow-host names). The scripted agent writes a file in the workspace
// (it lands), reads a key planted in the operator's home (refused: the
// value is nowhere, not even in what the agent sent the model), curls a
// host nobody allowed (a request, denied with no operator attached; its
// listener counts no connection, by the proxy or around it), and
// answers. The agent exits 0 and so does warden run. Its API key comes
// from warden's secrets (--secret-env): the model server got it, and no
// receipt, stream line or --json output has it.
func testAgentUnderWardenRun(t *testing.T, c agentCase) {
	h := newAgentHost(t, needAgent(t, c.name))
	denyPort, hits := countingListener(t)
	planted := filepath.Join(h.home, ".ssh", "id_test")
	ms := newModelServer(t, []agentStep{
		{Command: "echo landed > out.txt && echo wrote"},
		{Command: "cat " + planted + "; echo cat=$?"},
		{Command: fmt.Sprintf("curl -sS -m 5 http://127.0.0.1:%d/ 2>&1; echo curl=$?; curl -sS -m 3 --noproxy '*' http://127.0.0.1:%d/ 2>&1; echo direct=$?", denyPort, denyPort)},
	})
	if c.setup != nil {
		c.setup(h, ms)
	}
	apiKey := "sk-test-" + strconv.Itoa(os.Getppid()) + "-secret"
	if _, stderr, code := h.warden(apiKey, nil, "secrets", "set", "run", "api_key"); code != 0 {
		t.Fatalf("secrets set run api_key: exit %d\n%s", code, stderr)
	}
	var env []string
	if c.baseEnv != nil {
		env = c.baseEnv(ms)
	}
	args := append([]string{"run", "--profile", c.name, "--allow-host", fmt.Sprintf("localhost:%d", ms.Port), "--secret-env", c.keyEnv + "=api_key", "--"}, c.argv...)
	stdout, stderr, code := h.warden("", env, args...)
	all := stdout + stderr
	if code != 0 {
		t.Fatalf("warden run %s: exit %d\n%s\nmodel calls %v", c.name, code, all, ms.Calls())
	}
	if !strings.Contains(all, "LOOPBACK: localhost:"+strconv.Itoa(ms.Port)) || !strings.Contains(all, "done") {
		t.Errorf("the run's first line does not name the loopback port, or the agent's answer is missing:\n%s", all)
	}
	results := ms.ToolResults()
	if len(results) != 3 {
		t.Fatalf("the agent sent back %d tool results, want 3: %q\n%s", len(results), results, all)
	}
	if got, err := os.ReadFile(filepath.Join(h.ws, "out.txt")); err != nil || string(got) != "landed\n" {
		t.Errorf("the file the agent wrote in the workspace: %q, %v", got, err)
	}
	if !strings.Contains(results[1], "cat=1") {
		t.Errorf("reading the operator's home was not refused: %q", results[1])
	}
	if !strings.Contains(results[2], "curl=") || !strings.Contains(results[2], "direct=") || hits.Load() != 0 {
		t.Errorf("the unnamed host: %d connections reached it (want 0); the agent saw %q", hits.Load(), results[2])
	}
	if !strings.Contains(all, "network.connect ip:127.0.0.1:"+strconv.Itoa(denyPort)) || !strings.Contains(all, "denied") {
		t.Errorf("the unnamed host did not become a request, denied:\n%s", all)
	}
	if !ms.SawKey(apiKey) {
		t.Errorf("the model server never got the --secret-env key: the agent did not have it")
	}

	// Where the key and the planted value must not be.
	receipts, _, _ := h.warden("", nil, "receipts", "list", "--json", "--limit", "0")
	runs, _, _ := h.warden("", nil, "hook", "runs", "--json")
	var listed []struct {
		ID, Module, Hook, Status string
	}
	if err := json.Unmarshal([]byte(runs), &listed); err != nil || len(listed) == 0 {
		t.Fatalf("hook runs --json: %v\n%s", err, runs)
	}
	if r := listed[0]; r.Module != "run" || r.Hook != c.name || r.Status != "succeeded" {
		t.Errorf("the session as hook runs lists it: %+v", r)
	}
	logs, _, _ := h.warden("", nil, "hook", "logs", listed[0].ID)
	// And --json, of a run that shows the key is set by its length.
	jsonOut, _, code := h.warden("", nil, "--json", "run", "--secret-env", "K=api_key", "--", "sh", "-c", "echo key has ${#K} bytes")
	if code != 0 || !strings.Contains(jsonOut, `"status": "succeeded"`) {
		t.Errorf("warden --json run: exit %d\n%s", code, jsonOut)
	}
	if l, _, _ := h.warden("", nil, "hook", "logs", jsonRunID(t, jsonOut)); !strings.Contains(l, fmt.Sprintf("key has %d bytes", len(apiKey))) {
		t.Errorf("--secret-env did not set K: %s", l)
	}
	for what, text := range map[string]string{"receipts": receipts, "the stream": logs, "warden run's output": all, "--json": jsonOut, "what the agent sent the model": strings.Join(results, "\n")} {
		if strings.Contains(text, h.plantedValue) {
			t.Errorf("the key planted in the operator's home shows in %s", what)
		}
		if what != "what the agent sent the model" && strings.Contains(text, apiKey) {
			t.Errorf("the --secret-env value shows in %s", what)
		}
	}
	if !strings.Contains(receipts, "network.connect") || !strings.Contains(receipts, `"secretEnv"`) {
		t.Errorf("the receipts lack the session's connections or its env names:\n%.2000s", receipts)
	}
}

// jsonRunID is the run id in `warden --json run`'s outcome.
func jsonRunID(t *testing.T, out string) string {
	var o struct {
		Run struct{ ID string } `json:"run"`
	}
	if err := json.Unmarshal([]byte(out), &o); err != nil || o.Run.ID == "" {
		t.Fatalf("warden --json run: %v\n%s", err, out)
	}
	return o.Run.ID
}

// TestWardenRunUnderLandlock: the same session shape under the landlock
// backend, as an ordinary user: the command writes in its workspace, is
// refused the operator's home, and its exit status is warden run's. A
// session that names hosts is refused there, with why (Landlock filters
// TCP ports, not addresses, so the proxy could not be the only way out):
// exit 125.
func TestWardenRunUnderLandlock(t *testing.T) {
	h := newAgentHost(t, agentBinDir)
	planted := filepath.Join(h.home, ".ssh", "id_test")
	out, errOut, code := h.warden("", nil, "run", "--jail", "landlock", "--", "sh", "-c", "echo landed > out.txt; cat "+planted+" || echo refused; exit 7")
	if code != 7 || !strings.Contains(out, "refused") || strings.Contains(out+errOut, h.plantedValue) || !strings.Contains(errOut, "jail landlock") {
		t.Errorf("warden run --jail landlock: exit %d (want the command's 7)\n%s%s", code, out, errOut)
	}
	if got, err := os.ReadFile(filepath.Join(h.ws, "out.txt")); err != nil || string(got) != "landed\n" {
		t.Errorf("the file written in the workspace: %q, %v", got, err)
	}
	runsBefore, _, _ := h.warden("", nil, "hook", "runs", "--json")
	out, errOut, code = h.warden("", nil, "run", "--jail", "landlock", "--allow-host", "localhost:11434", "--", "true")
	if code != exitRefused || !strings.Contains(out+errOut, "Landlock filters TCP ports, not addresses") || !strings.Contains(out+errOut, "--jail bwrap") {
		t.Errorf("a session with named hosts under landlock: exit %d, want %d with why\n%s%s", code, exitRefused, out, errOut)
	}
	if runsAfter, _, _ := h.warden("", nil, "hook", "runs", "--json"); runsAfter != runsBefore {
		t.Errorf("the refused session was recorded as a run:\n%s", runsAfter)
	}
	// An --ro path inside the workspace: Landlock cannot hold it
	// read-only beneath the writable workspace, so it is refused.
	os.Mkdir(filepath.Join(h.ws, "sub"), 0o755)
	os.Chown(filepath.Join(h.ws, "sub"), ordinaryUID, ordinaryUID)
	if out, errOut, code = h.warden("", nil, "run", "--jail", "landlock", "--ro", filepath.Join(h.ws, "sub"), "--", "true"); code != exitRefused || !strings.Contains(out+errOut, "cannot hold a path read-only beneath it") {
		t.Errorf("--ro inside the workspace under landlock: exit %d, want %d with why\n%s%s", code, exitRefused, out, errOut)
	}
	// Under bwrap it is mounted read-only over the workspace.
	out, errOut, code = h.warden("", nil, "run", "--jail", "bwrap", "--ro", filepath.Join(h.ws, "sub"), "--", "sh", "-c", "echo x > sub/f && echo wrote || echo read-only")
	if code != 0 || !strings.Contains(out, "read-only") {
		t.Errorf("--ro inside the workspace under bwrap: exit %d, want it read-only\n%s%s", code, out, errOut)
	}

	// An --env value is the operator's, as is: no $ in it is expanded.
	out, errOut, code = h.warden("", []string{"FOO=a${b}c$HOME"}, "run", "--env", "FOO", "--", "sh", "-c", `printf 'foo=%s\n' "$FOO"`)
	if code != 0 || !strings.Contains(out, "foo=a${b}c$HOME") {
		t.Errorf("--env FOO: exit %d, the value was rewritten\n%s%s", code, out, errOut)
	}
	// Without a profile the home is fresh: what one run leaves there is
	// not the next one's.
	for i, want := range []string{"clean", "clean"} {
		out, errOut, code = h.warden("", nil, "run", "--", "sh", "-c", `if [ -e "$HOME/.planted" ]; then echo dirty; else echo clean; fi; touch "$HOME/.planted"`)
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("run %d without a profile: exit %d, want a %s home\n%s%s", i, code, want, out, errOut)
		}
	}
}

// TestWardenRunRefusesBadInput: a bad --allow-host, an unknown profile, a
// missing command, --jail off and a workspace inside the data dir each
// get one clear error and exit 125, and nothing is created: no data dir
// where there was none, no home, no run.
func TestWardenRunRefusesBadInput(t *testing.T) {
	c := newCLI(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--allow-host", "*", "--", "true"}, "a bare * would allow every host"},
		{[]string{"--allow-host", "localhost", "--", "true"}, "name the one port of the host's loopback"},
		{[]string{"--profile", "nope", "--", "true"}, `no profile "nope" (profiles here: claude, codex`},
		{[]string{"--", "no-such-program-here"}, `command "no-such-program-here" not found on your PATH`},
		{[]string{"--env", "WARDEN_TEST_UNSET_VAR", "--", "true"}, "not set in your environment"},
		// Trees where programs keep their sockets: an ssh-agent's, X11's, D-Bus's.
		{[]string{"--workspace", "/tmp", "--", "true"}, "is or holds /tmp, where programs keep their sockets"},
		{[]string{"--ro", "/run", "--", "true"}, "is or holds /run, where programs keep their sockets"},
	} {
		r := c.run(append([]string{"run"}, tc.args...)...)
		if r.code != exitRefused || !strings.Contains(r.stderr, tc.want) || strings.Count(r.stderr, "warden: ") != 1 {
			t.Errorf("warden run %v: want exit %d and one error with %q, got %s", tc.args, exitRefused, tc.want, r)
		}
		if _, err := os.Stat(c.dir); err == nil {
			t.Fatalf("warden run %v made the data dir", tc.args)
		}
	}
	if r := c.run("run"); r.code != 2 || !strings.Contains(r.stderr, "no command: give it after --") {
		t.Errorf("warden run with no command: want a usage error (2), got %s", r)
	}
	c.ok("module", "list")
	inside := filepath.Join(c.dir, "work")
	if err := os.Mkdir(inside, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--workspace", inside, "--", "true"}, {"--jail", "off", "--", "true"}} {
		r := c.run(append([]string{"run"}, args...)...)
		if r.code != exitRefused || !(strings.Contains(r.stderr, "is inside "+c.dir) || strings.Contains(r.stderr, "always jails its command")) {
			t.Errorf("warden run %v: want exit %d with why, got %s", args, exitRefused, r)
		}
	}
	if os.Geteuid() == 0 {
		// As root the command is uid 60999, which cannot write a
		// workspace of root's: refused before anything starts.
		ws := privateDir(t, "warden-root-ws-")
		r := c.run("run", "--jail", "landlock", "--workspace", ws, "--", "true")
		if r.code != exitRefused || !strings.Contains(r.stderr, "is not writable by it: run warden as your own user") {
			t.Errorf("a root warden's run in root's workspace: want exit %d with why, got %s", exitRefused, r)
		}
	}
	// The module id "run" is warden run's: no module may take it.
	mod := bashModule(t, privateDir(t, "warden-run-id-"), "run", "x", "true\n")
	if r := c.run("module", "add", mod); r.code == 0 || !strings.Contains(r.stderr, `"run" is warden run's own module id`) {
		t.Errorf("module add of id run: %s", r)
	}
	var runs []any
	c.json(0, &runs, "hook", "runs")
	if _, err := os.Stat(filepath.Join(c.dir, "homes")); err == nil || len(runs) != 0 {
		t.Errorf("refused runs left a home or a run: %d runs, homes: %v", len(runs), err)
	}
}

// TestWardenRunPrint: --print shows what a session would get and starts
// nothing: for the real Codex (a node script whose native binary is an
// optional dependency beside it), its package, that dependency, and the
// profile's host; --json gives the same.
func TestWardenRunPrint(t *testing.T) {
	agents := needAgent(t, "codex")
	c := newCLI(t)
	t.Setenv("PATH", agents+":/usr/bin:/bin")
	r := c.ok("run", "--profile", "codex", "--print", "--", "codex", "exec", "hi")
	for _, want := range []string{"@openai/codex  (the npm package of the command)", "@openai/codex-linux-x64  (a dependency of @openai/codex (npm))",
		"api.openai.com:443", "sandbox_mode=\"danger-full-access\"", "(HOME)", "homes/codex"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("run --print lacks %q:\n%s", want, r.stdout)
		}
	}
	var p commandPlan
	// --json before the --: after it, it is the command's.
	if r := c.run("--json", "run", "--profile", "codex", "--print", "--", "codex"); r.code != 0 || json.Unmarshal([]byte(r.stdout), &p) != nil {
		t.Fatalf("run --print --json: %s", r)
	}
	if len(p.Binds) < 2 || p.Profile != "codex" || len(p.Hosts) != 1 || p.Jail == "" {
		t.Errorf("run --print --json: %+v", p)
	}
	var runs []any
	c.json(0, &runs, "hook", "runs")
	if len(runs) != 0 {
		t.Errorf("--print started %d runs", len(runs))
	}
}

// TestWardenRunTerminal: from a terminal (tmux), as an ordinary user,
// under each backend, `warden run -- vim` gets a pty of its own: vim
// draws, a resize of the operator's terminal reaches it, and after :q, or
// a SIGTERM to warden run, the operator's terminal is as it was (stty -a
// the same, but for the size the resize changed).
func TestWardenRunTerminal(t *testing.T) {
	needTool(t, "tmux", "apt-get install tmux")
	needTool(t, "vim", "apt-get install vim")
	h := newAgentHost(t, agentBinDir)
	for _, backend := range []string{"bwrap", "landlock"} {
		t.Run(backend, func(t *testing.T) {
			tm := &tmuxConsole{sock: filepath.Join(h.home, "tmux-"+backend+".sock"), session: "run", stderr: filepath.Join(h.home, "none")}
			t.Cleanup(func() { exec.Command("tmux", "-S", tm.sock, "kill-server").Run() })
			shell := "exec setpriv --reuid " + strconv.Itoa(ordinaryUID) + " --regid " + strconv.Itoa(ordinaryUID) + " --clear-groups env -i " +
				shellQuote(append(hostEnv(h.home), "TERM=xterm", "PS1=$ ")...) + " bash --norc -i"
			if out, err := tm.tmux("new-session", "-d", "-s", tm.session, "-x", "100", "-y", "30", "-c", h.ws, shell); err != nil {
				t.Fatalf("tmux new-session: %v: %s", err, out)
			}
			os.Chown(tm.sock, ordinaryUID, ordinaryUID)
			before, after := filepath.Join(h.ws, "stty."+backend+".before"), filepath.Join(h.ws, "stty."+backend+".after")
			run := func(round string) string {
				return fmt.Sprintf("stty -a > %s; %s --data-dir %s run --jail %s -- vim -u NONE -N notes.%s; echo exit=$?; stty -a > %s; clear; echo back-$?-%s",
					before, h.bin, h.data, backend, backend, after, round)
			}
			tm.text(t, run("q"))
			tm.keys(t, "Enter")
			tm.waitFor(t, `"notes.`+backend+`" [New]`, 20*time.Second)
			if out, err := tm.tmux("resize-window", "-t", tm.session, "-x", "72", "-y", "21"); err != nil {
				t.Fatalf("resize-window: %v: %s", err, out)
			}
			time.Sleep(300 * time.Millisecond)
			tm.text(t, ":echo 'size' &lines &columns")
			tm.keys(t, "Enter")
			tm.waitFor(t, "size 21 72", 10*time.Second)
			tm.text(t, ":q")
			tm.keys(t, "Enter")
			tm.waitFor(t, "back-0-q", 10*time.Second)
			sttySame(t, before, after)

			// Again, and this time warden run is sent SIGTERM.
			tm.text(t, run("term"))
			tm.keys(t, "Enter")
			tm.waitFor(t, `"notes.`+backend+`" [New]`, 20*time.Second)
			out, err := exec.Command("pgrep", "-u", strconv.Itoa(ordinaryUID), "-f", "^"+h.bin+" --data-dir").Output()
			pid, _ := strconv.Atoi(strings.Fields(string(out) + " 0")[0])
			if err != nil || pid == 0 {
				t.Fatalf("pgrep warden run: %v %q", err, out)
			}
			syscall.Kill(pid, syscall.SIGTERM)
			tm.waitFor(t, "back-0-term", 10*time.Second)
			sttySame(t, before, after)
		})
	}
}

// sttySame: the two `stty -a` files agree but for the size line's rows
// and columns.
func sttySame(t *testing.T, before, after string) {
	t.Helper()
	b, err1 := os.ReadFile(before)
	a, err2 := os.ReadFile(after)
	size := regexp.MustCompile(`rows \d+; columns \d+;`)
	if err1 != nil || err2 != nil || size.ReplaceAllString(string(b), "") != size.ReplaceAllString(string(a), "") {
		t.Errorf("the terminal is not as it was after warden run (%v, %v):\nbefore:\n%s\nafter:\n%s", err1, err2, b, a)
	}
}

// TestWardenRunAttached: with `warden serve` holding the data dir, warden
// run attaches to it as every verb does: the session is the serving
// engine's run (its record names serve's pid), its output comes here,
// and warden run exits with the command's status.
func TestWardenRunAttached(t *testing.T) {
	needBwrap(t)
	c := newCLI(t)
	bin := filepath.Join(privateDir(t, "warden-run-attached-"), "warden")
	buildWarden(t, bin)
	srv := startServe(t, bin, c.dir)
	ws := privateDir(t, "warden-run-ws-")
	if os.Geteuid() == 0 {
		// A root warden's command runs as the hooks' uid: a workspace of
		// root's is refused (TestWardenRunRefusesBadInput).
		os.Chown(ws, jail.DefaultUID, jail.DefaultUID)
	}
	cmd := exec.Command(bin, "--data-dir", c.dir, "run", "--workspace", ws, "--", "sh", "-c", "echo from-the-serving-engine; exit 3")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 || !strings.Contains(string(out), "from-the-serving-engine") {
		t.Fatalf("attached warden run: %v (want exit 3 and its line)\n%s", err, out)
	}
	var runs []engine.RunRecord
	c.json(0, &runs, "hook", "runs")
	if len(runs) != 1 || runs[0].PID != srv.Process.Pid || runs[0].Module != engine.RunModule {
		t.Errorf("the session is not serve's run: %+v (serve is pid %d)", runs, srv.Process.Pid)
	}

	// --learn: the host it was refused is the profile's diff, and the
	// profile is unchanged (nothing is granted by learning).
	port, hits := countingListener(t)
	cmd = exec.Command(bin, "--data-dir", c.dir, "run", "--learn", "--profile", "claude", "--workspace", ws, "--",
		"sh", "-c", fmt.Sprintf("curl -sS -m 5 http://127.0.0.1:%d/; echo curl=$?", port))
	out, err = cmd.CombinedOutput()
	want := fmt.Sprintf("+  - localhost:%d   (asked for, refused)", port)
	if err != nil || !strings.Contains(string(out), want) || !strings.Contains(string(out), "- api.anthropic.com:443") || hits.Load() != 0 {
		t.Errorf("warden run --learn: %v, %d hits; want %q in:\n%s", err, hits.Load(), want, out)
	}
	var policy map[string]any
	c.json(0, &policy, "perms", "policy", "show", "profile:claude")
	if policy["exists"] != false {
		t.Errorf("learning granted something: %v", policy)
	}
}

// TestCodexCallsWardenThroughMCP: `warden mcp install --client codex`
// writes an entry the real Codex calls in its usual non-interactive
// settings (`codex exec`, approval_policy never, which refuses a server
// without default_tools_approval_mode = "approve"): the scripted model
// calls warden's tool, the request opens and waits, an approval from
// another terminal lets the jailed hook run, and its result reaches the
// model.
func TestCodexCallsWardenThroughMCP(t *testing.T) {
	agents := needAgent(t, "codex")
	testAgentCallsWardenThroughMCP(t, "codex", agentStep{Tool: "vault__store", Namespace: "mcp__warden", Args: "{}"},
		func(base string, ms *modelServer) (cfg string, cmd *exec.Cmd) {
			codexHome := filepath.Join(base, "home", ".codex")
			if err := os.MkdirAll(codexHome, 0o700); err != nil {
				t.Fatal(err)
			}
			cfg = filepath.Join(codexHome, "config.toml")
			provider := fmt.Sprintf("model = \"test-model\"\nmodel_provider = \"scripted\"\napproval_policy = \"never\"\nsandbox_mode = \"danger-full-access\"\n[model_providers.scripted]\nname = \"scripted\"\nbase_url = \"%s/v1\"\nwire_api = \"responses\"\nenv_key = \"SCRIPTED_API_KEY\"\n", ms.URL)
			if err := os.WriteFile(cfg, []byte(provider), 0o600); err != nil {
				t.Fatal(err)
			}
			cmd = exec.Command(filepath.Join(agents, "codex"), "exec", "--skip-git-repo-check", "store it")
			cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + filepath.Dir(codexHome), "CODEX_HOME=" + codexHome, "SCRIPTED_API_KEY=k"}
			return cfg, cmd
		})
}

// TestClaudeCodeCallsWardenThroughMCP: the same flow with the real Claude
// Code (`claude -p`), whose entry `warden mcp install --client
// claude-code` writes in its ~/.claude.json.
func TestClaudeCodeCallsWardenThroughMCP(t *testing.T) {
	agents := needAgent(t, "claude")
	testAgentCallsWardenThroughMCP(t, "claude-code", agentStep{Tool: "mcp__warden__vault__store", Args: "{}"},
		func(base string, ms *modelServer) (cfg string, cmd *exec.Cmd) {
			home := filepath.Join(base, "home")
			if err := os.MkdirAll(home, 0o700); err != nil {
				t.Fatal(err)
			}
			cmd = exec.Command(filepath.Join(agents, "claude"), "-p", "store it", "--dangerously-skip-permissions")
			cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home, "ANTHROPIC_BASE_URL=" + ms.URL, "ANTHROPIC_API_KEY=k", "IS_SANDBOX=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"}
			return filepath.Join(home, ".claude.json"), cmd
		})
}

// testAgentCallsWardenThroughMCP installs warden in client's config (at
// the path setup gives) and runs the agent setup makes, whose scripted
// model makes call: the request it opens is approved from another
// terminal, and the hook's line must reach the model.
func testAgentCallsWardenThroughMCP(t *testing.T, client string, call agentStep, setup func(base string, ms *modelServer) (string, *exec.Cmd)) {
	needBwrap(t)
	c := newCLI(t)
	base := privateDir(t, "warden-agent-mcp-")
	bin := filepath.Join(base, "bin", "warden")
	buildWarden(t, bin)
	c.ok("module", "add", mcpModule(t, base, "vault", "store", "    timeout: 1m\n", "warden hook log stored-by-the-hook\n"))
	startServe(t, bin, c.dir)
	ms := newModelServer(t, []agentStep{call})
	cfg, agent := setup(base, ms)
	if out, err := exec.Command(bin, "--data-dir", c.dir, "mcp", "install", "--client", client, "--config", cfg).CombinedOutput(); err != nil {
		t.Fatalf("mcp install --client %s: %v\n%s", client, err, out)
	} else if client == "codex" && !strings.Contains(string(out), `default_tools_approval_mode = "approve"`) {
		t.Fatalf("mcp install --client codex does not say why it approves:\n%s", out)
	}
	// The test is the console that answers, from another terminal.
	ctl, err := control.Dial(c.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	detach := ctl.AttachOperator()
	defer detach()
	ctl.MCPSessions()

	var out lockedBuffer
	agent.Dir = base
	agent.Stdout, agent.Stderr = &out, &out
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- agent.Wait() }()
	defer agent.Process.Kill()
	var id uint64
	waitUntil(t, "the tool call's request", 60*time.Second, func() bool {
		rs, _ := ctl.Requests(engine.RequestFilter{})
		for _, r := range rs {
			if r.Decision == nil && r.Operation == "mcp.call" {
				id = r.ID
			}
		}
		return id != 0
	}, out.String)
	if b, err := exec.Command(bin, "--data-dir", c.dir, "perms", "approve", strconv.FormatUint(id, 10)).CombinedOutput(); err != nil {
		t.Fatalf("perms approve: %v %s", err, b)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v\n%s", client, err, out.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("%s still running 60s after the approval\n%s", client, out.String())
	}
	if rs := ms.ToolResults(); len(rs) != 1 || !strings.Contains(rs[0], "stored-by-the-hook") {
		t.Errorf("the hook's result did not reach the model: %q\n%s", rs, out.String())
	}
}
