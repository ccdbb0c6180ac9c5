package sshconsole

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"
)

// HostKey returns the host key PEM at <data>/ssh_host_ed25519, creating
// it once. A key file that is not a regular file of ours, mode 0600, with
// one link, is refused.
//
// The key is a secret, so it is written atomically: to a private temp
// file in the same dir, fsynced, then renamed into place only if no key
// is there yet (RENAME_NOREPLACE). A crash or a full disk leaves no key,
// or a whole one; never a partial key that would be refused for good.
func HostKey(dataDir string) ([]byte, error) {
	path := filepath.Join(dataDir, HostKeyFile)
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		if err := createHostKey(dataDir, path); err != nil {
			return nil, fmt.Errorf("host key: %w", err)
		}
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
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

// createHostKey writes a fresh key to path, unless one appears there
// first (another warden starting at the same moment): then that one
// stands.
func createHostKey(dir, path string) error {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	blk, err := gossh.MarshalPrivateKey(priv, "warden ssh host key")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+HostKeyFile+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // gone once renamed; else the leftover
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(pem.EncodeToMemory(blk)); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	err = unix.Renameat2(unix.AT_FDCWD, tmp.Name(), unix.AT_FDCWD, path, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EEXIST) {
		return nil
	}
	if err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
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
