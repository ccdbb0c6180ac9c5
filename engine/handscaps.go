package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/wardenhq/warden/engine/hands"
	"github.com/wardenhq/warden/engine/perms"
	"github.com/wardenhq/warden/engine/sdk/protocol"
	"github.com/wardenhq/warden/storage"
)

// The hands capabilities (docs/protocol.md; registered by
// defaultCapabilities): every effect is checked against the hands root's
// policy; what the policy does not allow becomes a permission request the
// call waits on.

// handsRoot checks the root argument: a hands root this engine set up and
// that is ready. Anything else is a bad frame, never a request.
func handsRoot(r *activeRun, raw json.RawMessage) (string, *protocol.Error) {
	var root string
	if err := json.Unmarshal(raw, &root); err != nil || root == "" {
		return "", &protocol.Error{Code: protocol.CodeBadFrame, Message: "hands: the first argument is the hands root (an absolute path string)"}
	}
	var rec storage.HandsRecord
	err := r.e.store.View(func(tx *storage.Tx) (err error) {
		rec, err = tx.Hands(root)
		return err
	})
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return "", &protocol.Error{Code: protocol.CodeBadFrame, Message: fmt.Sprintf("hands: %s is not a hands root of this engine (see `warden hands list`)", root)}
	case err != nil:
		return "", r.storageFailed("hands", err)
	case rec.Phase != string(hands.PhaseReady):
		return "", &protocol.Error{Code: protocol.CodeBadFrame, Message: fmt.Sprintf("hands: %s is %s, not ready", root, rec.Phase)}
	}
	return root, nil
}

// permit asks the policy (and, failing it, the operator) for one effect.
func permit(ctx context.Context, r *activeRun, root, op string, content any) *protocol.Error {
	if err := r.e.RequestPermission(ctx, r, handsSubject(root), op, content); err != nil {
		var pe *protocol.Error
		if errors.As(err, &pe) {
			return pe
		}
		if isStorageFailure(err) { // the request could not be recorded
			return r.storageFailed(op, err)
		}
		return &protocol.Error{Code: protocol.CodePermissionDenied, Message: err.Error()}
	}
	return nil
}

func effectFailed(what string, err error) *protocol.Error {
	return &protocol.Error{Code: protocol.CodeBadFrame, Message: what + ": " + err.Error()}
}

func handsExec(ctx context.Context, r *activeRun, args []json.RawMessage) (json.RawMessage, *protocol.Error) {
	if len(args) != 2 {
		return nil, &protocol.Error{Code: protocol.CodeBadFrame, Message: `hands.exec: want [root, ["argv", ...]]`}
	}
	root, perr := handsRoot(r, args[0])
	if perr != nil {
		return nil, perr
	}
	var argv []string
	if err := json.Unmarshal(args[1], &argv); err != nil || len(argv) == 0 {
		return nil, &protocol.Error{Code: protocol.CodeBadFrame, Message: "hands.exec: argv must be a non-empty array of strings"}
	}
	if perr := permit(ctx, r, root, perms.OpExec, map[string]any{"root": root, "argv": argv}); perr != nil {
		return nil, perr
	}
	res, err := hands.Exec(ctx, root, argv)
	if err != nil {
		return nil, effectFailed("hands.exec", err)
	}
	b, _ := json.Marshal(map[string]any{"exit": res.Exit, "stdout": res.Stdout, "stderr": res.Stderr})
	return b, nil
}

func handsRead(ctx context.Context, r *activeRun, args []json.RawMessage) (json.RawMessage, *protocol.Error) {
	a, ok := stringArgs(args, 2)
	if !ok {
		return nil, &protocol.Error{Code: protocol.CodeBadFrame, Message: `hands.read: want [root, path]`}
	}
	root, perr := handsRoot(r, args[0])
	if perr != nil {
		return nil, perr
	}
	if perr := permit(ctx, r, root, perms.OpRead, map[string]any{"root": root, "path": a[1]}); perr != nil {
		return nil, perr
	}
	s, err := hands.Read(ctx, root, a[1])
	if err != nil {
		return nil, effectFailed("hands.read", err)
	}
	b, _ := json.Marshal(s)
	return b, nil
}

func handsWrite(ctx context.Context, r *activeRun, args []json.RawMessage) (json.RawMessage, *protocol.Error) {
	a, ok := stringArgs(args, 3)
	if !ok {
		return nil, &protocol.Error{Code: protocol.CodeBadFrame, Message: `hands.write: want [root, path, content]`}
	}
	root, perr := handsRoot(r, args[0])
	if perr != nil {
		return nil, perr
	}
	// The request shows the exact bytes to be written (the digest binds
	// them: an approval never covers other content).
	if perr := permit(ctx, r, root, perms.OpWrite, map[string]any{"root": root, "path": a[1], "content": a[2]}); perr != nil {
		return nil, perr
	}
	if err := hands.Write(ctx, root, a[1], a[2]); err != nil {
		return nil, effectFailed("hands.write", err)
	}
	return json.RawMessage("null"), nil
}
