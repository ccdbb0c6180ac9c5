package caps

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wardenhq/warden/storage"
)

const actor = "local:test"

// env is one data dir with its store and authority open.
type env struct {
	t     *testing.T
	dir   string
	store *storage.Store
	auth  *Authority
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, dir: filepath.Join(t.TempDir(), "data")}
	e.open()
	t.Cleanup(func() { e.close() })
	return e
}

func (e *env) open() {
	e.t.Helper()
	st, err := storage.Open(storage.Options{Dir: e.dir})
	if err != nil {
		e.t.Fatalf("storage.Open: %v", err)
	}
	a, err := Open(st, actor)
	if err != nil {
		st.Close()
		e.t.Fatalf("caps.Open: %v", err)
	}
	e.store, e.auth = st, a
}

func (e *env) close() {
	if e.store != nil {
		e.store.Close()
		e.store, e.auth = nil, nil
	}
}

func (e *env) reopen() {
	e.t.Helper()
	e.close()
	e.open()
}

func (e *env) issue(subject, scope, session string, ttl time.Duration) string {
	e.t.Helper()
	tok, err := e.auth.Issue(actor, subject, scope, session, ttl)
	if err != nil {
		e.t.Fatalf("Issue(%s,%s,%s): %v", subject, scope, session, err)
	}
	return tok
}

func (e *env) receipts(kind string) []storage.Receipt {
	e.t.Helper()
	var rs []storage.Receipt
	if err := e.store.View(func(tx *storage.Tx) (err error) {
		rs, err = tx.Receipts(storage.ReceiptFilter{Kind: kind})
		return err
	}); err != nil {
		e.t.Fatalf("receipts: %v", err)
	}
	return rs
}

func (e *env) classify(tok, subject, scope, session string) Class {
	return e.auth.Classify(tok, subject, scope, session)
}

func (e *env) wantClass(tok, subject, scope, session string, want Class) {
	e.t.Helper()
	if got := e.classify(tok, subject, scope, session); got != want {
		e.t.Errorf("Classify(%.12s…, %s, %s, %s) = %s, want %s", tok, subject, scope, session, got, want)
	}
}

func randomToken(t *testing.T) string {
	t.Helper()
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		t.Fatal(err)
	}
	return "cap_" + hex.EncodeToString(raw[:])
}

func fileFingerprint(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func wantMode0600(t *testing.T, path string) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
		t.Errorf("%s: mode %v, want a regular file 0600", path, fi.Mode())
	}
}

// TestClassTable reaches every class through the public API and checks
// that Check tells the presenter nothing but "unauthorized".
func TestClassTable(t *testing.T) {
	e := newEnv(t)
	const subj, scope, sess = "mod-a", "hook", "run-1"

	// WRONG_GENERATION: issued, then the root rotates.
	oldGen := e.issue(subj, scope, sess, time.Hour)
	if _, err := e.auth.Rotate(actor); err != nil {
		t.Fatal(err)
	}
	valid := e.issue(subj, scope, sess, time.Hour)
	revoked := e.issue(subj, scope, sess, time.Hour)
	if err := e.auth.Revoke(actor, revoked); err != nil {
		t.Fatal(err)
	}
	expired := e.issue(subj, scope, sess, time.Millisecond)
	time.Sleep(5 * time.Millisecond)

	if !strings.HasPrefix(valid, "cap_") || len(valid) != 68 || strings.ToLower(valid) != valid {
		t.Fatalf("token %q is not cap_ + 64 lowercase hex", valid)
	}
	if _, err := hex.DecodeString(valid[4:]); err != nil {
		t.Fatalf("token %q: %v", valid, err)
	}
	body := valid[4:]
	cases := []struct {
		name                  string
		tok, subj, scope, ses string
		want                  Class
	}{
		{"empty", "", subj, scope, sess, Malformed},
		{"short garbage", "cap_XYZ", subj, scope, sess, Malformed},
		{"uppercase hex", "cap_" + strings.ToUpper(body), subj, scope, sess, Malformed},
		{"uppercase prefix", "CAP_" + body, subj, scope, sess, Malformed},
		{"wrong prefix", "cup_" + body, subj, scope, sess, Malformed},
		{"one short", valid[:67], subj, scope, sess, Malformed},
		{"one long", valid + "0", subj, scope, sess, Malformed},
		{"trailing newline", valid + "\n", subj, scope, sess, Malformed},
		{"non-hex letter", "cap_g" + body[1:], subj, scope, sess, Malformed},
		{"multibyte rune, right byte length", "cap_" + body[:62] + "é", subj, scope, sess, Malformed},
		{"bare hex", body, subj, scope, sess, Malformed},
		{"never issued", randomToken(t), subj, scope, sess, Unknown},
		{"all zeros", "cap_" + strings.Repeat("0", 64), subj, scope, sess, Unknown},
		{"subject", valid, "mod-b", scope, sess, SubjectMismatch},
		{"scope", valid, subj, "admin", sess, ScopeMismatch},
		{"session", valid, subj, scope, "run-2", SessionMismatch},
		{"empty session", valid, subj, scope, "", SessionMismatch},
		{"rotated", oldGen, subj, scope, sess, WrongGeneration},
		{"revoked", revoked, subj, scope, sess, Revoked},
		{"expired", expired, subj, scope, sess, Expired},
		{"valid", valid, subj, scope, sess, Valid},
	}
	seen := map[Class]bool{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := e.auth.Classify(c.tok, c.subj, c.scope, c.ses); got != c.want {
				t.Errorf("Classify = %s, want %s", got, c.want)
			}
			cl, err := e.auth.Check(c.tok, c.subj, c.scope, c.ses)
			if cl != c.want {
				t.Errorf("Check class = %s, want %s", cl, c.want)
			}
			if c.want == Valid {
				if err != nil {
					t.Errorf("Check of a valid token: %v", err)
				}
				return
			}
			// No oracle: the very same error value and text for every class.
			if err != ErrUnauthorized || err.Error() != "unauthorized" {
				t.Errorf("Check error = %v (%T), want exactly ErrUnauthorized \"unauthorized\"", err, err)
			}
		})
		seen[c.want] = true
	}
	for _, cl := range []Class{Malformed, Unknown, SubjectMismatch, ScopeMismatch, SessionMismatch, WrongGeneration, Revoked, Expired, Valid} {
		if !seen[cl] {
			t.Errorf("class %s not covered", cl)
		}
	}
}

// TestExpiryBoundary pins expiry to the instant with the in-package clock.
func TestExpiryBoundary(t *testing.T) {
	e := newEnv(t)
	base := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	e.auth.now = func() time.Time { return base }
	tok := e.issue("m", "hook", "s", time.Minute)
	e.auth.now = func() time.Time { return base.Add(time.Minute - time.Nanosecond) }
	e.wantClass(tok, "m", "hook", "s", Valid)
	e.auth.now = func() time.Time { return base.Add(time.Minute) }
	e.wantClass(tok, "m", "hook", "s", Expired)
	st, err := e.auth.Status()
	if err != nil {
		t.Fatal(err)
	}
	if st.Tokens != 1 || st.Live != 0 {
		t.Errorf("status tokens/live = %d/%d, want 1/0", st.Tokens, st.Live)
	}
}

func TestIssueRefusesBadArguments(t *testing.T) {
	e := newEnv(t)
	before := len(e.receipts(""))
	for _, c := range []struct {
		subject, scope string
		ttl            time.Duration
	}{{"", "hook", time.Hour}, {"m", "", time.Hour}, {"m", "hook", 0}, {"m", "hook", -time.Second}} {
		if tok, err := e.auth.Issue(actor, c.subject, c.scope, "s", c.ttl); err == nil || tok != "" {
			t.Errorf("Issue(%q,%q,%v) = %q, %v; want refusal", c.subject, c.scope, c.ttl, tok, err)
		}
	}
	if after := len(e.receipts("")); after != before {
		t.Errorf("refused issues wrote %d receipts", after-before)
	}
	if st, _ := e.auth.Status(); st.Tokens != 0 {
		t.Errorf("refused issues stored %d tokens", st.Tokens)
	}
}

func TestRevokeIsIdempotentAndWritesOneReceipt(t *testing.T) {
	e := newEnv(t)
	tok := e.issue("m", "hook", "s", time.Hour)
	other := e.issue("m", "hook", "s", time.Hour)
	for i := 0; i < 2; i++ {
		if err := e.auth.Revoke(actor, tok); err != nil {
			t.Fatalf("Revoke #%d: %v", i+1, err)
		}
	}
	// Unknown and malformed tokens: no error, nothing written.
	if err := e.auth.Revoke(actor, randomToken(t)); err != nil {
		t.Errorf("Revoke(unknown): %v", err)
	}
	if err := e.auth.Revoke(actor, "cap_nope"); err != nil {
		t.Errorf("Revoke(malformed): %v", err)
	}
	if n := len(e.receipts("token.revoke")); n != 1 {
		t.Errorf("%d token.revoke receipts, want 1", n)
	}
	e.wantClass(tok, "m", "hook", "s", Revoked)
	e.wantClass(other, "m", "hook", "s", Valid)
}

func TestRevokeSession(t *testing.T) {
	e := newEnv(t)
	a1 := e.issue("mod-a", "hook", "run-1", time.Hour)
	b1 := e.issue("mod-b", "hook", "run-1", time.Hour)
	a2 := e.issue("mod-a", "hook", "run-2", time.Hour)
	a0 := e.issue("mod-a", "hook", "", time.Hour)

	if err := e.auth.RevokeSession(actor, ""); err == nil {
		t.Error("RevokeSession(\"\") accepted: it would revoke every session-less token")
	}
	e.wantClass(a0, "mod-a", "hook", "", Valid)

	if err := e.auth.RevokeSession(actor, "run-1"); err != nil {
		t.Fatal(err)
	}
	e.wantClass(a1, "mod-a", "hook", "run-1", Revoked)
	e.wantClass(b1, "mod-b", "hook", "run-1", Revoked)
	e.wantClass(a2, "mod-a", "hook", "run-2", Valid)
	e.wantClass(a0, "mod-a", "hook", "", Valid)

	rs := e.receipts("token.revoke")
	if len(rs) != 1 {
		t.Fatalf("%d token.revoke receipts, want 1", len(rs))
	}
	var d struct{ Count int }
	if err := json.Unmarshal(rs[0].Details, &d); err != nil || d.Count != 2 {
		t.Errorf("revoke receipt details %s: want count 2 (%v)", rs[0].Details, err)
	}
	if rs[0].Subject != "tokens" || !strings.Contains(rs[0].Summary, "run-1") {
		t.Errorf("revoke receipt subject %q summary %q", rs[0].Subject, rs[0].Summary)
	}
	// Again: nothing live left in the session, so nothing is written.
	if err := e.auth.RevokeSession(actor, "run-1"); err != nil {
		t.Fatal(err)
	}
	if n := len(e.receipts("token.revoke")); n != 1 {
		t.Errorf("second RevokeSession wrote a receipt (%d total)", n)
	}
}

// RevokeSessionTx (how the engine revokes a dead run's token at open)
// finds the session's tokens through storage's index by session: exactly
// that session's live tokens are revoked (an expired one too),
// and none of another session, however alike its name, nor a
// session-less one. The classes hold across a reopen (read back from the
// tombstones on disk).
func TestRevokeSessionTxRevokesOnlyItsSession(t *testing.T) {
	e := newEnv(t)
	var others []string
	for _, sess := range []string{"run-10", "run-", "run-1\x00x", "run-2", "xrun-1"} {
		others = append(others, e.issue("mod", "hook", sess, time.Hour))
	}
	loose := e.issue("mod", "hook", "", time.Hour)
	mine := []string{e.issue("run-1", "hook", "run-1", time.Hour), e.issue("run-1", "store", "run-1", time.Hour)}
	gone := e.issue("run-1", "hook", "run-1", time.Hour)
	if err := e.auth.Revoke(actor, gone); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	e.auth.now = func() time.Time { return now.Add(-2 * time.Hour) }
	expired := e.issue("run-1", "hook", "run-1", time.Hour)
	e.auth.now = time.Now
	before := len(e.receipts("token.revoke"))

	if _, err := e.store.Update(func(tx *storage.Tx) error {
		return e.auth.RevokeSessionTx(tx, "engine", "run-1", "revoked session run-1 (the run was found dead)")
	}); err != nil {
		t.Fatal(err)
	}
	check := func() {
		t.Helper()
		e.wantClass(mine[0], "run-1", "hook", "run-1", Revoked)
		e.wantClass(mine[1], "run-1", "store", "run-1", Revoked)
		e.wantClass(gone, "run-1", "hook", "run-1", Revoked)
		e.wantClass(expired, "run-1", "hook", "run-1", Revoked)
		for i, sess := range []string{"run-10", "run-", "run-1\x00x", "run-2", "xrun-1"} {
			e.wantClass(others[i], "mod", "hook", sess, Valid)
		}
		e.wantClass(loose, "mod", "hook", "", Valid)
	}
	check()
	rs := e.receipts("token.revoke")
	if len(rs) != before+1 {
		t.Fatalf("%d token.revoke receipts written, want 1", len(rs)-before)
	}
	var d struct{ Count int }
	if err := json.Unmarshal(rs[len(rs)-1].Details, &d); err != nil || d.Count != 3 {
		t.Errorf("revoke receipt details %s: want count 3 (the two live and the expired; %v)", rs[len(rs)-1].Details, err)
	}
	e.reopen()
	check()
	st, err := e.auth.Status()
	if err != nil || st.Tokens != 10 || st.Live != 6 {
		t.Errorf("status %+v %v; want 10 tokens kept, 6 live", st, err)
	}
}

func TestRotate(t *testing.T) {
	e := newEnv(t)
	secretPath := filepath.Join(e.dir, HostSecretFile)
	st0, err := e.auth.Status()
	if err != nil {
		t.Fatal(err)
	}
	if st0.Generation != 1 || !st0.Agrees || st0.Fingerprint != fileFingerprint(t, secretPath) {
		t.Fatalf("fresh status %+v", st0)
	}
	if n := len(e.receipts("trust.init")); n != 1 {
		t.Errorf("%d trust.init receipts, want 1", n)
	}
	olds := []string{
		e.issue("m", "hook", "s1", time.Hour),
		e.issue("m", "admin", "", time.Hour),
	}
	gone := e.issue("m", "hook", "s2", time.Hour)
	if err := e.auth.Revoke(actor, gone); err != nil {
		t.Fatal(err)
	}

	st1, err := e.auth.Rotate(actor)
	if err != nil {
		t.Fatal(err)
	}
	if st1.Generation != st0.Generation+1 {
		t.Errorf("generation %d -> %d, want +1", st0.Generation, st1.Generation)
	}
	if st1.Fingerprint == st0.Fingerprint || st1.Fingerprint != fileFingerprint(t, secretPath) {
		t.Errorf("fingerprint after rotate %s (before %s, file %s)", st1.Fingerprint, st0.Fingerprint, fileFingerprint(t, secretPath))
	}
	if !st1.Agrees || st1.Live != 0 || st1.Tokens != 3 {
		t.Errorf("status after rotate %+v, want agreeing, 3 tokens, 0 live", st1)
	}
	wantMode0600(t, secretPath)
	if left, _ := filepath.Glob(filepath.Join(e.dir, ".*tmp*")); len(left) != 0 {
		t.Errorf("temp files left behind: %v", left)
	}
	e.wantClass(olds[0], "m", "hook", "s1", WrongGeneration)
	e.wantClass(olds[1], "m", "admin", "", WrongGeneration)
	e.wantClass(gone, "m", "hook", "s2", WrongGeneration)
	fresh := e.issue("m", "hook", "s1", time.Hour)
	e.wantClass(fresh, "m", "hook", "s1", Valid)

	rs := e.receipts("trust.rotate")
	if len(rs) != 1 {
		t.Fatalf("%d trust.rotate receipts, want 1", len(rs))
	}
	var d struct {
		Generation  uint64
		Fingerprint string
		Revoked     int
	}
	if err := json.Unmarshal(rs[0].Details, &d); err != nil {
		t.Fatal(err)
	}
	if d.Generation != 2 || d.Fingerprint != st1.Fingerprint || d.Revoked != 2 {
		t.Errorf("trust.rotate details %s: want generation 2, the new fingerprint, 2 revoked", rs[0].Details)
	}

	// The new root persists: after a reopen the fresh token still verifies.
	e.reopen()
	if err := e.auth.Err(); err != nil {
		t.Fatalf("after reopen: %v", err)
	}
	if st, _ := e.auth.Status(); st.Generation != 2 || st.Live != 1 {
		t.Errorf("status after reopen %+v, want generation 2 with 1 live token", st)
	}
	e.wantClass(fresh, "m", "hook", "s1", Valid)
	e.wantClass(olds[0], "m", "hook", "s1", WrongGeneration)
}

// TestTrustDisagreement: a host.secret that no longer matches the recorded
// fingerprint authorizes nothing until Rotate.
func TestTrustDisagreement(t *testing.T) {
	cases := []struct {
		name   string
		tamper func(t *testing.T, path string)
	}{
		{"other 32 bytes", func(t *testing.T, path string) {
			var b [32]byte
			rand.Read(b[:])
			if err := os.WriteFile(path, b[:], 0o600); err != nil {
				t.Fatal(err)
			}
			wantMode0600(t, path)
		}},
		{"missing", func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}},
		{"group readable", func(t *testing.T, path string) {
			if err := os.Chmod(path, 0o640); err != nil {
				t.Fatal(err)
			}
		}},
		{"short", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte("short"), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			const subj, scope, sess = "m", "hook", "run"
			tok := e.issue(subj, scope, sess, time.Hour)
			e.wantClass(tok, subj, scope, sess, Valid)
			path := filepath.Join(e.dir, HostSecretFile)
			e.close()
			c.tamper(t, path)
			e.open()

			var te *TrustError
			if err := e.auth.Err(); !errors.As(err, &te) {
				t.Fatalf("Err() = %v (%T), want *TrustError", err, err)
			}
			if !strings.Contains(te.Error(), "warden trust rotate") {
				t.Errorf("TrustError does not name the way out: %s", te)
			}
			if got, err := e.auth.Issue(actor, subj, scope, sess, time.Hour); err == nil || got != "" || !errors.As(err, &te) {
				t.Errorf("Issue with a broken root = %q, %v; want a *TrustError", got, err)
			}
			if cl, err := e.auth.Check(tok, subj, scope, sess); cl == Valid || err != ErrUnauthorized {
				t.Errorf("Check of a previously valid token with a broken root = %s, %v", cl, err)
			}
			st, err := e.auth.Status()
			if err != nil {
				t.Fatal(err)
			}
			if st.Agrees || st.Problem == "" {
				t.Errorf("status %+v: want a disagreement with a problem", st)
			}

			st, err = e.auth.Rotate(actor)
			if err != nil {
				t.Fatalf("Rotate: %v", err)
			}
			if !st.Agrees || st.Generation != 2 || e.auth.Err() != nil {
				t.Errorf("after rotate: %+v, Err %v", st, e.auth.Err())
			}
			wantMode0600(t, path)
			e.wantClass(tok, subj, scope, sess, WrongGeneration)
			fresh := e.issue(subj, scope, sess, time.Hour)
			e.wantClass(fresh, subj, scope, sess, Valid)
			e.reopen()
			if err := e.auth.Err(); err != nil {
				t.Errorf("after rotate and reopen: %v", err)
			}
			e.wantClass(fresh, subj, scope, sess, Valid)
		})
	}
}

// TestRotateNeverFollowsSymlink: a symlinked host.secret is moved aside,
// and the file it pointed at is left untouched.
func TestRotateNeverFollowsSymlink(t *testing.T) {
	e := newEnv(t)
	path := filepath.Join(e.dir, HostSecretFile)
	target := filepath.Join(t.TempDir(), "elsewhere")
	orig := bytes.Repeat([]byte{7}, 32)
	if err := os.WriteFile(target, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	e.close()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	e.open()
	var te *TrustError
	if !errors.As(e.auth.Err(), &te) {
		t.Fatalf("symlinked host.secret: Err() = %v, want *TrustError", e.auth.Err())
	}
	if _, err := e.auth.Rotate(actor); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); !bytes.Equal(b, orig) {
		t.Error("Rotate wrote through the symlink")
	}
	wantMode0600(t, path)
	if e.auth.Err() != nil {
		t.Errorf("after rotate: %v", e.auth.Err())
	}
}

// TestTokensNeverStored: neither the token nor its raw bytes appear in
// warden.db, and no receipt carries it.
func TestTokensNeverStored(t *testing.T) {
	e := newEnv(t)
	wantMode0600(t, filepath.Join(e.dir, HostSecretFile))
	var toks []string
	for i := 0; i < 3; i++ {
		toks = append(toks, e.issue("m", "hook", "run-x", time.Hour))
	}
	if err := e.auth.Revoke(actor, toks[0]); err != nil {
		t.Fatal(err)
	}
	if err := e.auth.RevokeSession(actor, "run-x"); err != nil {
		t.Fatal(err)
	}
	rs := e.receipts("token.")
	kinds := map[string]int{}
	for _, r := range rs {
		kinds[r.Kind]++
		raw, _ := json.Marshal(r)
		for _, tok := range toks {
			if bytes.Contains(raw, []byte(tok[4:])) {
				t.Errorf("receipt %d (%s) carries a token", r.Seq, r.Kind)
			}
		}
	}
	if kinds["token.issue"] != 3 || kinds["token.revoke"] != 2 {
		t.Errorf("token receipts %v, want 3 issue and 2 revoke", kinds)
	}
	e.close()
	db, err := os.ReadFile(filepath.Join(e.dir, storage.DBFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range toks {
		raw, _ := hex.DecodeString(tok[4:])
		if bytes.Contains(db, []byte(tok[4:])) || bytes.Contains(bytes.ToLower(db), []byte(tok[4:])) || bytes.Contains(db, raw) {
			t.Errorf("warden.db contains token %.12s…", tok)
		}
	}
	// Sanity: the grep does see what is stored (the token records' subject).
	if !bytes.Contains(db, []byte("run-x")) {
		t.Error("warden.db does not contain the session name: the grep above proves nothing")
	}
}

func TestPrune(t *testing.T) {
	e := newEnv(t)
	real := time.Now()
	e.auth.now = func() time.Time { return real.Add(-30 * 24 * time.Hour) }
	old := e.issue("m", "hook", "s", time.Hour)
	e.auth.now = time.Now
	live := e.issue("m", "hook", "s", time.Hour)
	n, err := e.auth.Prune(7 * 24 * time.Hour)
	if err != nil || n != 1 {
		t.Fatalf("Prune = %d, %v; want 1", n, err)
	}
	e.wantClass(old, "m", "hook", "s", Unknown)
	e.wantClass(live, "m", "hook", "s", Valid)
}

// TestConcurrentIssueAndRotate: Issue and Rotate serialise on the root, so
// every token ends up either of the old generation or valid, never a token
// MACed under one secret but recorded under the other generation.
func TestConcurrentIssueAndRotate(t *testing.T) {
	e := newEnv(t)
	type issued struct{ tok, sess string }
	out := make(chan issued, 64)
	done := make(chan struct{})
	for w := 0; w < 4; w++ {
		go func(w int) {
			for i := 0; i < 6; i++ {
				sess := "w" + string(rune('a'+w)) + string(rune('a'+i))
				tok, err := e.auth.Issue(actor, "m", "hook", sess, time.Hour)
				if err != nil {
					t.Error(err)
				}
				e.auth.Classify(tok, "m", "hook", sess)
				out <- issued{tok, sess}
			}
			done <- struct{}{}
		}(w)
	}
	for i := 0; i < 2; i++ {
		if _, err := e.auth.Rotate(actor); err != nil {
			t.Fatal(err)
		}
	}
	for w := 0; w < 4; w++ {
		<-done
	}
	close(out)
	st, _ := e.auth.Status()
	live := 0
	for it := range out {
		switch c := e.classify(it.tok, "m", "hook", it.sess); c {
		case Valid:
			live++
		case WrongGeneration:
		default:
			t.Errorf("token of %s: %s", it.sess, c)
		}
	}
	if live != st.Live {
		t.Errorf("%d tokens classify VALID, status says %d live", live, st.Live)
	}
}

// TestRotateUnrecordedBreaksTrust: when the new host.secret is written but
// its fingerprint cannot be recorded, the authority must stop authorizing
// (as a reopen would) instead of minting tokens under a secret that is gone.
func TestRotateUnrecordedBreaksTrust(t *testing.T) {
	e := newEnv(t)
	tok := e.issue("m", "hook", "s", time.Hour)
	if err := e.store.Close(); err != nil { // every Update now fails
		t.Fatal(err)
	}
	if _, err := e.auth.Rotate(actor); err == nil || !strings.Contains(err.Error(), "warden trust rotate") {
		t.Fatalf("Rotate on a closed store = %v", err)
	}
	var te *TrustError
	if !errors.As(e.auth.Err(), &te) {
		t.Fatalf("after an unrecorded rotate Err() = %v, want *TrustError", e.auth.Err())
	}
	if _, err := e.auth.Issue(actor, "m", "hook", "s", time.Hour); !errors.As(err, &te) {
		t.Errorf("Issue after an unrecorded rotate = %v, want *TrustError", err)
	}
	e.reopen()
	if !errors.As(e.auth.Err(), &te) {
		t.Fatalf("reopened after an unrecorded rotate: Err() = %v, want *TrustError", e.auth.Err())
	}
	e.wantClass(tok, "m", "hook", "s", Unknown)
	if st, err := e.auth.Rotate(actor); err != nil || !st.Agrees || st.Generation != 2 {
		t.Fatalf("Rotate = %+v, %v", st, err)
	}
	e.wantClass(tok, "m", "hook", "s", WrongGeneration)
}
