package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"syscall"
	"time"

	"github.com/wardenhq/warden/engine/caps"
	"github.com/wardenhq/warden/engine/hooks"
	"github.com/wardenhq/warden/engine/sdk/protocol"
	"github.com/wardenhq/warden/storage"
)

// The broker.Handler side of a run.

// Authorize checks a hello's token against this run. The class is recorded
// when it is not VALID; the hook only ever hears "unauthorized".
func (r *activeRun) Authorize(token string) error {
	class, err := r.e.auth.Check(token, r.rec.ID, "hook", r.rec.ID)
	if err != nil {
		if class == caps.Malformed || class == caps.Unknown {
			// Not even shaped like this run's token: say so in the stream
			// (never the token itself) but do not flood receipts.
			r.streamLine(storage.LevelWarn, fmt.Sprintf("a connection was refused: token %s", class))
			return err
		}
		// A revoked (or expired) token of this run, presented again and
		// again, is receipted once per class and run; the rest are
		// counted in the run's hook.end receipt (20,000 presentations
		// made 20,000 receipts in 16 s).
		r.mu.Lock()
		_, seen := r.tokenRefused[class]
		if r.tokenRefused == nil {
			r.tokenRefused = map[caps.Class]int{}
		}
		if seen {
			r.tokenRefused[class]++
		} else {
			r.tokenRefused[class] = 0
		}
		r.mu.Unlock()
		if seen {
			return err
		}
		r.streamLine(storage.LevelWarn, fmt.Sprintf("a connection was refused: token %s; further refusals of it are counted in the run's hook.end receipt", class))
		r.e.store.AppendReceipt(storage.Draft{Kind: storage.KindTokenRefused, Actor: r.actor, Subject: r.rec.ID,
			Summary: "hook connection refused: token " + string(class), Details: map[string]any{"class": string(class)}})
		return err
	}
	return nil
}

// tokenRefusedUnrecorded is, per token class, how many refused
// connections were counted but not receipted.
func (r *activeRun) tokenRefusedUnrecorded() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for c, n := range r.tokenRefused {
		if n > 0 {
			out[string(c)] = n
		}
	}
	return out
}

// Context is the answer to a good hello.
func (r *activeRun) Context() *protocol.Context {
	ctx, _ := r.context()
	return ctx
}

// context is the answer to a good hello, and whether it holds the
// module's config (false when the store could not be read: the config
// is then empty, and the frame not worth keeping).
func (r *activeRun) context() (*protocol.Context, bool) {
	cfg, err := r.e.ConfigAll(r.manifest.ID)
	if err != nil {
		cfg = map[string]string{}
	}
	capMap := map[string][]string{}
	for _, c := range r.hook.Requires {
		capMap[c] = r.e.capabilities.methods(c)
	}
	// operator.confirm is always offered: any hook may ask the operator.
	capMap["operator"] = r.e.capabilities.methods("operator")
	return &protocol.Context{
		Protocol: protocol.Version, Run: r.rec.ID, Module: r.manifest.ID, Hook: r.hook.Name,
		Inputs: r.inputs, Config: cfg,
		Declared:     protocol.Declared{Secrets: nonNil(r.manifest.Secrets), Config: nonNil(r.manifest.Config)},
		Capabilities: capMap,
	}, err == nil
}

// EncodedContext is Context encoded, kept while the store's config stays
// as it was (broker.ContextEncoder): a shell hook's every `warden hook`
// call says hello, and reading the module's config and encoding the
// frame again for each would be a third of the broker's work for it. The
// rest of the context is the run's own and never changes.
func (r *activeRun) EncodedContext() ([]byte, error) {
	gen := r.e.store.ConfigGeneration() // before the config is read
	r.contextMu.Lock()
	frame, ok := r.contextFrame, r.contextFrame != nil && r.contextGen == gen
	r.contextMu.Unlock()
	if ok {
		return frame, nil
	}
	ctx, whole := r.context()
	frame, err := protocol.Encode(ctx)
	if err != nil || !whole {
		return frame, err // not kept: the next hello reads the config again
	}
	r.contextMu.Lock()
	r.contextFrame, r.contextGen = frame, gen
	r.contextMu.Unlock()
	return frame, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Activity feeds the idle clock.
func (r *activeRun) Activity() {
	if p := r.proc.Load(); p != nil {
		p.Touch()
	}
}

// Log turns a log frame into a stream line.
func (r *activeRun) Log(level, message string) {
	lvl, ok := storage.ParseLevel(level)
	if !ok {
		lvl = storage.LevelInfo
	}
	r.ingest.add([]storage.Line{{At: time.Now().UTC(), Level: lvl, Text: message}})
}

// LogBatch turns a run of log frames into stream lines, in one append
// (broker.LogBatcher).
func (r *activeRun) LogBatch(frames []protocol.Log) {
	now := time.Now().UTC()
	lines := make([]storage.Line, len(frames))
	for i, f := range frames {
		lvl, ok := storage.ParseLevel(f.Level)
		if !ok {
			lvl = storage.LevelInfo
		}
		lines[i] = storage.Line{At: now, Level: lvl, Text: f.Message}
	}
	r.ingest.add(lines)
}

// Result validates the outputs against the manifest.
func (r *activeRun) Result(outputs map[string]json.RawMessage) *protocol.Error {
	if err := hooks.CheckOutputs(r.hook.Outputs, outputs); err != nil {
		r.mu.Lock()
		r.resultErr = err.Error()
		r.mu.Unlock()
		r.streamLine(storage.LevelError, "result refused: "+err.Error())
		return &protocol.Error{Code: protocol.CodeBadFrame, Message: "result refused: " + err.Error()}
	}
	r.mu.Lock()
	r.outputs = outputs
	r.resultErr = ""
	r.mu.Unlock()
	return nil
}

// HookError records the hook's own failure report.
func (r *activeRun) HookError(e protocol.ErrorBody) {
	r.mu.Lock()
	r.hookErr = &e
	r.mu.Unlock()
	r.streamLine(storage.LevelError, fmt.Sprintf("hook error: %s: %s", e.Name, e.Message))
}

// Store runs a secrets or config operation, limited to declared names.
func (r *activeRun) Store(_ context.Context, op *protocol.StoreOp) (json.RawMessage, *protocol.Error) {
	m := r.manifest
	declared := m.Secrets
	kind := "secret"
	if op.Store == "config" {
		declared, kind = m.Config, "config"
	}
	checkName := func(name string, write bool) *protocol.Error {
		if op.Store == "config" && !write {
			return nil // hooks may read any of their module's config
		}
		if !slices.Contains(declared, name) {
			return &protocol.Error{Code: protocol.CodeUndeclaredName, Message: fmt.Sprintf(
				"module %s did not declare %s %q; its declared %s names are: %s", m.ID, kind, name, kind, namesOrNone(slices.Sorted(slices.Values(declared))))}
		}
		return nil
	}
	what := op.Store + "." + op.Method
	bad := func(format string, args ...any) (json.RawMessage, *protocol.Error) {
		return nil, &protocol.Error{Code: protocol.CodeBadFrame, Message: what + ": " + fmt.Sprintf(format, args...)}
	}
	// Arguments are checked here, before the store is touched, so that
	// every error the store returns is the store's (storage_failed), not
	// the hook's.
	tooLong := func(v string) bool { return len(v) > storage.MaxValueSize }
	// The wire decoder has checked this already; a cheap re-check (no
	// re-encoding of the args) keeps the handler safe on its own.
	for _, a := range op.Args {
		if !json.Valid(a) {
			return bad("args must be an array of JSON values")
		}
	}
	switch op.Method {
	case "get":
		name, ok := stringArgs(op.Args, 1)
		if !ok {
			return bad(`want ["name"]`)
		}
		if e := checkName(name[0], false); e != nil {
			return nil, e
		}
		var v string
		var found bool
		err := r.e.store.View(func(tx *storage.Tx) (err error) {
			if op.Store == "secrets" {
				v, found, err = tx.SecretGet(m.ID, name[0])
			} else {
				v, found, err = tx.ConfigGet(m.ID, name[0])
			}
			return err
		})
		if err != nil {
			return nil, r.storageFailed(what, err)
		}
		if !found {
			return json.RawMessage("null"), nil
		}
		b, _ := json.Marshal(v)
		return b, nil
	case "set", "delete":
		want := 2
		if op.Method == "delete" {
			want = 1
		}
		a, ok := stringArgs(op.Args, want)
		if !ok {
			if want == 2 {
				return bad(`want ["name","value"] (both strings)`)
			}
			return bad(`want ["name"]`)
		}
		if e := checkName(a[0], true); e != nil {
			return nil, e
		}
		o := txOp{Op: op.Method, Name: a[0]}
		if want == 2 {
			if tooLong(a[1]) {
				return bad("value is %d bytes, limit %d", len(a[1]), storage.MaxValueSize)
			}
			o.Value = &a[1]
		}
		if err := r.applyWrites(op.Store, []txOp{o}); err != nil {
			return nil, r.storageFailed(what, err)
		}
		return json.RawMessage("null"), nil
	case "transaction":
		var ops []txOp
		if len(op.Args) != 1 || decodeTxOps(op.Args[0], &ops) != nil {
			return bad(`want [[{"op":"set","name":"a","value":"x"},{"op":"delete","name":"b"}]]`)
		}
		if len(ops) == 0 {
			return bad("empty transaction")
		}
		for i, o := range ops {
			if o.Op != "set" && o.Op != "delete" {
				return bad("op %d: unknown op %q (want set or delete); nothing was applied", i, o.Op)
			}
			if o.Op == "delete" && o.Value != nil {
				return bad("op %d: delete takes no value; nothing was applied", i)
			}
			if o.Op == "set" && o.Value == nil {
				return bad("op %d: set needs a value; nothing was applied", i)
			}
			if o.Value != nil && tooLong(*o.Value) {
				return bad("op %d: value is %d bytes, limit %d; nothing was applied", i, len(*o.Value), storage.MaxValueSize)
			}
			if e := checkName(o.Name, true); e != nil {
				e.Message += "; nothing was applied"
				return nil, e
			}
		}
		if err := r.applyWrites(op.Store, ops); err != nil {
			return nil, r.storageFailed(what, err)
		}
		return json.RawMessage("null"), nil
	}
	return bad("unknown method")
}

// storageFailed is the answer to an operation the store refused: code
// storage_failed. The hook hears what the filesystem said when the disk
// is full, and nothing of the host's paths or the store's layout
// otherwise; the operator gets the whole error in the run's stream.
func (r *activeRun) storageFailed(what string, err error) *protocol.Error {
	r.streamLine(storage.LevelError, what+": the store refused it: "+err.Error())
	why := "the engine's store refused it"
	switch {
	case errors.Is(err, syscall.ENOSPC):
		why = "the engine's disk is full (" + syscall.ENOSPC.Error() + ")"
	case errors.Is(err, syscall.EDQUOT):
		why = "the engine's disk quota is spent (" + syscall.EDQUOT.Error() + ")"
	case errors.Is(err, storage.ErrClosed):
		why = "the engine is shutting down"
	}
	return &protocol.Error{Code: protocol.CodeStorageFailed, Message: what + ": " + why + "; nothing was applied"}
}

// isStorageFailure tells the store's own failures (the filesystem, a
// closed or corrupt store) from refusals of what was asked.
func isStorageFailure(err error) bool {
	var pe *fs.PathError
	var errno syscall.Errno
	var ce *storage.CorruptError
	return errors.Is(err, storage.ErrClosed) || errors.As(err, &pe) || errors.As(err, &errno) || errors.As(err, &ce)
}

type txOp struct {
	Op    string  `json:"op"`
	Name  string  `json:"name"`
	Value *string `json:"value,omitempty"`
}

func decodeTxOps(raw json.RawMessage, ops *[]txOp) error {
	var tmp []struct {
		Op    string  `json:"op"`
		Name  string  `json:"name"`
		Value *string `json:"value"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&tmp); err != nil {
		return err
	}
	for _, t := range tmp {
		*ops = append(*ops, txOp{Op: t.Op, Name: t.Name, Value: t.Value})
	}
	return nil
}

// applyWrites lands every write and one receipt in a single transaction:
// all or nothing. The receipt names the names, never the values.
func (r *activeRun) applyWrites(store string, ops []txOp) error {
	m := r.manifest
	var set, del []string
	_, err := r.e.store.Update(func(tx *storage.Tx) error {
		set, del = set[:0], del[:0]
		for _, o := range ops {
			var err error
			switch {
			case o.Op == "set" && store == "secrets":
				v := ""
				if o.Value != nil {
					v = *o.Value
				}
				err = tx.SecretSet(m.ID, o.Name, v)
				set = append(set, o.Name)
			case o.Op == "set":
				v := ""
				if o.Value != nil {
					v = *o.Value
				}
				err = tx.ConfigSet(m.ID, o.Name, v)
				set = append(set, o.Name)
			case store == "secrets":
				_, err = tx.SecretDelete(m.ID, o.Name)
				del = append(del, o.Name)
			default:
				_, err = tx.ConfigDelete(m.ID, o.Name)
				del = append(del, o.Name)
			}
			if err != nil {
				return err
			}
		}
		kind := storage.KindSecretWrite
		if store == "config" {
			kind = storage.KindConfigWrite
		}
		details := map[string]any{"module": m.ID, "run": r.rec.ID}
		if len(set) > 0 {
			details["set"] = set
		}
		if len(del) > 0 {
			details["deleted"] = del
		}
		_, err := tx.AppendReceipt(storage.Draft{Kind: kind, Actor: r.actor, Subject: m.ID,
			Summary: fmt.Sprintf("%s by %s/%s: set %s; deleted %s", store, m.ID, r.hook.Name, namesOrNone(set), namesOrNone(del)), Details: details})
		return err
	})
	return err
}

func stringArgs(args []json.RawMessage, n int) ([]string, bool) {
	if len(args) != n {
		return nil, false
	}
	out := make([]string, n)
	for i, a := range args {
		if err := json.Unmarshal(a, &out[i]); err != nil || (len(a) > 0 && a[0] != '"') {
			return nil, false
		}
	}
	return out, true
}
