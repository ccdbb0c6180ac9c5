package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/wardenhq/warden/engine/hands/handstest"
)

// TestConsoleEndToEnd drives the real `warden` console in a real terminal
// (a private tmux server) on a fresh data dir with the hello example
// registered: it runs hello/greet from Modules, watches its lines in
// Streams, answers its operator.confirm in Requests, checks the run's
// receipts and verifies the chain, runs the hands init and finish wizards
// against the test Docker Engine, and quits with q, leaving no process
// behind. Every step is checked on screen captures.
func TestConsoleEndToEnd(t *testing.T) {
	needTool(t, "tmux", "apt-get install tmux")
	needBwrap(t)
	sock := handstest.Docker(t)

	// Everything lives in one private dir (module admission and hands
	// roots refuse world-writable ancestors such as /tmp); its random name
	// also tells this test's processes from anyone else's.
	base := privateDir(t, "warden-e2e-")
	bin := filepath.Join(base, "bin", "warden")
	data := filepath.Join(base, "data")
	buildWarden(t, bin)
	hello := filepath.Join(base, "modules", "hello")
	os.MkdirAll(filepath.Dir(hello), 0o755)
	if out, err := exec.Command("cp", "-a", filepath.Join("..", "..", "examples", "modules", "hello"), hello).CombinedOutput(); err != nil {
		t.Fatalf("copy hello: %v: %s", err, out)
	}
	if out, err := exec.Command(bin, "--data-dir", data, "module", "add", hello).CombinedOutput(); err != nil {
		t.Fatalf("module add: %v: %s", err, out)
	}
	handsBase := handstest.Base(t, sock)
	handsRoot := filepath.Join(handsBase, "task1")

	tm := startConsole(t, base, bin, data, sock)

	// Modules: pick hello/greet, fill its inputs form, run it.
	tm.waitFor(t, "1 Streams", 10*time.Second)
	tm.keys(t, "4")
	tm.waitFor(t, "Modules (1)", 10*time.Second)
	tm.waitRe(t, `▸\s+greet\s+inputs target:string`, 10*time.Second)
	tm.keys(t, "Enter")
	tm.waitFor(t, "target (string)", 10*time.Second)
	tm.text(t, "e2e")
	tm.keys(t, "Enter")

	// It jumps to Streams: the hook's own lines, live.
	tm.waitRe(t, `hello/greet · running`, 10*time.Second)
	tm.waitFor(t, "about to greet e2e", 10*time.Second)
	tm.waitFor(t, "stored a fresh visit_token", 10*time.Second)

	// Its operator.confirm rings: toast, header count and tab badge.
	tm.waitFor(t, "request 1 · press 2 to answer · hello/greet", 10*time.Second)
	tm.waitFor(t, "1 pending", 10*time.Second)
	tm.waitRe(t, `2 Requests\s+1 `, 10*time.Second)

	// Requests: the question in full; y approves it once.
	tm.keys(t, "2")
	tm.waitFor(t, "operator.confirm: Greet e2e?", 10*time.Second)
	tm.waitFor(t, `"message": "Greet e2e?"`, 10*time.Second)
	tm.keys(t, "y")
	tm.waitRe(t, `#1\s+approve-once`, 10*time.Second)
	tm.waitFor(t, "0 pending · 1 decided", 10*time.Second)

	// Streams: the run finished, greeting e2e.
	tm.keys(t, "1")
	tm.waitFor(t, "hello/greet · succeeded", 110*time.Second)
	tm.waitFor(t, "Hello, e2e!", 10*time.Second)

	// Receipts: the run's receipts, then v verifies the chain.
	tm.keys(t, "3")
	for _, kind := range []string{"module.add", "hook.start", "request.open", "request.decide", "hook.end", "token.revoke"} {
		tm.waitRe(t, `\d+ \d\d:\d\d:\d\d\s+(\S+ ago )?`+regexp.QuoteMeta(kind)+` `, 10*time.Second)
	}
	tm.waitRe(t, `hook\.end .*hello/greet\s+run \S+ of hello/greet su`, 10*time.Second)
	tm.keys(t, "v")
	tm.waitRe(t, `receipt chain intact, \d+ receipts`, 10*time.Second)

	// Resized 80x24 -> 200x60 with the list scrolled to its end, Receipts
	// fills the taller window: every body row a receipt (it once left
	// 38 rows empty).
	// Enough receipts to fill Receipts at 200x60 (set through the console's engine).
	for i := range 60 {
		if out, err := exec.Command(bin, "--data-dir", data, "config", "set", "hello", fmt.Sprintf("k%02d", i), "v").CombinedOutput(); err != nil {
			t.Fatalf("config set: %v: %s", err, out)
		}
	}
	tm.waitFor(t, "config.set", 10*time.Second)
	tm.keys(t, "G")
	tm.resize(t, 80, 24)
	tm.waitSized(t, 80, 24, 10*time.Second)
	tm.resize(t, 200, 60)
	screen := tm.waitSized(t, 200, 60, 10*time.Second)
	rows := strings.Split(screen, "\n")
	receiptRow := regexp.MustCompile(`^[▸ ] +\d+ \d\d:\d\d:\d\d `)
	n := 0
	for _, r := range rows[4 : 60-2] {
		if receiptRow.MatchString(r) {
			n++
		}
	}
	if n != 60-6 {
		t.Errorf("Receipts at 200x60 shows %d receipt rows, want %d (the body full):\n%s", n, 60-6, screen)
	}
	tm.resize(t, 120, 40)
	tm.waitSized(t, 120, 40, 10*time.Second)

	// Hands: init and finish through the wizards, on Docker.
	handsWizards(t, tm, sock, handsRoot, "Docker ", handstest.Image)

	// q quits: the session ends and no warden process is left (checked
	// by the data dir on their command lines, which finds them now).
	if len(ours(data)) == 0 {
		t.Fatalf("pgrep -f %s finds no process while the console runs: the check after q would prove nothing", data)
	}
	tm.keys(t, "q")
	tm.waitGone(t, data, 10*time.Second)
}

// TestConsoleHandsPodman runs the console's hands init wizard to ready,
// and the finish wizard, against the test Podman service, in a real
// terminal.
func TestConsoleHandsPodman(t *testing.T) {
	needTool(t, "tmux", "apt-get install tmux")
	sock := handstest.Podman(t)
	base := privateDir(t, "warden-e2e-")
	bin := filepath.Join(base, "bin", "warden")
	data := filepath.Join(base, "data")
	buildWarden(t, bin)
	handsRoot := filepath.Join(handstest.Base(t, sock), "task1")
	tm := startConsole(t, base, bin, data, "", "WARDEN_TEST_PODMAN="+sock)
	tm.waitFor(t, "1 Streams", 10*time.Second)
	handsWizards(t, tm, sock, handsRoot, "Podman ", "localhost/"+handstest.Image)
	tm.keys(t, "q")
	tm.waitGone(t, data, 10*time.Second)
}

// handsWizards runs the hands init wizard through to ready on the engine
// at sock (the root is checked as it is typed, the engine socket and the
// image are picked from what is offered, the summary names the engine,
// then the phases run), then the finish wizard on the same root.
// engineLabel starts the engine's name as the wizard shows it; image is
// the test image's name as the engine lists it (Podman qualifies it with
// localhost/).
func handsWizards(t *testing.T, tm *tmuxConsole, sock, handsRoot, engineLabel, image string) {
	t.Helper()
	tm.keys(t, "5")
	tm.waitFor(t, "Hands roots (0)", 10*time.Second)
	tm.keys(t, "i")
	tm.waitFor(t, "Hands init 1/5 · root", 10*time.Second)
	tm.text(t, handsRoot)
	tm.waitFor(t, "✓ "+handsRoot+" is new and its ancestors are safe", 10*time.Second)
	tm.keys(t, "Enter")
	tm.waitFor(t, "Hands init 2/5 · engine socket", 10*time.Second)
	tm.pick(t, sock, 10*time.Second)
	tm.waitFor(t, "Hands init 3/5 · image", 110*time.Second)
	tm.pick(t, image, 10*time.Second)
	tm.waitFor(t, "Hands init 4/5 · access", 10*time.Second)
	tm.pick(t, "files: the workspace", 10*time.Second)
	tm.waitFor(t, "Hands init 5/5 · confirm", 10*time.Second)
	for _, want := range []string{"root    " + handsRoot, "engine  " + sock + " · " + engineLabel, "image   " + image, "access  files"} {
		tm.waitFor(t, want, 10*time.Second)
	}
	tm.keys(t, "y")
	tm.waitFor(t, "Hands init · ready", 60*time.Second)
	tm.waitRe(t, `✓ ready: container [0-9a-f]{12} from `+regexp.QuoteMeta(image)+`, access files`, 10*time.Second)
	for _, phase := range []string{"prepared", "creating", "running", "ready"} {
		tm.waitRe(t, `✓ `+phase+`\s`, 10*time.Second)
	}
	cli := handstest.Client(t, sock)
	if ids := handstest.Labelled(t, cli, handsRoot); len(ids) != 1 {
		t.Fatalf("after the init wizard the engine has %d containers for %s, want 1", len(ids), handsRoot)
	}
	tm.keys(t, "Enter")
	// The row: live state from the engine, the image by name and digest.
	tm.waitRe(t, `▸ ready\s+`+regexp.QuoteMeta(handsRoot)+`\s+container running\s+`+strings.ToLower(strings.TrimSpace(engineLabel))+` · `+regexp.QuoteMeta(image[:min(len(image), 12)]), 20*time.Second)

	// The finish wizard, on the selected root: no asking which again.
	tm.keys(t, "x")
	tm.waitFor(t, "Finish "+handsRoot+"?", 10*time.Second)
	tm.keys(t, "y")
	tm.waitFor(t, "Hands finish · finished", 30*time.Second)
	tm.waitRe(t, `✓ finished: container [0-9a-f]{12} stopped`, 10*time.Second)
	tm.keys(t, "Enter")
	tm.waitRe(t, `▸ finished\s+`+regexp.QuoteMeta(handsRoot), 10*time.Second)
}

// needTool skips (fails in CI) when a program the test drives is missing.
func needTool(t *testing.T, name, fix string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is missing in CI: the test command installs it (%s)", name, fix)
		}
		t.Skipf("%s is not installed: %s", name, fix)
	}
}

// buildWarden builds the product's warden into bin with go build, as an
// operator's copy is built (not this test binary, which links the tests'
// packages too).
func buildWarden(t testing.TB, bin string) {
	t.Helper()
	if out, err := exec.Command(goTool(t), "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
}

// goTool finds the go command that builds the binary under test.
func goTool(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if p := "/usr/local/go/bin/go"; fileExists(p) {
		return p
	}
	t.Fatal("no go command on PATH to build warden with")
	return ""
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// privateDir makes a fresh dir under the user cache dir, mode 0755 (no
// group- or world-writable ancestors), removed when the test ends.
func privateDir(t testing.TB, prefix string) string {
	t.Helper()
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(cache, 0o700); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(cache, prefix)
	if err != nil {
		t.Fatal(err)
	}
	if dir, err = filepath.EvalSymlinks(dir); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// tmuxConsole is the console running in a session of a private tmux server.
type tmuxConsole struct {
	sock, session string
	stderr        string // the console's stderr, for failure messages
	last          string // the last capture
}

// startConsole starts `warden --data-dir data` in a 120x40 tmux session
// of its own server; cleanup kills the server and any process of ours.
func startConsole(t *testing.T, base, bin, data, dockerSock string, extraEnv ...string) *tmuxConsole {
	t.Helper()
	tm := &tmuxConsole{sock: filepath.Join(base, "tmux.sock"), session: "warden-e2e", stderr: filepath.Join(base, "console.stderr")}
	env := []string{"WARDEN_DATA_DIR=" + data}
	if dockerSock != "" {
		env = append(env, "WARDEN_TEST_DOCKER="+dockerSock, "DOCKER_HOST=unix://"+dockerSock)
	}
	env = append(env, extraEnv...)
	command := "exec env " + shellQuote(env...) + " " + shellQuote(bin, "--data-dir", data) + " 2>" + shellQuote(tm.stderr)
	t.Cleanup(func() {
		exec.Command("tmux", "-S", tm.sock, "kill-server").Run()
		killOurs(t, data)
	})
	if out, err := tm.tmux("new-session", "-d", "-s", tm.session, "-x", "120", "-y", "40", command); err != nil {
		t.Fatalf("tmux new-session: %v: %s", err, out)
	}
	return tm
}

// tmux runs a tmux command on the private server, without any outer
// session's TMUX in its environment.
func (tm *tmuxConsole) tmux(args ...string) ([]byte, error) {
	cmd := exec.Command("tmux", append([]string{"-S", tm.sock}, args...)...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TMUX=") && !strings.HasPrefix(kv, "TMUX_PANE=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.Bytes(), err
}

// keys sends tmux key names (Enter, Down, y, …) one by one.
func (tm *tmuxConsole) keys(t *testing.T, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if out, err := tm.tmux("send-keys", "-t", tm.session, k); err != nil {
			t.Fatalf("send-keys %s: %v: %s\nlast screen:\n%s%s", k, err, out, tm.last, tm.stderrTail())
		}
	}
}

// text types s literally.
func (tm *tmuxConsole) text(t *testing.T, s string) {
	t.Helper()
	if out, err := tm.tmux("send-keys", "-t", tm.session, "-l", s); err != nil {
		t.Fatalf("send-keys -l %q: %v: %s\nlast screen:\n%s%s", s, err, out, tm.last, tm.stderrTail())
	}
}

// capture returns the screen as plain text.
func (tm *tmuxConsole) capture(t *testing.T) string {
	t.Helper()
	out, err := tm.tmux("capture-pane", "-p", "-t", tm.session)
	if err != nil {
		t.Fatalf("capture-pane: %v: %s\nlast screen:\n%s%s", err, out, tm.last, tm.stderrTail())
	}
	tm.last = string(out)
	return tm.last
}

// waitFor polls the screen until it shows text.
func (tm *tmuxConsole) waitFor(t *testing.T, text string, timeout time.Duration) string {
	t.Helper()
	return tm.wait(t, fmt.Sprintf("%q", text), func(s string) bool { return strings.Contains(s, text) }, timeout)
}

// waitRe polls the screen until a line of it matches re.
func (tm *tmuxConsole) waitRe(t *testing.T, re string, timeout time.Duration) string {
	t.Helper()
	rx := regexp.MustCompile("(?m)" + re)
	return tm.wait(t, "/"+re+"/", rx.MatchString, timeout)
}

func (tm *tmuxConsole) wait(t *testing.T, what string, ok func(string) bool, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		s := tm.capture(t)
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s the screen does not show %s; last screen:\n%s%s", timeout, what, s, tm.stderrTail())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// pick waits for an option of the focused select field (the wizard's
// engine socket, image and access), moves the cursor onto it and takes it.
func (tm *tmuxConsole) pick(t *testing.T, option string, timeout time.Duration) {
	t.Helper()
	tm.waitFor(t, option, timeout)
	tm.moveTo(t, option, func(s string) bool { return cursorOn(s, option) })
	tm.keys(t, "Enter")
	// The field moved on once the cursor line is gone.
	tm.wait(t, "the field after "+option, func(s string) bool { return !cursorOn(s, option) }, 10*time.Second)
}

// moveTo presses Down, then Up, until the screen satisfies on. After each
// key it waits for the cursor to move (a loaded machine can draw later
// than any fixed pause, and a second press meanwhile would move past the
// line). Only the cursor rows count: the console redraws every second
// for its clocks ("12s ago"). A cursor that does not move for 3 s is at
// the end of its list, and the search turns back.
func (tm *tmuxConsole) moveTo(t *testing.T, what string, on func(string) bool) {
	t.Helper()
	s := tm.capture(t)
	for _, key := range []string{"Down", "Up"} {
		for range 30 {
			if on(s) {
				return
			}
			rows := cursorRows(s)
			tm.keys(t, key)
			for deadline := time.Now().Add(3 * time.Second); cursorRows(s) == rows && time.Now().Before(deadline); {
				time.Sleep(20 * time.Millisecond)
				s = tm.capture(t)
			}
			if cursorRows(s) == rows {
				break // the end of the list
			}
		}
	}
	if !on(s) {
		t.Fatalf("cannot move a cursor onto %s; last screen:\n%s%s", what, s, tm.stderrTail())
	}
}

// cursorRows says where the cursors are: each screen row that starts
// with one (the console's "▸", huh's ">"; huh shows the fields before the
// focused one the same way) and that row's text without digits (a list
// that scrolls keeps its cursor on one row; clocks change only digits).
func cursorRows(screen string) string {
	var rows []string
	noDigits := func(r rune) rune {
		if r >= '0' && r <= '9' {
			return -1
		}
		return r
	}
	for i, line := range strings.Split(screen, "\n") {
		l := strings.TrimLeft(line, " │┃|")
		for _, m := range []string{"▸", "> ", "❯"} {
			if strings.HasPrefix(l, m) {
				rows = append(rows, strconv.Itoa(i)+":"+strings.Map(noDigits, l))
				break
			}
		}
	}
	return strings.Join(rows, "\n")
}

// cursorOn reports whether a select's cursor (huh's "> ") is on the line
// that offers option.
func cursorOn(screen, option string) bool {
	for _, line := range strings.Split(screen, "\n") {
		i := strings.Index(line, option)
		if i < 0 {
			continue
		}
		before := strings.TrimRight(line[:i], " ")
		if strings.HasSuffix(before, ">") || strings.HasSuffix(before, "❯") || strings.HasSuffix(before, "▸") {
			return true
		}
	}
	return false
}

// waitGone waits for the session to end and for every process whose
// command line names the data dir (the console, its hooks, the tmux
// server) to exit.
func (tm *tmuxConsole) waitGone(t *testing.T, data string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		_, sessErr := tm.tmux("has-session", "-t", tm.session)
		left := ours(data)
		if sessErr != nil && len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after q and %s: session still there: %v; processes left: %q; last screen:\n%s%s",
				timeout, sessErr == nil, left, tm.last, tm.stderrTail())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (tm *tmuxConsole) stderrTail() string {
	b, _ := os.ReadFile(tm.stderr)
	if len(b) == 0 {
		return ""
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return "\nconsole stderr:\n" + string(b)
}

// ours lists the processes (pid and command line) that name data.
func ours(data string) []string {
	out, _ := exec.Command("pgrep", "-a", "-f", regexp.QuoteMeta(data)).Output()
	var procs []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l != "" {
			procs = append(procs, l)
		}
	}
	return procs
}

// killOurs kills, by pid, whatever of ours is still running.
func killOurs(t *testing.T, data string) {
	for _, p := range ours(data) {
		pid, _, _ := strings.Cut(p, " ")
		t.Logf("killing a leftover process: %s", p)
		exec.Command("kill", "-9", pid).Run()
	}
}

// shellQuote quotes each word for sh and joins them with spaces.
func shellQuote(words ...string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// resize makes the console's tmux window w x h: the program in it (a
// console, or ssh) gets SIGWINCH.
func (tm *tmuxConsole) resize(t *testing.T, w, h int) {
	t.Helper()
	if out, err := tm.tmux("resize-window", "-t", tm.session, "-x", strconv.Itoa(w), "-y", strconv.Itoa(h)); err != nil {
		t.Fatalf("tmux resize-window: %v: %s", err, out)
	}
}

// waitSized waits until the console has redrawn itself for w x h: the
// header on the first row, the help line on the last (h), no row wider
// than w.
func (tm *tmuxConsole) waitSized(t *testing.T, w, h int, timeout time.Duration) string {
	t.Helper()
	return tm.wait(t, fmt.Sprintf("a frame of %dx%d", w, h), func(s string) bool {
		rows := strings.Split(strings.TrimRight(s, "\n"), "\n")
		if len(rows) != h || !strings.HasPrefix(rows[0], "warden") || !strings.Contains(rows[h-1], " • ") {
			return false
		}
		for _, r := range rows {
			if utf8.RuneCountInString(r) > w {
				return false
			}
		}
		return true
	}, timeout)
}
