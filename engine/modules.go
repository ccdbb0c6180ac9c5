package engine

import (
	"errors"
	"fmt"
	"time"

	"github.com/wardenhq/warden/engine/hooks"
	"github.com/wardenhq/warden/storage"
)

// ModuleRecord is a registered module.
type ModuleRecord = storage.ModuleRecord

// Module is a registered module with its manifest as read now.
type Module struct {
	Record   ModuleRecord    `json:"record"`
	Manifest *hooks.Manifest `json:"manifest,omitempty"`
	Problem  string          `json:"problem,omitempty"` // why the manifest cannot be used now
}

// AddModule admits a module folder, decodes its manifest strictly and
// registers it. Adding the same id again re-registers it (e.g. it moved).
func (e *Engine) AddModule(actor Actor, path string) (*Module, error) {
	if err := e.authorize(actor, "add module "+path); err != nil {
		return nil, err
	}
	if err := hooks.AdmitModulePath(path); err != nil {
		return nil, err
	}
	m, err := hooks.LoadManifest(path)
	if err != nil {
		return nil, err
	}
	if m.ID == RunModule {
		return nil, &hooks.ManifestError{File: m.File, Key: "id", Problem: fmt.Sprintf("%q is warden run's own module id (its sessions and secrets): give the module another id", RunModule)}
	}
	if err := hooks.CheckCeiling(m, e.ceiling()); err != nil {
		return nil, err
	}
	if err := hooks.CheckPrograms(m); err != nil {
		return nil, err
	}
	rec := ModuleRecord{ID: m.ID, Path: path, Version: m.Version, Description: m.Description, Added: time.Now().UTC()}
	_, err = e.store.Update(func(tx *storage.Tx) error {
		if old, err := tx.Module(m.ID); err == nil && old.Path != path {
			return fmt.Errorf("module id %q is already registered from %s; remove it first (`warden module remove %s`)", m.ID, old.Path, m.ID)
		}
		if err := tx.PutModule(rec); err != nil {
			return err
		}
		_, err := tx.AppendReceipt(storage.Draft{Kind: storage.KindModuleAdd, Actor: string(actor), Subject: m.ID,
			Summary: fmt.Sprintf("module %s %s added from %s", m.ID, m.Version, path), Details: map[string]any{"path": path, "version": m.Version, "hooks": len(m.Hooks)}})
		return err
	})
	if err != nil {
		return nil, err
	}
	return &Module{Record: rec, Manifest: m}, nil
}

// RemoveModule unregisters a module. Its secrets and config stay (they
// are the operator's data); the receipt says so.
func (e *Engine) RemoveModule(actor Actor, id string) error {
	if err := e.authorize(actor, "remove module "+id); err != nil {
		return err
	}
	_, err := e.store.Update(func(tx *storage.Tx) error {
		existed, err := tx.DeleteModule(id)
		if err != nil {
			return err
		}
		if !existed {
			return storage.Mark(ErrNotFound, "no module %q (see `warden module list`)", id)
		}
		_, err = tx.AppendReceipt(storage.Draft{Kind: storage.KindModuleRemove, Actor: string(actor), Subject: id,
			Summary: "module " + id + " removed (its secrets and config are kept)"})
		return err
	})
	return err
}

// Modules lists registered modules, each with its manifest read now.
func (e *Engine) Modules() ([]Module, error) {
	var recs []ModuleRecord
	if err := e.store.View(func(tx *storage.Tx) (err error) {
		recs, err = tx.Modules()
		return err
	}); err != nil {
		return nil, err
	}
	out := make([]Module, 0, len(recs))
	for _, r := range recs {
		out = append(out, e.loadModule(r))
	}
	return out, nil
}

// Module reads one registered module and its manifest.
func (e *Engine) Module(id string) (*Module, error) {
	var rec ModuleRecord
	err := e.store.View(func(tx *storage.Tx) (err error) {
		rec, err = tx.Module(id)
		return err
	})
	if errors.Is(err, storage.ErrNotFound) {
		return nil, storage.Mark(ErrNotFound, "no module %q (add it with `warden module add PATH`)", id)
	}
	if err != nil {
		return nil, err
	}
	m := e.loadModule(rec)
	return &m, nil
}

// loadModule re-admits the folder and re-reads the manifest: the folder may
// have changed since it was added, and a run must see it as it is now.
func (e *Engine) loadModule(r ModuleRecord) Module {
	if err := hooks.AdmitModulePath(r.Path); err != nil {
		return Module{Record: r, Problem: err.Error()}
	}
	m, err := hooks.LoadManifest(r.Path)
	if err != nil {
		return Module{Record: r, Problem: err.Error()}
	}
	if m.ID != r.ID {
		return Module{Record: r, Problem: fmt.Sprintf("manifest id is now %q, registered as %q: re-add the module", m.ID, r.ID)}
	}
	return Module{Record: r, Manifest: m}
}

// ceiling is the operator's ceiling of hooks' resource limits.
func (e *Engine) ceiling() hooks.Resources { return e.opts.LimitCeiling.Or(hooks.DefaultCeiling) }
