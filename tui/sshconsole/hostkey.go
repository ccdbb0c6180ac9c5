package sshconsole

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	gossh "golang.org/x/crypto/ssh"
)

// HostKey returns the host key PEM at <data>/ssh_host_ed25519, creating
// it once (exclusively). A key file that is not a regular file of ours,
// mode 0600, with one link, is refused.
func HostKey(dataDir string) ([]byte, error) {
	path := filepath.Join(dataDir, HostKeyFile)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	switch {
	case err == nil:
		_, priv, gerr := ed25519.GenerateKey(rand.Reader)
		if gerr != nil {
			f.Close()
			os.Remove(path)
			return nil, gerr
		}
		blk, merr := gossh.MarshalPrivateKey(priv, "warden ssh host key")
		if merr != nil {
			f.Close()
			os.Remove(path)
			return nil, merr
		}
		data := pem.EncodeToMemory(blk)
		if _, werr := f.Write(data); werr != nil {
			f.Close()
			os.Remove(path)
			return nil, fmt.Errorf("host key: %w", werr)
		}
		if cerr := f.Close(); cerr != nil {
			os.Remove(path)
			return nil, fmt.Errorf("host key: %w", cerr)
		}
	case errors.Is(err, os.ErrExist):
	default:
		return nil, fmt.Errorf("host key: %w", err)
	}
	f, err = os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("host key %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("host key %s: %w", path, err)
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("host key %s is not a regular file; refusing it", path)
	case fi.Mode().Perm() != 0o600:
		return nil, fmt.Errorf("host key %s has mode %04o, want 0600; refusing it", path, fi.Mode().Perm())
	case st == nil || int(st.Uid) != os.Geteuid():
		return nil, fmt.Errorf("host key %s is not owned by uid %d; refusing it", path, os.Geteuid())
	case st.Nlink != 1:
		return nil, fmt.Errorf("host key %s has %d links, want 1; refusing it", path, st.Nlink)
	}
	data, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return nil, fmt.Errorf("host key %s: %w", path, err)
	}
	if _, err := gossh.ParsePrivateKey(data); err != nil {
		return nil, fmt.Errorf("host key %s: %w", path, err)
	}
	return data, nil
}

// HostKeyFingerprint is the SHA256 fingerprint of a host key PEM, as ssh
// shows it ("SHA256:…").
func HostKeyFingerprint(pemKey []byte) (string, error) {
	signer, err := gossh.ParsePrivateKey(pemKey)
	if err != nil {
		return "", err
	}
	return gossh.FingerprintSHA256(signer.PublicKey()), nil
}
