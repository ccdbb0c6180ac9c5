package storage

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// KeySize is the size of host.secret and seal.key.
const KeySize = 32

// LoadKeyFile reads a 32-byte key file of the data dir, holding it to the
// private-file policy. When create is set and the file is missing it is
// made exclusively (O_EXCL, 0600) from fresh random bytes.
func LoadKeyFile(dir, name string, create bool) ([]byte, error) {
	path := filepath.Join(dir, name)
	key, err := readKeyFile(path)
	if errors.Is(err, fs.ErrNotExist) && create {
		if err := createKeyFile(path); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		return readKeyFile(path)
	}
	return key, err
}

func readKeyFile(path string) ([]byte, error) {
	if err := checkPrivateFile(path); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|noFollow, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	key := make([]byte, KeySize+1)
	n, err := io.ReadFull(f, key)
	if n != KeySize || !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, &PolicyError{Path: path, Problem: fmt.Sprintf("key file must hold exactly %d bytes", KeySize), Fix: "restore it from a backup; for host.secret `warden trust rotate` makes a new one"}
	}
	return key[:KeySize], nil
}

func createKeyFile(path string) error {
	key := make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	return writeFileExclusive(path, key)
}

// ReplaceKeyFile writes a fresh random key atomically over name (temp file,
// fsync, rename, fsync dir) and returns it.
func ReplaceKeyFile(dir, name string) ([]byte, error) {
	key := make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	if err := WriteFileAtomic(filepath.Join(dir, name), key, 0o600); err != nil {
		return nil, err
	}
	return key, nil
}

// writeFileExclusive creates path with data, failing if it exists. The
// data is written and fsynced under a temp name and then hard-linked into
// place, so a crash never leaves a short key file behind.
func writeFileExclusive(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".new-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Link(tmp, path); err != nil { // EEXIST: someone made it first
		return err
	}
	if err := os.Remove(tmp); err != nil { // back to one link
		return err
	}
	return syncDir(dir)
}

// WriteFileAtomic writes data to path through a temp file in the same dir,
// fsyncs it, renames it into place and fsyncs the dir, so a crash leaves
// either the old file or the new one, never a torn one.
func WriteFileAtomic(path string, data []byte, mode fs.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err := f.Chmod(mode); err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	ok = true
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
