package storage

import (
	"errors"
	"path/filepath"
	"time"
)

// ModuleRecord registers a module folder. The manifest itself is read
// from disk (and re-admitted) at every use, so an edit takes effect.
type ModuleRecord struct {
	ID          string    `json:"id"`
	Path        string    `json:"path"`
	Version     string    `json:"version"`
	Description string    `json:"description,omitempty"`
	Added       time.Time `json:"added"`
}

func (r *ModuleRecord) validate() error {
	switch {
	case !modulePattern().MatchString(r.ID):
		return errors.New("bad module id")
	case !filepath.IsAbs(r.Path) || filepath.Clean(r.Path) != r.Path:
		return errors.New("module path is not absolute and clean")
	case r.Added.IsZero():
		return errors.New("missing added time")
	}
	return nil
}

// PutModule registers (or replaces) a module.
func (tx *Tx) PutModule(r ModuleRecord) error { return putRecord(tx, bucketModules, []byte(r.ID), &r) }

// Module reads one module record.
func (tx *Tx) Module(id string) (ModuleRecord, error) {
	var r ModuleRecord
	err := getRecord(tx, bucketModules, []byte(id), id, &r)
	return r, err
}

// DeleteModule unregisters a module; existed reports whether it was known.
func (tx *Tx) DeleteModule(id string) (bool, error) {
	b := tx.bucket(bucketModules)
	if b.Get([]byte(id)) == nil {
		return false, nil
	}
	return true, b.Delete([]byte(id))
}

// Modules lists registered modules by id.
func (tx *Tx) Modules() ([]ModuleRecord, error) {
	var out []ModuleRecord
	err := tx.bucket(bucketModules).ForEach(func(k, v []byte) error {
		var r ModuleRecord
		if err := decodeRecord("modules", string(k), v, &r); err != nil {
			return err
		}
		out = append(out, r)
		return nil
	})
	return out, err
}
