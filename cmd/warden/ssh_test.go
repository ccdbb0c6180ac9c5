package main

// The SSH console as `warden serve --ssh` and `warden doctor` give it:
// the binary's flags and signals. The console's own behaviour is tested
// in-process beside it (cmd/serve/sshconsole).

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
	gossh "golang.org/x/crypto/ssh"

	"github.com/wardenhq/warden/cmd/serve/sshconsole"
	"github.com/wardenhq/warden/cmd/serve/sshconsole/sshtest"
)

// Doctor reports a malformed operators line by its number and exits 1:
// serve skips the line, but the operator who asked doctor to check the
// file has a line to fix (scripts rely on the exit code).
func TestDoctorReportsOperatorsFile(t *testing.T) {
	c := newCLI(t)
	needBwrap(t)
	path := filepath.Join(t.TempDir(), "operators")
	good, _, _, _, err := gossh.ParseAuthorizedKey([]byte("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGl9WQ3Z8rS4dA1b0tYtqHk2R3Hq2m0Yc0g6d6mN9WlP a@b"))
	if err != nil {
		t.Fatal(err)
	}
	body := "operator " + string(gossh.MarshalAuthorizedKey(good)) + "viewer not-a-key\n"
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	r := c.run("doctor", "--operators", path)
	if r.code != 1 || !strings.Contains(r.stdout, "operators file") || !strings.Contains(r.stdout, "line 2") {
		t.Errorf("doctor --operators: %s", r)
	}
}

// TestSSHServeSIGTERMRestoresTerminals: SIGTERM to `warden serve --ssh`
// with two consoles open ends both sessions as `q` would: each client gets
// the sequences that leave the alternate screen and turn mouse reporting
// off, then a line saying why, then exit status 0; serve exits 0.
func TestSSHServeSIGTERMRestoresTerminals(t *testing.T) {
	base := privateDir(t, "warden-ssh-term-")
	bin := filepath.Join(base, "bin", "warden")
	data := filepath.Join(base, "data")
	buildWarden(t, bin)
	op, opPub := sshtest.Key(t)
	vw, vwPub := sshtest.Key(t)
	operators := filepath.Join(base, "operators")
	if err := os.WriteFile(operators, []byte("operator "+opPub+"\nviewer "+vwPub+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", freePort(t))
	var stdout, log lockedBuffer
	serve := exec.Command(bin, "--data-dir", data, "serve", "--ssh", addr, "--operators", operators)
	serve.Stdout, serve.Stderr = &stdout, &log
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- serve.Wait() }()
	t.Cleanup(func() { serve.Process.Kill() })
	output := func() string { return "serve stdout:\n" + stdout.String() + "serve stderr:\n" + log.String() }
	waitUntil(t, "serving", 20*time.Second, func() bool { return strings.Contains(log.String(), "listening on") }, output)
	pemData, err := os.ReadFile(filepath.Join(data, sshconsole.HostKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	hk, err := gossh.ParsePrivateKey(pemData)
	if err != nil {
		t.Fatal(err)
	}
	cons := []*sshtest.Console{
		sshtest.Open(t, addr, hk.PublicKey(), op, &log),
		sshtest.Open(t, addr, hk.PublicKey(), vw, &log),
	}

	start := time.Now()
	if err := serve.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for i, con := range cons {
		select {
		case <-con.Done:
		case <-time.After(15 * time.Second):
			t.Fatalf("console %d still open 15s after SIGTERM\n%s", i, output())
		}
		t.Logf("console %d ended %s after SIGTERM", i, time.Since(start).Round(time.Millisecond))
		if con.Err != nil {
			t.Errorf("console %d ended with %v, want exit status 0", i, con.Err)
		}
		// What the client got after it last entered the alternate screen.
		raw := con.Screen.String()
		if strings.Contains(raw, "GONE") {
			t.Errorf("console %d showed a crash for a clean shutdown:\n%q", i, lastN(raw, 600))
		}
		j := strings.LastIndex(raw, ansi.SetModeAltScreenSaveCursor)
		if j < 0 {
			t.Errorf("console %d never entered the alternate screen", i)
			continue
		}
		tail := raw[j:]
		var missing []string
		for _, want := range []struct{ name, seq string }{
			{"alternate screen off", ansi.ResetModeAltScreenSaveCursor},
			{"mouse cell motion off", ansi.ResetModeMouseButtonEvent},
			{"SGR mouse off", ansi.ResetModeMouseExtSgr},
			{"cursor shown", ansi.ShowCursor},
		} {
			if !strings.Contains(tail, want.seq) {
				missing = append(missing, fmt.Sprintf("%s (%q)", want.name, want.seq))
			}
		}
		if k := strings.LastIndex(tail, ansi.ResetModeAltScreenSaveCursor); k < 0 || !strings.Contains(tail[k:], sshconsole.ShutdownLine) {
			missing = append(missing, fmt.Sprintf("%q on the restored screen", sshconsole.ShutdownLine))
		}
		if len(missing) > 0 {
			t.Errorf("console %d after SIGTERM lacks %s; it got:\n%q", i, strings.Join(missing, ", "), lastN(tail, 600))
		}
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("serve exited %v after SIGTERM\n%s", err, output())
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("serve still running 15s after SIGTERM\n%s", output())
	}
	t.Logf("serve stopped %s after SIGTERM", time.Since(start).Round(time.Millisecond))
}

func lastN(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
