package hookkit

import (
	"encoding/json"
	"fmt"

	"github.com/wardenhq/warden/engine/sdk/protocol"
)

// Store is the module's secrets or config, limited to declared names.
type Store struct {
	c    *Client
	name string // "secrets" or "config"
}

// Secrets is the module's sealed secret store.
func (c *Client) Secrets() *Store { return &Store{c: c, name: "secrets"} }

// Config is the module's config store.
func (c *Client) Config() *Store { return &Store{c: c, name: "config"} }

func (s *Store) op(method string, args ...any) (json.RawMessage, error) {
	raw, err := marshalArgs(args)
	if err != nil {
		return nil, err
	}
	return s.c.roundTrip(func(id int64) protocol.Frame {
		return &protocol.StoreOp{ID: id, Store: s.name, Method: method, Args: raw}
	})
}

// Get reads a value; ok is false when it is not set.
func (s *Store) Get(name string) (value string, ok bool, err error) {
	v, err := s.op("get", name)
	if err != nil {
		return "", false, err
	}
	if string(v) == "null" {
		return "", false, nil
	}
	if err := json.Unmarshal(v, &value); err != nil {
		return "", false, fmt.Errorf("hookkit: %s.get returned %s, not a string", s.name, v)
	}
	return value, true, nil
}

// Set stores a value; it lands at once.
func (s *Store) Set(name, value string) error {
	_, err := s.op("set", name, value)
	return err
}

// Delete removes a value; it lands at once.
func (s *Store) Delete(name string) error {
	_, err := s.op("delete", name)
	return err
}

// Tx collects writes that land all together or not at all.
type Tx struct {
	s   *Store
	ops []txOp
}

type txOp struct {
	Op    string  `json:"op"`
	Name  string  `json:"name"`
	Value *string `json:"value,omitempty"`
}

// Tx starts a transaction on the store.
func (s *Store) Tx() *Tx { return &Tx{s: s} }

// Set adds a write to the transaction.
func (t *Tx) Set(name, value string) *Tx {
	t.ops = append(t.ops, txOp{Op: "set", Name: name, Value: &value})
	return t
}

// Delete adds a removal to the transaction.
func (t *Tx) Delete(name string) *Tx {
	t.ops = append(t.ops, txOp{Op: "delete", Name: name})
	return t
}

// Commit applies every write in one storage transaction.
func (t *Tx) Commit() error {
	ops := t.ops
	if ops == nil {
		ops = []txOp{}
	}
	_, err := t.s.op("transaction", ops)
	return err
}
