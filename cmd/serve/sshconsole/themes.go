package sshconsole

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"

	"github.com/wardenhq/warden/engine"
	"github.com/wardenhq/warden/themes"
)

// ThemesFile holds each SSH key's theme, chosen with :theme in its
// console: <data>/ssh_themes.json, {"ssh:SHA256:…": "light"}.
const ThemesFile = "ssh_themes.json"

// keyThemes remembers the theme each key chose, across sessions and
// restarts of serve.
type keyThemes struct {
	path string
	mu   sync.Mutex
}

// get is the theme key last chose ("" when none, or the file is
// unreadable: the default theme then).
func (k *keyThemes) get(actor engine.Actor) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	m := k.read()
	name := m[string(actor)]
	if _, err := themes.Make(name, false, nil); err != nil {
		return "" // a name this warden does not know
	}
	return name
}

// set records key's choice: the file is written whole, 0600, through a
// temporary file renamed over it.
func (k *keyThemes) set(actor engine.Actor, name string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	m := k.read()
	m[string(actor)] = name
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(k.path), ".ssh_themes-*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(append(b, '\n'))
	cerr := tmp.Close()
	if werr != nil || cerr != nil {
		os.Remove(tmp.Name())
		if werr != nil {
			return werr
		}
		return cerr
	}
	if err := os.Rename(tmp.Name(), k.path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}

func (k *keyThemes) read() map[string]string {
	m := map[string]string{}
	if b, err := os.ReadFile(k.path); err == nil {
		json.Unmarshal(b, &m) // a bad file: every key starts afresh
	}
	return m
}
