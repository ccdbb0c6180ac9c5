package engine

import (
	"fmt"

	"github.com/wardenhq/warden/storage"
)

// SetSecret seals and stores a module secret. The receipt names the module
// and the secret, never the value.
func (e *Engine) SetSecret(actor Actor, module, name, value string) error {
	return e.writeName(actor, storage.KindSecretSet, module, name, func(tx *storage.Tx) (bool, error) { return true, tx.SecretSet(module, name, value) })
}

// DeleteSecret removes a module secret; it reports whether one was set.
func (e *Engine) DeleteSecret(actor Actor, module, name string) (existed bool, err error) {
	err = e.writeName(actor, storage.KindSecretDelete, module, name, func(tx *storage.Tx) (bool, error) {
		ok, err := tx.SecretDelete(module, name)
		existed = ok
		return ok, err
	})
	return existed, err
}

// SecretNames lists a module's secret names (never values).
func (e *Engine) SecretNames(module string) (names []string, err error) {
	err = e.store.View(func(tx *storage.Tx) error {
		names = tx.SecretNames(module)
		return nil
	})
	return names, err
}

// SetConfig stores a module config value.
func (e *Engine) SetConfig(actor Actor, module, name, value string) error {
	return e.writeName(actor, storage.KindConfigSet, module, name, func(tx *storage.Tx) (bool, error) { return true, tx.ConfigSet(module, name, value) })
}

// DeleteConfig removes a module config value.
func (e *Engine) DeleteConfig(actor Actor, module, name string) (existed bool, err error) {
	err = e.writeName(actor, storage.KindConfigDelete, module, name, func(tx *storage.Tx) (bool, error) {
		ok, err := tx.ConfigDelete(module, name)
		existed = ok
		return ok, err
	})
	return existed, err
}

// Config reads one config value.
func (e *Engine) Config(module, name string) (value string, ok bool, err error) {
	err = e.store.View(func(tx *storage.Tx) error {
		value, ok, err = tx.ConfigGet(module, name)
		return err
	})
	return value, ok, err
}

// ConfigAll reads a module's config.
func (e *Engine) ConfigAll(module string) (m map[string]string, err error) {
	err = e.store.View(func(tx *storage.Tx) error {
		m, err = tx.ConfigAll(module)
		return err
	})
	return m, err
}

// writeName applies one named write and its receipt in one transaction:
// either both land or neither does. A write that changed nothing (deleting
// a name that was not set) records no receipt: the log lists store writes.
func (e *Engine) writeName(actor Actor, kind, module, name string, write func(*storage.Tx) (changed bool, err error)) error {
	if err := e.authorize(actor, kind+" "+module+"/"+name); err != nil {
		return err
	}
	if err := storage.CheckName(module, name); err != nil {
		return err
	}
	_, err := e.store.Update(func(tx *storage.Tx) error {
		if changed, err := write(tx); err != nil || !changed {
			return err
		}
		_, err := tx.AppendReceipt(storage.Draft{Kind: kind, Actor: string(actor), Subject: module,
			Summary: fmt.Sprintf("%s %s/%s", kind, module, name), Details: map[string]any{"module": module, "name": name}})
		return err
	})
	return err
}
