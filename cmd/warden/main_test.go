package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	bolt "go.etcd.io/bbolt"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/engine/jail"
	"github.com/wardenhq/warden/storage"
)

type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
}

// cli is one temp data dir that commands run against, in-process.
type cli struct {
	t   testing.TB
	dir string
}

func newCLI(t testing.TB) *cli {
	t.Helper()
	// Nothing may reach the operator's real data dir.
	t.Setenv("WARDEN_DATA_DIR", filepath.Join(t.TempDir(), "env-data"))
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	// Nor the operator's config file.
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	return &cli{t: t, dir: filepath.Join(t.TempDir(), "data")}
}

// runIn runs warden with stdin and args against the cli's data dir.
func (c *cli) runIn(stdin string, args ...string) result {
	c.t.Helper()
	var out, errb bytes.Buffer
	a := &app{stdout: &out, stderr: &errb, stdin: strings.NewReader(stdin)}
	code := a.run(append([]string{"--data-dir", c.dir}, args...))
	return result{code, out.String(), errb.String()}
}

func (c *cli) run(args ...string) result {
	c.t.Helper()
	return c.runIn("", args...)
}

// ok runs and requires exit 0.
func (c *cli) ok(args ...string) result {
	c.t.Helper()
	r := c.run(args...)
	if r.code != 0 {
		c.t.Fatalf("warden %s: %s", strings.Join(args, " "), r)
	}
	return r
}

// json runs with --json, requires exit code want and decodes stdout into v.
func (c *cli) json(want int, v any, args ...string) result {
	c.t.Helper()
	r := c.run(append(args, "--json")...)
	if r.code != want {
		c.t.Fatalf("warden %s --json: want exit %d, got %s", strings.Join(args, " "), want, r)
	}
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		c.t.Fatalf("warden %s --json: stdout is not JSON (%v): %s", strings.Join(args, " "), err, r.stdout)
	}
	return r
}

func TestVersion(t *testing.T) {
	c := newCLI(t)
	r := c.ok("--version")
	if strings.TrimSpace(r.stdout) != "warden version "+version {
		t.Errorf("--version printed %q", r.stdout)
	}
	if _, err := os.Stat(c.dir); err == nil {
		t.Error("--version created the data dir")
	}
}

func TestDoctor(t *testing.T) {
	c := newCLI(t)
	needBwrap(t)
	r := c.ok("doctor")
	for _, name := range []string{"data dir", "store", "trust root", "bubblewrap"} {
		if !strings.Contains(r.stdout, "ok  ") || !strings.Contains(r.stdout, name) {
			t.Errorf("doctor output lacks an ok %q line:\n%s", name, r.stdout)
		}
	}
	var rep engine.Report
	c.json(0, &rep, "doctor")
	names := map[string]bool{}
	for _, ch := range rep.Checks {
		names[ch.Name] = true
	}
	for _, want := range []string{"data dir", "store", "trust root", "bubblewrap", "user namespaces", "seccomp", "landlock"} {
		if !names[want] {
			t.Errorf("doctor --json lacks the %q check", want)
		}
	}
	if !rep.OK() || rep.DataDir != c.dir {
		t.Errorf("doctor --json: %+v", rep)
	}
	// The hooks' process limit, and which bound set it.
	for _, ch := range rep.Checks {
		if want := fmt.Sprintf("RLIMIT_NPROC %d for hooks' uid, from %s", jail.HookNproc(), jail.HookNprocSource()); ch.Name == "hook processes" && !strings.Contains(ch.Detail, want) {
			t.Errorf("doctor --json: hook processes %q lacks %q", ch.Detail, want)
		}
	}

	r = c.run("doctor", "--bwrap", "/nonexistent/bwrap")
	if r.code != 1 || !strings.Contains(r.stdout, "fix: apt-get install bubblewrap") {
		t.Errorf("doctor with bwrap absent: %s", r)
	}
	rep = engine.Report{}
	c.json(1, &rep, "doctor", "--bwrap", "/nonexistent/bwrap")
	if rep.OK() {
		t.Errorf("doctor --json with bwrap absent says OK: %+v", rep)
	}
}

func TestSecrets(t *testing.T) {
	c := newCLI(t)
	const value = "s3cr3t-VALUE-never-shown"
	var all []result
	record := func(r result) result { all = append(all, r); return r }

	r := record(c.runIn(value+"\n", "secrets", "set", "mod", "token"))
	if r.code != 0 || !strings.Contains(r.stdout, "secret mod/token set") {
		t.Fatalf("secrets set: %s", r)
	}
	var names []string
	all = append(all, c.json(0, &names, "secrets", "list", "mod"))
	if !reflect.DeepEqual(names, []string{"token"}) {
		t.Fatalf("secrets list --json = %v", names)
	}
	if r := record(c.ok("secrets", "list", "mod")); r.stdout != "token\n" {
		t.Errorf("secrets list = %q", r.stdout)
	}

	// Empty stdin (or just a newline) is refused and sets nothing.
	for _, in := range []string{"", "\n"} {
		r := record(c.runIn(in, "secrets", "set", "mod", "empty"))
		if r.code != 1 || !strings.Contains(r.stderr, "empty") {
			t.Errorf("secrets set with stdin %q: %s", in, r)
		}
	}
	names = nil
	c.json(0, &names, "secrets", "list", "mod")
	if !reflect.DeepEqual(names, []string{"token"}) {
		t.Errorf("after refused sets: %v", names)
	}

	// A module not added yet is named first (a typo reads as one), and
	// the secret is still kept for it (set it, then add the module).
	if r := record(c.runIn("", "secrets", "set", "nope", "x")); r.code != 1 || !strings.Contains(r.stderr, `note: no module "nope" is added`) ||
		strings.Index(r.stderr, `note: no module "nope"`) > strings.Index(r.stderr, "empty value") || !strings.Contains(r.stderr, `module "nope" is not added`) {
		t.Errorf("secrets set for an unknown module, empty stdin: %s", r)
	}

	var rs []engine.Receipt
	all = append(all, c.json(0, &rs, "receipts", "list", "--kind", "secret."))
	if len(rs) != 1 || rs[0].Kind != "secret.set" {
		t.Errorf("secret receipts after one set and two refusals: %+v", rs)
	}
	var out map[string]any
	all = append(all, c.json(0, &out, "secrets", "delete", "mod", "token"))
	if out["deleted"] != true {
		t.Errorf("secrets delete --json = %v", out)
	}
	if r := record(c.ok("secrets", "delete", "mod", "token")); !strings.Contains(r.stdout, "was not set") {
		t.Errorf("second delete: %s", r)
	}
	names = nil
	c.json(0, &names, "secrets", "list", "mod")
	if names == nil || len(names) != 0 {
		t.Errorf("secrets list --json after delete = %#v, want []", names)
	}
	if r := record(c.ok("secrets", "list", "mod")); !strings.Contains(r.stdout, "no secrets set for mod") {
		t.Errorf("empty list: %s", r)
	}
	for _, r := range append(all, c.ok("receipts", "list", "--limit", "0"), c.ok("receipts", "show", "2")) {
		if strings.Contains(r.stdout+r.stderr, value) {
			t.Fatalf("the secret value was printed: %s", r)
		}
	}
}

func TestConfig(t *testing.T) {
	c := newCLI(t)
	var m map[string]any
	c.json(0, &m, "config", "set", "mod", "public_ip", "203.0.113.7")
	if m["set"] != true || m["name"] != "public_ip" {
		t.Errorf("config set --json = %v", m)
	}
	if r := c.ok("config", "set", "mod", "region", "eu west"); !strings.Contains(r.stdout, "config mod/region set") {
		t.Errorf("config set: %s", r)
	}
	c.json(0, &m, "config", "get", "mod", "public_ip")
	if m["value"] != "203.0.113.7" {
		t.Errorf("config get --json = %v", m)
	}
	if r := c.ok("config", "get", "mod", "region"); r.stdout != "eu west\n" {
		t.Errorf("config get = %q", r.stdout)
	}
	var all map[string]string
	c.json(0, &all, "config", "list", "mod")
	if !reflect.DeepEqual(all, map[string]string{"public_ip": "203.0.113.7", "region": "eu west"}) {
		t.Errorf("config list --json = %v", all)
	}
	if r := c.ok("config", "list", "mod"); r.stdout != "public_ip=203.0.113.7\nregion=eu west\n" {
		t.Errorf("config list = %q", r.stdout)
	}
	m = nil
	c.json(0, &m, "config", "delete", "mod", "public_ip")
	if m["deleted"] != true {
		t.Errorf("config delete --json = %v", m)
	}
	r := c.run("config", "get", "mod", "public_ip")
	if r.code != 1 || !strings.Contains(r.stderr, "not set") {
		t.Errorf("config get of a deleted name: %s", r)
	}
	// Errors under --json are JSON too.
	var e map[string]string
	c.json(1, &e, "config", "get", "mod", "public_ip")
	if !strings.Contains(e["error"], "not set") {
		t.Errorf("--json error = %v", e)
	}
	// Bad names are refused without touching the store.
	n := len(receiptSeqs(t, c))
	if r := c.run("config", "set", "Mod", "x", "v"); r.code == 0 {
		t.Errorf("config set with a bad module: %s", r)
	}
	if got := len(receiptSeqs(t, c)); got != n {
		t.Errorf("a refused set wrote %d receipts", got-n)
	}
	all = nil
	c.json(0, &all, "config", "list", "empty-mod")
	if all == nil || len(all) != 0 {
		t.Errorf("config list --json of an empty module = %#v, want {}", all)
	}
}

func receiptSeqs(t *testing.T, c *cli) []uint64 {
	t.Helper()
	var rs []engine.Receipt
	c.json(0, &rs, "receipts", "list", "--limit", "0")
	seqs := make([]uint64, len(rs))
	for i, r := range rs {
		seqs[i] = r.Seq
	}
	return seqs
}

func TestReceipts(t *testing.T) {
	c := newCLI(t)
	if r := c.runIn("v1", "secrets", "set", "mod", "token"); r.code != 0 { // seq 2
		t.Fatal(r)
	}
	c.ok("config", "set", "mod", "a", "1")
	if r := c.runIn("v2", "secrets", "set", "mod", "other"); r.code != 0 {
		t.Fatal(r)
	}

	var rs []engine.Receipt
	c.json(0, &rs, "receipts", "list", "--kind", "secret.set")
	if len(rs) != 2 || rs[0].Seq != 2 || rs[1].Seq != 4 {
		t.Fatalf("--kind secret.set: %+v", rs)
	}
	for _, r := range rs {
		if r.Kind != "secret.set" || r.Subject != "mod" || !strings.HasPrefix(r.Actor, "local:") {
			t.Errorf("receipt %+v", r)
		}
	}
	c.json(0, &rs, "receipts", "list", "--kind", "nothing.like.this")
	if len(rs) != 0 {
		t.Errorf("unmatched kind: %+v", rs)
	}
	c.json(0, &rs, "receipts", "list", "--limit", "2")
	if len(rs) != 2 || rs[0].Seq != 3 || rs[1].Seq != 4 {
		t.Errorf("--limit 2: %+v", rs)
	}

	r := c.ok("receipts", "list", "--since", "1h")
	if !strings.Contains(r.stdout, "SEQ") || !strings.Contains(r.stdout, "trust.init") || strings.Count(r.stdout, "\n") != 5 {
		t.Errorf("--since 1h:\n%s", r.stdout)
	}
	if r := c.ok("receipts", "list", "--since", "2999-01-01"); !strings.Contains(r.stdout, "no receipts match") {
		t.Errorf("--since in the future: %s", r)
	}

	r = c.ok("receipts", "show", "1")
	for _, want := range []string{"seq      1", "kind     trust.init", "prev     " + storage.GenesisPrev, "hash     "} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("receipts show 1 lacks %q:\n%s", want, r.stdout)
		}
	}
	var one engine.Receipt
	c.json(0, &one, "receipts", "show", "2")
	if one.Seq != 2 || one.Kind != "secret.set" {
		t.Errorf("receipts show 2 --json: %+v", one)
	}
	if r := c.run("receipts", "show", "99"); r.code != 1 || !strings.Contains(r.stderr, "no receipt 99") {
		t.Errorf("receipts show 99: %s", r)
	}

	if r := c.ok("receipts", "verify"); strings.TrimSpace(r.stdout) != "intact, 4 receipts" {
		t.Errorf("verify: %q", r.stdout)
	}
	var v engine.Verification
	c.json(0, &v, "receipts", "verify")
	if !v.Intact || v.Count != 4 {
		t.Errorf("verify --json: %+v", v)
	}
	// Pages: the newest two, then the page above them.
	if r := c.ok("receipts", "list", "--limit", "2"); !strings.Contains(r.stdout, "older: `warden receipts list --limit 2 --before 3`") {
		t.Errorf("receipts list --limit 2 does not say how to page back:\n%s", r.stdout)
	}
	var page []engine.Receipt
	c.json(0, &page, "receipts", "list", "--limit", "2", "--before", "3")
	if len(page) != 2 || page[0].Seq != 1 || page[1].Seq != 2 {
		t.Errorf("receipts list --before 3 --limit 2: %+v", page)
	}
	if r := c.run("hook", "runs", "--before", "yesterday"); r.code != 2 || !strings.Contains(r.stderr, "not a run id") {
		t.Errorf("hook runs --before yesterday: %s", r)
	}
	if r := c.ok("receipts", "verify", "--full"); strings.TrimSpace(r.stdout) != "intact, 4 receipts" {
		t.Errorf("verify --full: %q", r.stdout)
	}
	if r := c.run("receipts", "verify", "--full", "--since", "3"); r.code != 2 || !strings.Contains(r.stderr, "not both") {
		t.Errorf("verify --full --since: %s", r)
	}

	// Flip one byte inside the summary of seq 2 with plain bbolt.
	db, err := bolt.Open(filepath.Join(c.dir, storage.DBFile), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	key := []byte{0, 0, 0, 0, 0, 0, 0, 2}
	if err := db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("receipts"))
		raw := append([]byte(nil), b.Get(key)...)
		i := bytes.Index(raw, []byte(`"summary":"secret.set`))
		if i < 0 {
			return fmt.Errorf("seq 2 is not the secret.set receipt: %s", raw)
		}
		raw[i+len(`"summary":"`)] ^= 0x01 // 's' -> 'r'
		return b.Put(key, raw)
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	r = c.run("receipts", "verify")
	if r.code != 1 || !strings.Contains(r.stdout, "broken at seq 2") {
		t.Errorf("verify after tampering: %s", r)
	}
	v = engine.Verification{}
	c.json(1, &v, "receipts", "verify")
	if v.Intact || v.BrokenSeq != 2 || v.Count != 1 {
		t.Errorf("verify --json after tampering: %+v", v)
	}
}

func TestTrust(t *testing.T) {
	c := newCLI(t)
	var st engine.TrustStatus
	c.json(0, &st, "trust", "status")
	if st.Generation != 1 || !st.Agrees || len(st.Fingerprint) != 64 {
		t.Fatalf("trust status --json: %+v", st)
	}
	fp := st.Fingerprint
	if r := c.ok("trust", "status"); !strings.Contains(r.stdout, "agrees       yes") || !strings.Contains(r.stdout, fp) {
		t.Errorf("trust status:\n%s", r.stdout)
	}
	if r := c.ok("trust", "rotate"); !strings.Contains(r.stdout, "generation 2") {
		t.Errorf("trust rotate: %s", r)
	}
	c.json(0, &st, "trust", "status")
	if st.Generation != 2 || st.Fingerprint == fp || !st.Agrees {
		t.Errorf("after rotate: %+v", st)
	}
	c.json(0, &st, "trust", "rotate")
	if st.Generation != 3 {
		t.Errorf("trust rotate --json: %+v", st)
	}
	var rs []engine.Receipt
	c.json(0, &rs, "receipts", "list", "--kind", "trust.rotate")
	if len(rs) != 2 {
		t.Errorf("%d trust.rotate receipts, want 2", len(rs))
	}

	// A tampered host.secret shows as a disagreement; rotate is the way out.
	if err := os.WriteFile(filepath.Join(c.dir, "host.secret"), bytes.Repeat([]byte{1}, 32), 0o600); err != nil {
		t.Fatal(err)
	}
	c.json(0, &st, "trust", "status")
	if st.Agrees || !strings.Contains(st.Problem, "warden trust rotate") {
		t.Errorf("status with a tampered host.secret: %+v", st)
	}
	if r := c.ok("trust", "status"); !strings.Contains(r.stdout, "agrees       NO") {
		t.Errorf("trust status:\n%s", r.stdout)
	}
	c.ok("trust", "rotate")
	c.json(0, &st, "trust", "status")
	if !st.Agrees || st.Generation != 4 {
		t.Errorf("after rotating out of a disagreement: %+v", st)
	}
}

func TestUsageErrors(t *testing.T) {
	c := newCLI(t)
	for _, args := range [][]string{
		{"receipts", "show"},
		{"receipts", "show", "1", "2"},
		{"receipts", "show", "abc"},
		{"receipts", "show", "0"},
		{"receipts", "list", "extra"},
		{"receipts", "list", "--since", "soon"},
		{"receipts", "list", "--limit", "many"},
		{"receipts", "list", "--bogus"},
		{"secrets", "set", "onlyone"},
		{"secrets", "set", "Bad", "name"},
		{"secrets", "list"},
		{"config", "set", "mod", "name"},
		{"config", "get", "mod"},
		{"trust", "rotate", "now"},
		{"doctor", "extra"},
		{"--bogus"},
		{"bogus"},
		{"receipts", "bogus"},
		{"secrets", "lsit", "mod"},
	} {
		r := c.runIn("value", args...)
		if r.code != 2 || r.stderr == "" || r.stdout != "" {
			t.Errorf("warden %s: want exit 2 with a message, got %s", strings.Join(args, " "), r)
		}
		if !strings.Contains(r.stderr, "usage:") && !strings.Contains(r.stderr, "--help") && !strings.Contains(r.stderr, "want") && !strings.Contains(r.stderr, "must") && !strings.Contains(r.stderr, "bad") {
			t.Errorf("warden %s: the message does not say how to do it right: %s", strings.Join(args, " "), r.stderr)
		}
	}
	if _, err := os.Stat(c.dir); err == nil {
		t.Error("a usage error opened (created) the data dir")
	}
}

// TestLockedStore: a second warden on a held store gives up after about a
// second, naming the holder's pid.
func TestLockedStore(t *testing.T) {
	c := newCLI(t)
	e, err := engine.Open(engine.Options{DataDir: c.dir})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	start := time.Now()
	r := c.run("receipts", "list")
	elapsed := time.Since(start)
	pid := fmt.Sprint(os.Getpid())
	if r.code != 1 || !strings.Contains(r.stderr, "pid "+pid) {
		t.Errorf("receipts list on a held store: %s", r)
	}
	if elapsed > 2500*time.Millisecond {
		t.Errorf("gave up after %v, want about 1s", elapsed)
	}
	t.Logf("gave up after %v", elapsed)
	var m map[string]string
	c.json(1, &m, "receipts", "list")
	if !strings.Contains(m["error"], pid) {
		t.Errorf("--json error on a held store: %v", m)
	}
}

func TestDataDirFromEnvironment(t *testing.T) {
	newCLI(t)
	dir := filepath.Join(t.TempDir(), "from-env")
	t.Setenv("WARDEN_DATA_DIR", dir)
	var out, errb bytes.Buffer
	a := &app{stdout: &out, stderr: &errb, stdin: strings.NewReader("")}
	if code := a.run([]string{"config", "set", "mod", "n", "v"}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if _, err := os.Stat(filepath.Join(dir, storage.DBFile)); err != nil {
		t.Errorf("WARDEN_DATA_DIR not used: %v", err)
	}
}

// TestEveryVerbHasHelp walks the whole command tree.
func TestEveryVerbHasHelp(t *testing.T) {
	c := newCLI(t)
	var walk func(cmd *cobra.Command, path []string)
	n := 0
	walk = func(cmd *cobra.Command, path []string) {
		for _, sub := range cmd.Commands() {
			p := append(append([]string(nil), path...), sub.Name())
			r := c.run(append(p, "--help")...)
			if r.code != 0 || !strings.Contains(r.stdout, "Usage:") || !(strings.Contains(r.stdout, sub.Short) || strings.Contains(r.stdout, sub.Long)) || r.stderr != "" {
				t.Errorf("warden %s --help: %s", strings.Join(p, " "), r)
			}
			n++
			walk(sub, p)
		}
	}
	walk((&app{}).rootCommand(), nil)
	if n < 14 {
		t.Errorf("only %d verbs found", n)
	}
	if r := c.ok("--help"); !strings.Contains(r.stdout, "Usage:") {
		t.Errorf("warden --help: %s", r)
	}
	// A group without a verb prints its help and succeeds.
	if r := c.ok("receipts"); !strings.Contains(r.stdout, "Available Commands") {
		t.Errorf("warden receipts: %s", r)
	}
	if _, err := os.Stat(c.dir); err == nil {
		t.Error("--help opened (created) the data dir")
	}
}
